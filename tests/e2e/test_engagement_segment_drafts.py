"""Engagement segments through the real app (ENG-7): a draft's `engaged:`/`unengaged:` filter
is checked when saved (bounded by `tracking.retention_days`, the error naming the field), and
the send page's preview counts the segment and says how many cannot be judged."""

from __future__ import annotations

from datetime import timedelta

from tests.factories import admin_headers, make_settings
from tests.support import person_engagement, rows
from tests.support.admin_ui import signed_in, ui_app
from tests.support.clock import Clock

NOW = rows.NOW + timedelta(days=100)


async def test_engagement_filter_is_checked_on_save_and_previewed(database_url: str) -> None:
    """A window longer than the hits are kept would silently select on missing data; the
    preview must count the segment and admit who was invisible to it."""
    settings = make_settings(database_url, tracking={"retention_days": 60})
    async with ui_app(settings, clock=Clock(NOW)) as (browser, container):
        client = browser()
        headers = await admin_headers(container)
        async with container.db.write() as conn:
            newsletter_id = await rows.newsletter(conn, slug="weekly", tracking="per_person")
            people = []
            for consent in (rows.NOW, rows.NOW, None):
                person = await rows.subscriber(conn, tracking_consent_at=consent)
                await rows.subscription(
                    conn, person, newsletter_id, confirmed_at=rows.NOW, consent_evidence="t"
                )
                people.append(person)
            sent = await person_engagement.sent_campaign(
                conn, newsletter_id, people, at=NOW - 10 * timedelta(days=1)
            )
            await person_engagement.hit(conn, sent, people[0], at=NOW - timedelta(days=1))
        body = {"newsletter": "weekly", "subject": "Still there?", "body": "Hello"}
        refused = await client.post(
            "/api/admin/campaigns",
            json={**body, "audience_filter": "unengaged:90"},
            headers=headers,
        )
        assert refused.status_code == 422
        assert "audience_filter" in refused.text
        assert "from 1 to 60" in refused.text
        made = await client.post(
            "/api/admin/campaigns",
            json={**body, "audience_filter": "unengaged:30"},
            headers=headers,
        )
        assert made.status_code == 201, made.text
        await signed_in(client, container)
        shown = await client.get(f"/admin/campaigns/{made.json()['id']}/send")
        assert 'data-testid="preflight">1<' in shown.text  # the consented silent one
        assert "1 of the newsletter's subscribers cannot be judged" in shown.text
