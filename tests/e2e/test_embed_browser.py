"""The embedded signup form in a real browser (API-5): with the proof of work on, the page's
script solves the ALTCHA challenge and the signup goes through; the form fits a phone."""

from __future__ import annotations

from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

from tests.support.cli import clean_env, serve_process, tidings
from tests.support.waiting import wait_until

pytestmark = pytest.mark.slow


def test_embedded_form_solves_the_challenge_and_signs_up_at_phone_width(
    page: Page, tmp_path: Path
) -> None:
    """Readers never see the proof of work: pressing Subscribe must just work, on a phone."""
    env = clean_env(
        DATABASE_URL=f"sqlite:///{tmp_path / 'tidings.db'}",
        LOG_FORMAT="json",
        AUDIENCE_ALTCHA="true",
        AUDIENCE_ALTCHA_MAX_NUMBER="5000",
    )
    with serve_process(tmp_path, env=env) as served:
        created = tidings(
            *("newsletters", "create", "weekly", "--name", "The Weekly"),
            *("--sender-name", "Ed", "--sender-address", "ed@example.org"),
            env=env,
        )
        assert created.returncode == 0, created.stderr
        page.set_viewport_size({"width": 375, "height": 700})
        page.goto(f"{served.base_url}/subscribe/weekly/embed")
        page.fill("#email", "ann@example.org")
        page.click("button[type=submit]")
        expect(page.get_by_text("Check your inbox")).to_be_visible(timeout=20_000)
        overflow = page.evaluate("document.documentElement.scrollWidth > window.innerWidth")
        assert overflow is False
        # The confirmation email is the server's worker's job: wait for it to be captured.
        wait_until(
            lambda: "ann@example.org" in tidings("outbox", "list", "--json", env=env).stdout,
            message="no confirmation email captured for the embedded signup",
        )
        # The archive's index, on the same design system, fits the phone too.
        assert tidings("newsletters", "archive", "weekly", env=env).returncode == 0
        page.goto(f"{served.base_url}/archive/weekly")
        expect(page.get_by_text("No issues yet.")).to_be_visible()
        overflow = page.evaluate("document.documentElement.scrollWidth > window.innerWidth")
        assert overflow is False
