"""Scheduling, unscheduling, cancelling and watching a paced send in a real browser (Debian's
Chromium), at 1280 and 375 px (issue 38 items 2 and 3): a time the site's zone skips is
refused at its field, "Cancel schedule" returns to draft and its job leaves the Jobs page,
cancelling for good is asked on a page of its own, a send paced by the send rate shows an ETA
within ten seconds with badge and phase always one word; axe on every page on the way."""

import re
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page, expect
from playwright.sync_api import Error as PlaywrightError

from tests.e2e.test_admin_ui_browser import VIEWPORTS, Visit
from tests.support.admin_browser import (
    AdminServer,
    browser_type_launch_args,  # noqa: F401  (a fixture)
    screenshot_dir,
    serving_admin,
)

READERS = 200
RATE = 20  # messages a second: a ten-second send
CSV = "email,name,tier,status\n" + "".join(
    f"reader{n}@example.org,Reader {n},{'paid' if n % 2 else 'free'},confirmed\n"
    for n in range(READERS)
)


@pytest.fixture
def paced_server(tmp_path: Path) -> Iterator[AdminServer]:
    """`tidings serve` for a site in Paris whose provider takes 20 messages a second."""
    with serving_admin(
        tmp_path,
        TIDINGS_SITE_TIMEZONE="Europe/Paris",
        TIDINGS_BULK_EMAIL_SEND_RATE_PER_SECOND=str(RATE),
    ) as server:
        yield server


def _nav(page: Page, label: str) -> None:
    page.get_by_role("navigation", name="Admin sections").get_by_role("link", name=label).click()


def _setup(page: Page, server: AdminServer) -> None:
    """Sign in, make the newsletter and import its readers, as an operator does."""
    page.goto("/admin")
    page.get_by_label("Email").fill(server.email)
    page.get_by_label("Password").fill(server.password)
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("heading", name="Dashboard")).to_be_visible()
    _nav(page, "Newsletters")
    page.get_by_role("link", name="New newsletter").click()
    page.get_by_label("Name", exact=True).fill("Weekly Notes")
    page.get_by_role("textbox", name="Slug").fill("weekly")
    page.get_by_label("Sender name").fill("The Editors")
    page.get_by_label("Sender address").fill("editors@example.org")
    page.get_by_role("button", name="Save").click()
    _nav(page, "Subscribers")
    page.get_by_role("link", name="Import CSV").click()
    page.get_by_label("CSV file").set_input_files(
        files=[{"name": "readers.csv", "mimeType": "text/csv", "buffer": CSV.encode()}]
    )
    page.get_by_role("button", name="Import").click()
    expect(page.get_by_role("heading", name=f"Done: {READERS} rows into weekly")).to_be_visible(
        timeout=30_000
    )


def _words(page: Page) -> list[str | None] | None:
    """The badge, the phase and the time left, read at one instant (one script run); None
    while the page reloads itself at the end of the send."""
    try:
        found: list[str | None] = page.evaluate(
            """() => ["stage", "phase", "eta"].map((name) => {
                const element = document.querySelector(`[data-field="${name}"]`);
                return element ? element.textContent : null;
            })"""
        )
    except PlaywrightError:
        return None
    return found


def _schedule(page: Page, when: str) -> None:
    page.get_by_label("Send at").fill(when)
    page.get_by_label("Time zone").select_option("Europe/Paris")
    page.get_by_role("button", name="Schedule", exact=True).click()
    page.wait_for_load_state("load")


@pytest.mark.slow
@pytest.mark.parametrize("viewport", ["desktop", "mobile"])
def test_schedule_unschedule_cancel_and_a_paced_send_in_the_browser(
    viewport: str,
    paced_server: AdminServer,
    browser: Browser,
    tmp_path: Path,
) -> None:
    """The day of an operator who schedules, changes their mind, and then sends: if a
    skipped hour is accepted, a job outlives its schedule, a cancel happens without asking,
    or the send's numbers disagree with each other, the admin cannot be trusted."""
    context = browser.new_context(viewport=VIEWPORTS[viewport], base_url=paced_server.base_url)
    page = context.new_page()
    visit = Visit(page, screenshot_dir(tmp_path), viewport)
    _setup(page, paced_server)

    _nav(page, "Campaigns")
    page.get_by_role("link", name="New campaign").click()
    page.get_by_label("Subject").fill("Issue three")
    page.get_by_label("Body", exact=True).fill("Hello {{ name }}.")
    page.get_by_role("button", name="Create draft").click()
    page.wait_for_load_state("load")
    campaign_url = page.url

    _schedule(page, "2027-03-28T02:30")  # Paris skips 02:00-03:00 that night
    expect(page.get_by_role("alert")).to_contain_text("does not exist in Europe/Paris")
    expect(page.get_by_label("Send at")).to_have_attribute("aria-invalid", "true")
    expect(page.get_by_label("Send at")).to_have_value("2027-03-28T02:30")  # kept as typed
    visit.check("campaign-schedule-refused")

    _schedule(page, "2030-06-03T09:00")
    expect(
        page.get_by_text("scheduled for 2030-06-03 09:00 Europe/Paris, 07:00 UTC")
    ).to_be_visible()
    _nav(page, "Jobs")
    waiting = page.locator('[data-field="waiting"]')
    expect(waiting).to_contain_text("send_campaign")
    expect(waiting).to_contain_text("2030-06-03 09:00 Europe/Paris")
    visit.check("jobs")
    _nav(page, "Dashboard")
    expect(page.locator('[data-field="next-due"]')).to_contain_text("send_campaign")
    visit.check("dashboard-next-due")

    page.goto(campaign_url)
    page.get_by_role("button", name="Cancel schedule").click()
    page.wait_for_load_state("load")
    expect(page.locator(".badge").first).to_have_text("draft")
    _nav(page, "Jobs")
    expect(page.get_by_text("No job is waiting or running.")).to_be_visible()

    page.goto(campaign_url)
    page.get_by_role("link", name="Cancel the campaign…").click()
    expect(page.get_by_role("heading", name="Cancel this campaign for good?")).to_be_visible()
    visit.check("campaign-cancel")
    page.get_by_role("link", name="Keep it").click()
    expect(page.locator(".badge").first).to_have_text("draft")

    page.get_by_role("link", name="Send now…").click()
    page.get_by_role("button", name=f"Send to {READERS} subscribers").click()
    clicked = time.monotonic()
    page.wait_for_load_state("load")
    eta_seen = None
    sending_checked = False
    while True:
        shown = _words(page)
        if shown is not None:
            badge, phase, eta = shown
            if badge == "sent":
                break
            if phase is not None:  # the progress panel is on the page
                assert badge == phase, (badge, phase)
                if eta_seen is None and eta and re.match(r"about \d", eta):
                    eta_seen = time.monotonic() - clicked
                if eta_seen is not None and not sending_checked:
                    visit.check("campaign-sending")
                    sending_checked = True
        assert time.monotonic() - clicked < 90, "the send did not finish"
        page.wait_for_timeout(250)
    assert eta_seen is not None, "no time left was shown while the send ran"
    assert eta_seen <= 10, f"the first ETA came {eta_seen:.1f} s after Send"
    # The script says "sent" at once, then reloads the page for the outcome.
    expect(page.get_by_role("heading", name="Verification")).to_be_visible(timeout=10_000)
    expect(page.locator('[data-field="stage"]').first).to_have_text("sent")
    visit.check("campaign-sent-paced")
    context.close()
    assert visit.problems == [], visit.problems
