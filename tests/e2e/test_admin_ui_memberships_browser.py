"""Putting an existing person on another newsletter, or back on one they left, from their page
in a real browser (issue 38 item 5), at 1280 and 375 px, every page checked with axe."""

from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page, expect

from tests.e2e.test_admin_ui_browser import VIEWPORTS, Visit
from tests.support.admin_browser import (
    AdminServer,
    add_newsletter,
    admin_server,  # noqa: F401  (a fixture)
    browser_type_launch_args,  # noqa: F401  (a fixture)
    screenshot_dir,
    sign_in_and_add_newsletter,
)


def _nav(page: Page, label: str) -> None:
    page.get_by_role("navigation", name="Admin sections").get_by_role("link", name=label).click()


@pytest.mark.slow
@pytest.mark.parametrize("viewport", ["desktop", "mobile"])
def test_operator_puts_a_known_person_on_another_newsletter_with_consent_explicit(
    viewport: str,
    admin_server: AdminServer,  # noqa: F811  (the imported fixture)
    browser: Browser,
    tmp_path: Path,
) -> None:
    """A reader of the weekly asks for the monthly too, and later someone who left the weekly
    asks to come back: the operator does both from the person's page, choosing how consent
    is given each time, and is stopped from asserting consent for someone who unsubscribed.
    Adding a known address again leads to the same choice instead of a refusal."""
    context = browser.new_context(viewport=VIEWPORTS[viewport], base_url=admin_server.base_url)
    page = context.new_page()
    visit = Visit(page, screenshot_dir(tmp_path), viewport)
    page.on("dialog", lambda dialog: dialog.accept())

    sign_in_and_add_newsletter(page, admin_server, "Weekly Notes", "weekly")
    add_newsletter(page, "Monthly Digest", "monthly")

    _nav(page, "Subscribers")
    page.get_by_role("link", name="Add subscriber").click()
    page.get_by_label("Email address").fill("eve@example.org")
    page.get_by_label("Subscribe to").select_option("weekly")
    page.get_by_label("I have their consent").check()
    page.get_by_label("How they consented").fill("signed the paper form at the fair")
    page.get_by_role("button", name="Add subscriber").click()
    expect(page.get_by_role("heading", name="eve@example.org")).to_be_visible()

    # Asserting consent needs the note; the refusal keeps the choice made.
    adding = page.locator("#add-to-newsletter")
    adding.get_by_label("Newsletter").select_option("monthly")
    adding.get_by_label("I have their consent").check()
    adding.get_by_role("button", name="Put on the newsletter").click()
    expect(page.locator("#add-note-error")).to_contain_text("say how they consented")
    expect(page.locator("#add-to-newsletter").get_by_label("Newsletter")).to_have_value("monthly")
    visit.check("person-add-refused")
    adding = page.locator("#add-to-newsletter")
    adding.get_by_label("How they consented").fill("asked by email on 3 May for the monthly")
    adding.get_by_role("button", name="Put on the newsletter").click()
    expect(page.locator("[data-notice]")).to_contain_text("They are on Monthly Digest now")
    expect(page.get_by_text("asked by email on 3 May for the monthly")).to_be_visible()
    visit.check("person-added")

    # Unsubscribed from the weekly: only a confirmation email may bring them back.
    page.get_by_role("button", name="Unsubscribe from Weekly Notes").click()
    adding = page.locator("#add-to-newsletter")
    adding.get_by_label("Newsletter").select_option("weekly")
    adding.get_by_label("I have their consent").check()
    adding.get_by_label("How they consented").fill("phoned to say they want it back")
    adding.get_by_role("button", name="Put on the newsletter").click()
    expect(page.locator("#add-consent-error")).to_contain_text("only they can undo that")
    visit.check("person-add-unsubscribed")
    adding = page.locator("#add-to-newsletter")
    adding.get_by_label("Send them a confirmation email").check()
    adding.get_by_role("button", name="Put on the newsletter").click()
    expect(page.locator("[data-notice]")).to_contain_text("They had unsubscribed from Weekly")

    # The known address through "Add subscriber": offered, not refused.
    _nav(page, "Subscribers")
    page.get_by_role("link", name="Add subscriber").click()
    page.get_by_label("Email address").fill("Eve@Example.org")
    page.get_by_role("button", name="Add subscriber").click()
    expect(page.locator("[data-notice]")).to_contain_text("is already a subscriber")
    expect(page.get_by_role("heading", name="eve@example.org")).to_be_visible()
    offer = page.locator("#add-to-newsletter").get_by_label("Newsletter")
    expect(offer.locator("option", has_text="waiting for their confirmation")).to_have_count(1)
    visit.check("person-offered")
    context.close()
    assert visit.problems == [], "\n".join(visit.problems)
