"""The media library in a real browser (Debian's Chromium), at 1280 and 375 px (CMP-6, issue
40 items 1 and 5): upload on the Media page, a refusal marked at its field, and the editor's
image panel — an image goes into the body only with alt text, an upload made from the
editor joins the list without leaving the draft. Every page passes axe with no serious or
critical finding, and nothing is wider than the screen."""

import json
import re
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page, expect

from tests.e2e.test_admin_ui_browser import VIEWPORTS, Visit
from tests.support import images
from tests.support.admin_browser import (
    AdminServer,
    admin_server,  # noqa: F401  (a fixture)
    browser_type_launch_args,  # noqa: F401  (a fixture)
    screenshot_dir,
)
from tests.support.cli import clean_env, tidings


def _sign_in(page: Page, server: AdminServer) -> None:
    page.goto("/admin")
    page.get_by_label("Email").fill(server.email)
    page.get_by_label("Password").fill(server.password)
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("heading", name="Dashboard")).to_be_visible()


def _fits(page: Page) -> None:
    wider = page.evaluate("document.documentElement.scrollWidth - window.innerWidth")
    assert wider <= 0, f"{page.url} is {wider}px wider than the screen"


def _draft(tmp_path: Path) -> int:
    """A newsletter and a draft campaign, made with the CLI on the server's database."""
    env = clean_env(DATABASE_URL=f"sqlite:///{tmp_path / 'ui.db'}", LOG_FORMAT="json")
    made = tidings(
        "newsletters",
        "create",
        "weekly",
        "--name",
        "Weekly",
        "--sender-name",
        "Ed",
        "--sender-address",
        "ed@example.org",
        env=env,
    )
    assert made.returncode == 0, made.stderr
    body = tmp_path / "issue.md"
    body.write_text("Dear reader,\n\nThis week in pictures.\n")
    draft = tidings(
        "campaign", "create", "-n", "weekly", "-s", "Pictures", "-f", str(body), "--json", env=env
    )
    assert draft.returncode == 0, draft.stderr
    return int(json.loads(draft.stdout)["id"])


@pytest.mark.slow
@pytest.mark.parametrize("viewport", ["desktop", "mobile"])
def test_upload_on_the_media_page_and_insert_in_the_editor_only_with_alt_text(
    viewport: str,
    admin_server: AdminServer,  # noqa: F811  (the imported fixture)
    browser: Browser,
    tmp_path: Path,
) -> None:
    """If an upload cannot be made at phone width, a refusal is not shown at its field, or
    an image can go into a campaign without alt text, the library fails its writers and
    the readers who use a screen reader, whatever the HTTP tests say."""
    context = browser.new_context(viewport=VIEWPORTS[viewport], base_url=admin_server.base_url)
    page = context.new_page()
    visit = Visit(page, screenshot_dir(tmp_path), viewport)
    directory = tmp_path / "media"
    photo = tmp_path / "harbour.png"
    photo.write_bytes(images.png(1600, 900))
    drawing = tmp_path / "drawing.svg"
    drawing.write_bytes(images.SVG)
    wave = tmp_path / "wave.gif"
    wave.write_bytes(images.animated_gif())
    _sign_in(page, admin_server)

    page.get_by_role("navigation", name="Admin sections").get_by_role("link", name="Media").click()
    expect(page.get_by_role("heading", name="Upload an image")).to_be_visible()
    visit.check("media-empty")
    page.get_by_label("Image file").set_input_files(str(drawing))
    page.get_by_role("textbox", name="Alt text").fill("A drawing")
    page.get_by_role("button", name="Upload").click()
    expect(page.get_by_role("alert")).to_contain_text("SVG images are refused")
    expect(page.get_by_label("Image file")).to_have_attribute("aria-invalid", "true")
    expect(page.get_by_role("textbox", name="Alt text")).to_have_value("A drawing")
    assert images.stored_files(directory) == []
    page.get_by_label("Image file").set_input_files(str(photo))
    page.get_by_role("textbox", name="Alt text").fill("Boats in the harbour at dawn")
    page.get_by_role("button", name="Upload").click()
    expect(page.get_by_role("status")).to_contain_text("is in the library")
    thumbnail = page.get_by_role("img", name="Boats in the harbour at dawn")
    expect(thumbnail).to_be_visible()
    assert thumbnail.evaluate("img => img.complete && img.naturalWidth") == 504
    visit.check("media")
    _fits(page)
    (stored,) = [name for name in images.stored_files(directory) if name.endswith(".png")][:1]
    assert images.opened((directory / stored).read_bytes()).width in (504, 1008)

    campaign_id = _draft(tmp_path)
    page.goto(f"/admin/campaigns/{campaign_id}")
    panel = page.get_by_role("region", name="Images")
    body = page.get_by_role("textbox", name="Body", exact=True)
    expect(panel).to_be_visible()
    harbour = panel.locator("option", has_text="harbour.png").get_attribute("value")
    assert harbour is not None
    panel.get_by_label("Image from the library").select_option(harbour)
    alt = panel.get_by_label("Alt text for this image")
    expect(alt).to_have_value("Boats in the harbour at dawn")
    alt.fill("")
    panel.get_by_role("button", name="Insert into body").click()
    expect(panel.locator(".field-error")).to_contain_text("only with alt text")
    expect(alt).to_have_attribute("aria-invalid", "true")
    assert "![" not in body.input_value()  # nothing went in without alt text
    alt.fill("Fishing boats, early morning")
    body.click()
    page.keyboard.press("Control+End")
    panel.get_by_role("button", name="Insert into body").click()
    inserted = body.input_value()
    assert re.search(
        r"!\[Fishing boats, early morning\]\(http://127\.0\.0\.1:\d+/media/[0-9a-f]{32}\.png\)",
        inserted,
    ), inserted
    expect(page.get_by_text("Saved; preview updated.")).to_be_visible()

    panel.get_by_label("Upload a new image").set_input_files(str(wave))
    panel.get_by_label("Its alt text").fill("A waving flag")
    panel.get_by_role("button", name="Upload", exact=True).click()
    expect(panel.get_by_text("Uploaded “wave.gif”")).to_be_visible()
    expect(panel.get_by_label("Alt text for this image")).to_have_value("A waving flag")
    panel.get_by_role("button", name="Insert into body").click()
    expect(page.get_by_text("Saved; preview updated.")).to_be_visible()
    assert "![A waving flag](" in body.input_value()
    visit.check("editor-images")
    _fits(page)
    gifs = [name for name in images.stored_files(directory) if name.endswith(".gif")]
    assert gifs
    assert all(images.opened((directory / name).read_bytes()).n_frames == 4 for name in gifs)

    page.reload()
    saved = page.get_by_role("textbox", name="Body", exact=True).input_value()
    assert "![Fishing boats, early morning](" in saved
    assert "![A waving flag](" in saved
    assert visit.problems == []
    context.close()
