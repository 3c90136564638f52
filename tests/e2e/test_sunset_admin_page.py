"""The sunset policy on the newsletter's admin page (ENG-7): off by default, set from the
page with its values checked, audited, and the dry run's counts on request."""

from __future__ import annotations

from sqlalchemy import select

from tests.factories import make_settings
from tests.support.admin_ui import NEWSLETTER, signed_in, ui_app
from tidings.storage.tables import audit_log


async def test_the_newsletter_page_sets_the_sunset_policy(database_url: str) -> None:
    """An operator without a terminal must be able to turn the policy on, see what a run
    would do, and be told plainly when a value is out of range."""
    async with ui_app(make_settings(database_url)) as (browser, container):
        client = browser()
        csrf = await signed_in(client, container)
        made = await client.post("/admin/newsletters/new", data={**NEWSLETTER, "csrf_token": csrf})
        assert made.status_code == 303, made.text
        slug = NEWSLETTER["slug"]
        shown = await client.get(f"/admin/newsletters/{slug}")
        assert "Sunset policy" in shown.text
        assert (await container.sunset.settings(slug)).enabled is False
        saved = await client.post(
            f"/admin/newsletters/{slug}/sunset",
            data={
                "enabled": "on",
                "after_days": "90",
                "min_sends": "3",
                "grace_days": "14",
                "csrf_token": csrf,
            },
        )
        assert saved.status_code == 303, saved.text
        rules = await container.sunset.settings(slug)
        assert (rules.enabled, rules.after_days, rules.min_sends, rules.grace_days) == (
            True,
            90,
            3,
            14,
        )
        refused = await client.post(
            f"/admin/newsletters/{slug}/sunset",
            data={"after_days": "2", "min_sends": "3", "grace_days": "14", "csrf_token": csrf},
        )
        assert refused.status_code == 422
        assert "sunset after_days must be from 7" in refused.text
        assert (await container.sunset.settings(slug)).after_days == 90
        preview = await client.get(f"/admin/newsletters/{slug}?sunset_preview=1")
        assert "A run now would ask 0 and unsubscribe 0." in preview.text
        async with container.db.read() as conn:
            actions = (
                await conn.execute(
                    select(audit_log.c.action).where(audit_log.c.action == "newsletter.sunset")
                )
            ).scalars()
            assert list(actions) == ["newsletter.sunset"]
