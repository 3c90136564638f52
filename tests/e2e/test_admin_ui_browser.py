"""The admin UI in a real browser (Debian's Chromium under pytest-playwright): sign in, import
a CSV, compose and send a campaign to the capture provider and watch the progress bar reach
100%, at desktop and at 375 px; every page passes axe with no serious or critical finding."""

from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page, expect

from tests.support.admin_browser import (
    AdminServer,
    admin_server,  # noqa: F401  (a fixture)
    browser_type_launch_args,  # noqa: F401  (a fixture)
    screenshot_dir,
    serious_violations,
)

VIEWPORTS = {"desktop": {"width": 1280, "height": 900}, "mobile": {"width": 375, "height": 740}}
READERS = 30
CSV = (
    "email,name,tier,status\n"
    + "".join(
        f"reader{n}@example.org,Reader {n},{'paid' if n % 3 == 0 else 'free'},confirmed\n"
        for n in range(READERS)
    )
    + "broken-address,Nobody,free,confirmed\n"
)


class Visit:
    """Steps through the UI, checking every page with axe and keeping a screenshot of it."""

    def __init__(self, page: Page, shots: Path, name: str) -> None:
        self.page = page
        self.shots = shots
        self.name = name
        self.problems: list[str] = []

    def check(self, label: str) -> None:
        self.page.wait_for_load_state("load")
        found = serious_violations(self.page)
        self.problems.extend(f"{label}: {problem}" for problem in found)
        suffix = "" if self.name == "desktop" else f"-{self.name}"
        self.page.screenshot(path=str(self.shots / f"admin-{label}{suffix}.png"), full_page=True)


def _nav(page: Page, label: str) -> None:
    page.get_by_role("navigation", name="Admin sections").get_by_role("link", name=label).click()


@pytest.mark.slow
@pytest.mark.parametrize("viewport", ["desktop", "mobile"])
def test_operator_imports_composes_and_watches_a_send_finish(
    viewport: str,
    admin_server: AdminServer,  # noqa: F811  (the imported fixture)
    browser: Browser,
    tmp_path: Path,
) -> None:
    """What an operator does first, done as they would do it: if any step breaks in a real
    browser, at either width, the UI does not work whatever the HTTP tests say."""
    context = browser.new_context(viewport=VIEWPORTS[viewport], base_url=admin_server.base_url)
    page = context.new_page()
    visit = Visit(page, screenshot_dir(tmp_path), viewport)

    page.goto("/admin")
    expect(page).to_have_url(f"{admin_server.base_url}/admin/sign-in?next=/admin")
    visit.check("sign-in")
    page.get_by_label("Email").fill(admin_server.email)
    page.get_by_label("Password").fill(admin_server.password)
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("heading", name="Dashboard")).to_be_visible()

    _nav(page, "Newsletters")
    page.get_by_role("link", name="New newsletter").click()
    page.get_by_label("Name", exact=True).fill("Weekly Notes")
    page.get_by_role("textbox", name="Slug").fill("weekly")
    page.get_by_label("Sender name").fill("The Editors")
    page.get_by_label("Sender address").fill("editors@example.org")
    visit.check("newsletter-form")
    page.get_by_role("button", name="Save").click()
    expect(page.get_by_role("link", name="Weekly Notes")).to_be_visible()
    visit.check("newsletters")

    _nav(page, "Subscribers")
    page.get_by_role("link", name="Import CSV").click()
    page.get_by_label("CSV file").set_input_files(
        files=[{"name": "readers.csv", "mimeType": "text/csv", "buffer": CSV.encode()}]
    )
    visit.check("import-form")
    page.get_by_role("button", name="Import").click()
    expect(
        page.get_by_role("heading", name=f"Done: {READERS + 1} rows into weekly")
    ).to_be_visible()
    expect(page.get_by_role("cell", name="email", exact=True)).to_be_visible()  # line 32's field
    visit.check("import-report")
    page.get_by_role("link", name="See the subscribers").click()
    expect(page.get_by_role("link", name="reader0@example.org")).to_be_visible()
    visit.check("subscribers")
    page.get_by_role("link", name="reader0@example.org").click()
    expect(page.get_by_role("heading", name="Consent history")).to_be_visible()
    visit.check("person")

    _nav(page, "Campaigns")
    page.get_by_role("link", name="New campaign").click()
    page.get_by_label("Subject").fill("Issue one")
    page.get_by_label("Body", exact=True).fill(
        "Hello {{ name }}.\n\n::: only paid\nThanks, members.\n:::\n"
    )
    page.get_by_role("button", name="Create draft").click()
    page.wait_for_load_state("load")  # the editor's script listens for typing once loaded
    body = page.get_by_label("Body", exact=True)
    body.fill("Hello {{ name }}, live preview.\n\n::: only paid\nThanks, members.\n:::\n")
    expect(page.get_by_text("Saved; preview updated.")).to_be_visible(timeout=20_000)
    page.get_by_role("link", name="Paid readers").click()
    page.get_by_role("link", name="Phone").click()
    paid = page.frame_locator('iframe[title="paid version at phone width"]')
    expect(paid.get_by_text("live preview")).to_be_visible()
    expect(paid.get_by_text("Thanks, members.")).to_be_visible()
    visit.check("campaign-editor")

    page.get_by_role("link", name="Send now…").click()
    expect(page.get_by_test_id("preflight")).to_have_text(str(READERS))
    visit.check("campaign-send")
    page.get_by_role("button", name=f"Send to {READERS} subscribers").click()
    progress = page.locator("#send-progress")
    expect(progress).to_be_visible()
    page.wait_for_function(
        "() => { const bar = document.querySelector('#send-progress');"
        f" return bar && bar.max == {READERS} && bar.value == bar.max; }}",
        timeout=60_000,
    )
    expect(page.get_by_role("heading", name="Verification")).to_be_visible(timeout=60_000)
    expect(page.locator("dd").filter(has_text=str(READERS)).first).to_be_visible()
    visit.check("campaign-sent")

    _nav(page, "Outbox")
    page.get_by_role("link", name="Issue one").first.click()
    expect(page.get_by_role("heading", name="Headers")).to_be_visible()
    visit.check("outbox-message")
    for label, name in (("Dashboard", "dashboard"), ("Webhooks", "webhooks"), ("Jobs", "jobs")):
        _nav(page, label)
        visit.check(name)
    context.close()
    assert visit.problems == [], "\n".join(visit.problems)
