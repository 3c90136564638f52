"""People, custom fields, the import's consent choice and the settings page in a real browser
(issue 25 items 2, 3, 4 and 6), at 1280 and 375 px, every page checked with axe."""

from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page, expect

from tests.e2e.test_admin_ui_browser import VIEWPORTS, Visit
from tests.support.admin_browser import (
    AdminServer,
    admin_server,  # noqa: F401  (a fixture)
    browser_type_launch_args,  # noqa: F401  (a fixture)
    screenshot_dir,
    sign_in_and_add_newsletter,
)

CSV = (
    "Email Address,First Name,Last Name,City,MEMBER_RATING,status\n"
    "ada@example.org,Ada,Lovelace,London,5,subscribed\n"
    "bob@example.org,Bob,Marley,Kingston,2,subscribed\n"
    "cy@example.org,Cy,Twombly,Lexington,3,confirmed\n"
    "dee@example.org,Dee,Dee,,1,subscribed\n"
)


def _nav(page: Page, label: str) -> None:
    page.get_by_role("navigation", name="Admin sections").get_by_role("link", name=label).click()


@pytest.mark.slow
@pytest.mark.parametrize("viewport", ["desktop", "mobile"])
def test_operator_imports_edits_adds_and_acts_on_people_in_bulk(
    viewport: str,
    admin_server: AdminServer,  # noqa: F811  (the imported fixture)
    browser: Browser,
    tmp_path: Path,
) -> None:
    """A day with the audience, as an operator does it in a browser: import with a consent
    choice and see what it did, add someone, edit their custom fields, label several at
    once after seeing how many, and check the site's settings before going live."""
    context = browser.new_context(viewport=VIEWPORTS[viewport], base_url=admin_server.base_url)
    page = context.new_page()
    visit = Visit(page, screenshot_dir(tmp_path), viewport)
    page.on("dialog", lambda dialog: dialog.accept())

    sign_in_and_add_newsletter(page, admin_server, "Weekly Notes", "weekly")

    _nav(page, "Subscribers")
    page.get_by_role("link", name="Import CSV").click()
    page.get_by_label("CSV file").set_input_files(
        files=[{"name": "mailchimp.csv", "mimeType": "text/csv", "buffer": CSV.encode()}]
    )
    page.get_by_label("Import them waiting, then email").check()
    visit.check("import-form")
    page.get_by_role("button", name="Import").click()
    summary = page.locator("[data-summary]")
    expect(summary).to_contain_text("1 mailable now, 3 wait for confirmation, 1 ignored column")
    expect(summary).to_contain_text("3 confirmation emails queued")
    expect(page.get_by_text("MEMBER_RATING")).to_be_visible()
    visit.check("import-report")

    page.get_by_role("link", name="See the subscribers").click()
    expect(page.locator("[data-total]")).to_have_text("4")
    page.get_by_role("link", name="Add subscriber").click()
    page.get_by_label("Email address").fill("eve@example.org")
    page.get_by_label("Name (optional)").fill("Eve Ng")
    page.get_by_label("Subscribe to").select_option("weekly")
    page.get_by_label("I have their consent").check()
    page.get_by_role("button", name="Add subscriber").click()
    expect(page.locator("#note-error")).to_be_visible()  # the note is required, and marked
    expect(page.get_by_label("Email address")).to_have_value("eve@example.org")
    visit.check("subscriber-new")
    page.get_by_label("How they consented").fill("signed the paper form at the fair")
    page.get_by_role("button", name="Add subscriber").click()
    expect(page.get_by_role("heading", name="eve@example.org")).to_be_visible()
    expect(page.get_by_text("signed the paper form at the fair")).to_be_visible()

    page.get_by_role("link", name="Edit", exact=True).click()
    page.get_by_label("Custom fields").fill("city = Paris\nplan = gold")
    visit.check("subscriber-edit")
    page.get_by_role("button", name="Save").click()
    expect(page.get_by_text("Paris")).to_be_visible()
    visit.check("person")

    _nav(page, "Subscribers")
    page.get_by_label("Pick ada@example.org").check()
    page.get_by_label("Pick bob@example.org").check()
    page.get_by_label("Action", exact=True).select_option("label")
    page.get_by_label("Label (to add or remove)").fill("fair-2026")
    visit.check("subscribers")
    page.get_by_role("button", name="Review…").click()
    expect(page.get_by_role("status")).to_contain_text("2 subscribers you ticked")
    visit.check("subscribers-bulk")
    page.get_by_role("button", name="Add the label (2)").click()
    expect(page.get_by_role("status")).to_contain_text("Done: 2 subscribers changed")

    _nav(page, "Settings")
    expect(page.get_by_role("heading", name="Go-live checklist")).to_be_visible()
    expect(page.get_by_text("✗ Postal address")).to_be_visible()
    visit.check("settings")
    context.close()
    assert visit.problems == [], "\n".join(visit.problems)
