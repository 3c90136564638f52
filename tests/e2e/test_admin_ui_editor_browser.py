"""The campaign pages in a real browser (Debian's Chromium), at 1280 and 375 px: the editor
keeps what was typed when a save is refused and marks the field, the previews are tabs and
fit their column, a double-click on Send lands on the send, the list and a sent campaign read
at a glance; the slug pattern is valid in Chromium, there is a favicon, the charts stay
legible; every page passes axe with no serious or critical finding."""

import re
from pathlib import Path

import pytest
from playwright.sync_api import Browser, ConsoleMessage, Page, expect

from tests.e2e.test_admin_ui_browser import VIEWPORTS, Visit
from tests.support.admin_browser import (
    AdminServer,
    admin_server,  # noqa: F401  (a fixture)
    browser_type_launch_args,  # noqa: F401  (a fixture)
    screenshot_dir,
)

READERS = 4
CSV = "email,name,tier,status\n" + "".join(
    f"friend{n}@example.org,Friend {n},{'paid' if n % 2 else 'free'},confirmed\n"
    for n in range(READERS)
)
BODY = "Dear {{ name }}, the long text I wrote.\n\n::: only paid\nFor members.\n:::\n"


def _nav(page: Page, label: str) -> None:
    page.get_by_role("navigation", name="Admin sections").get_by_role("link", name=label).click()


def _sign_in(page: Page, server: AdminServer) -> None:
    page.goto("/admin")
    page.get_by_label("Email").fill(server.email)
    page.get_by_label("Password").fill(server.password)
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("heading", name="Dashboard")).to_be_visible()


@pytest.mark.slow
@pytest.mark.parametrize("viewport", ["desktop", "mobile"])
def test_editor_keeps_typed_work_and_the_campaign_pages_read_at_a_glance(
    viewport: str,
    admin_server: AdminServer,  # noqa: F811  (the imported fixture)
    browser: Browser,
    tmp_path: Path,
) -> None:
    """An editor's day in a real browser: if typed text is lost on a mistake, a preview does
    not fit, a double-click shows an error or Chromium rejects a form's pattern, the admin
    fails its user whatever the HTTP tests say."""
    context = browser.new_context(viewport=VIEWPORTS[viewport], base_url=admin_server.base_url)
    page = context.new_page()
    console: list[str] = []

    def heard(message: ConsoleMessage) -> None:
        # A refused save answers 422 on purpose; anything else said here is a defect
        # (an invalid pattern, a script error, a blocked resource).
        if message.type in ("error", "warning") and "status of 422" not in message.text:
            console.append(f"{page.url}: {message.text}")

    page.on("console", heard)
    visit = Visit(page, screenshot_dir(tmp_path), viewport)
    _sign_in(page, admin_server)
    icon = page.locator('link[rel="icon"]').get_attribute("href")
    assert icon is not None
    assert page.request.get(icon).headers["content-type"] == "image/svg+xml"

    _nav(page, "Newsletters")
    page.get_by_role("link", name="New newsletter").click()
    slug = page.get_by_role("textbox", name="Slug")
    slug.fill("Not A Slug")
    assert slug.evaluate("box => box.validity.patternMismatch") is True  # the pattern works
    slug.fill("weekly-notes")
    assert slug.evaluate("box => box.validity.valid") is True
    page.get_by_label("Name", exact=True).fill("Weekly Notes")
    page.get_by_label("Sender name").fill("The Editors")
    page.get_by_label("Sender address").fill("editors@example.org")
    page.get_by_role("button", name="Save").click()
    expect(page.get_by_role("link", name="Weekly Notes")).to_be_visible()
    _nav(page, "Subscribers")
    page.get_by_role("link", name="Import CSV").click()
    page.get_by_label("CSV file").set_input_files(
        files=[{"name": "friends.csv", "mimeType": "text/csv", "buffer": CSV.encode()}]
    )
    page.get_by_role("button", name="Import").click()
    expect(
        page.get_by_role("heading", name=f"Done: {READERS} rows into weekly-notes")
    ).to_be_visible()

    _nav(page, "Campaigns")
    page.get_by_role("link", name="New campaign").click()
    page.get_by_label("Subject").fill("Issue two")
    page.get_by_label("Body", exact=True).fill(BODY)
    page.get_by_role("button", name="Create draft").click()
    page.wait_for_load_state("load")
    body = page.get_by_label("Body", exact=True)
    mistake = BODY + "\n::: only gold\nFor nobody.\n:::\n"
    body.fill(mistake)
    expect(page.get_by_text("Not saved: segment blocks name unknown segments")).to_be_visible(
        timeout=20_000
    )
    expect(body).to_have_attribute("aria-invalid", "true")
    expect(body).to_have_value(mistake)  # every word still there
    visit.check("campaign-editor-refused")
    page.get_by_role("button", name="Save draft").click()  # without the script's help
    expect(page.get_by_role("alert")).to_contain_text("unknown segments")
    expect(page.get_by_label("Body", exact=True)).to_have_value(mistake)
    page.wait_for_load_state("load")
    body = page.get_by_label("Body", exact=True)
    body.fill(BODY.replace("long text", "long, fixed text"))
    expect(page.get_by_text("Saved; preview updated.")).to_be_visible(timeout=20_000)
    expect(body).not_to_have_attribute("aria-invalid", "true")

    frame = page.locator("iframe[data-preview]")
    expect(frame).to_have_attribute("title", "free version at desktop width")
    column = page.locator("section", has=frame).bounding_box()
    shown = frame.bounding_box()
    assert column is not None
    assert shown is not None
    assert shown["x"] >= column["x"]
    assert shown["x"] + shown["width"] <= column["x"] + column["width"]  # fits its column
    page.get_by_role("link", name="Paid readers").click()
    page.get_by_role("link", name="Phone").click()
    expect(frame).to_have_attribute("title", "paid version at phone width")
    paid = page.frame_locator('iframe[title="paid version at phone width"]')
    expect(paid.get_by_text("long, fixed text")).to_be_visible()
    expect(paid.get_by_text("For members.")).to_be_visible()
    expect(page.get_by_role("link", name="Paid readers")).to_have_attribute("aria-current", "true")
    visit.check("campaign-editor")

    page.get_by_role("link", name="Send now…").click()
    page.get_by_role("button", name=f"Send to {READERS} subscribers").dblclick()
    expect(page.get_by_role("heading", name="Issue two")).to_be_visible()
    expect(page.get_by_role("heading", name="Verification")).to_be_visible(timeout=60_000)
    expect(page.locator(".badge").first).to_have_text("sent")
    expect(page.locator('[data-field="took"]')).to_have_text(re.compile(r"^\d+ (s|min \d+ s)$"))
    expect(page.get_by_role("heading", name="What was sent")).to_be_visible()
    page.get_by_role("link", name="Paid readers").click()
    expect(page.get_by_role("link", name="Paid readers")).to_have_attribute("aria-current", "true")
    sent_paid = page.frame_locator('iframe[title="paid version at desktop width"]')
    # The frame loads its document after the page: under a full parallel suite on two cores
    # that once took longer than the default 5 s (CI run of ac248c6, phone width).
    expect(sent_paid.get_by_text("For members.")).to_be_visible(timeout=20_000)
    visit.check("campaign-sent-content")

    _nav(page, "Campaigns")
    row = page.get_by_role("row").filter(has_text="Issue two")
    expect(row).to_contain_text("Weekly Notes")
    expect(row.get_by_role("cell", name=str(READERS), exact=True)).to_be_visible()
    visit.check("campaigns")

    _nav(page, "Dashboard")
    labels = page.locator("figure .chart-label span").first
    size = labels.evaluate("label => parseFloat(getComputedStyle(label).fontSize)")
    assert size >= 12  # legible at 375 px: text, not a scaled-down drawing
    chart = page.locator("svg.chart").first.bounding_box()
    assert chart is not None
    assert chart["width"] <= VIEWPORTS[viewport]["width"]
    visit.check("dashboard")
    context.close()
    assert visit.problems == [], "\n".join(visit.problems)
    assert console == [], "\n".join(console)
