"""The sunset policy (ENG-7): who is asked and who is not, the keep-me-subscribed page (a GET
changes nothing, the POST keeps), unsubscribing with reason `inactive` after the grace period,
idempotence (two runs: one email, one unsubscribe), the dry run, the audit log, and coming
back through the normal subscribe flow."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import httpx
import pytest
from sqlalchemy import func, select

from tests.e2e.audience_helpers import captured_text, deliver_queued_mail
from tests.factories import admin_headers, api_client, make_settings
from tests.support import person_engagement, rows
from tests.support.clock import Clock
from tests.support.sending import FAST_QUEUE, workers
from tests.support.waiting import wait_for
from tidings.audience.sunset import SunsetPolicy
from tidings.bootstrap import Container
from tidings.storage.tables import (
    address_history,
    audit_log,
    jobs,
    subscriptions,
    sunset_requests,
)

NOW = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)
DAY = timedelta(days=1)
KEEP_LINK = re.compile(r"/keep/([^\s>\"]+)")


@dataclass
class Site:
    http: httpx.AsyncClient
    container: Container
    clock: Clock
    people: dict[str, int]
    newsletter_id: int


@pytest.fixture
async def site(database_url: str) -> AsyncIterator[Site]:
    """A per_person newsletter with the policy on (30 days, 2 sends, 7 days' grace), one
    person per situation, and a second newsletter with the policy off."""
    clock = Clock(NOW)
    settings = make_settings(
        database_url, queue=FAST_QUEUE, tracking={"sunset_interval_seconds": 0.2}
    )
    async with api_client(settings, clock=clock) as (http, container):
        async with container.db.write() as conn:
            newsletter_id = await rows.newsletter(
                conn,
                slug="weekly",
                tracking="per_person",
                sunset_enabled=True,
                sunset_after_days=30,
                sunset_min_sends=2,
                sunset_grace_days=7,
            )
            quiet = await rows.newsletter(conn, slug="quiet", tracking="per_person")
            people = {}
            for name in ("silent", "machine", "engaged", "unconsented", "few", "off", "newcomer"):
                people[name] = await rows.subscriber(
                    conn,
                    email=f"{name}@example.org",
                    tracking_consent_at=None if name == "unconsented" else NOW - 60 * DAY,
                )
                await rows.subscription(
                    conn,
                    people[name],
                    quiet if name == "off" else newsletter_id,
                    # The newcomer confirmed within the span: they have just said yes.
                    confirmed_at=NOW - (15 if name == "newcomer" else 60) * DAY,
                    consent_evidence="test",
                )
            regulars = [people[name] for name in people if name not in ("few", "off")]
            first = await person_engagement.sent_campaign(
                conn, newsletter_id, [*regulars, people["few"]], at=NOW - 20 * DAY
            )
            await person_engagement.sent_campaign(conn, newsletter_id, regulars, at=NOW - 10 * DAY)
            for _ in range(2):
                await person_engagement.sent_campaign(
                    conn, quiet, [people["off"]], at=NOW - 10 * DAY
                )
            await person_engagement.hit(conn, first, people["engaged"], at=NOW - 5 * DAY)
            await person_engagement.hit(
                conn, first, people["machine"], at=NOW - 5 * DAY, verdict="machine"
            )
        yield Site(http, container, clock, people, newsletter_id)


async def _requests(site: Site) -> dict[str, str | None]:
    """Each asked person's request outcome (None: open)."""
    names = {subscriber_id: name for name, subscriber_id in site.people.items()}
    async with site.container.db.read() as conn:
        found = await conn.execute(
            select(sunset_requests.c.subscriber_id, sunset_requests.c.outcome)
        )
        return {names[subscriber_id]: outcome for subscriber_id, outcome in found}


async def _keep_token(site: Site, email: str) -> str:
    await deliver_queued_mail(site.container)
    for message in await site.container.captured_mail.list(limit=100):
        if message.recipients == [email] and "still want" in message.subject:
            match = KEEP_LINK.search(captured_text(message.raw))
            assert match is not None
            return match.group(1)
    raise AssertionError(f"no sunset email to {email}")


async def _subscription(site: Site, name: str) -> tuple[datetime | None, int]:
    async with site.container.db.read() as conn:
        row = (
            await conn.execute(
                select(subscriptions.c.unsubscribed_at, subscriptions.c.unsubscribe_count).where(
                    subscriptions.c.subscriber_id == site.people[name]
                )
            )
        ).one()
    return row.unsubscribed_at, row.unsubscribe_count


async def test_only_people_known_to_have_stopped_reading_are_asked(site: Site) -> None:
    """Asking someone whose engagement we could not see (no consent), who got too few
    campaigns, who read recently, who confirmed recently, or whose newsletter has the policy
    off would bother — and then unsubscribe — readers for a lack of data. Machine hits are not
    reading."""
    preview = await site.container.sunset.dry_run("weekly")
    assert sorted(preview.asked) == ["machine@example.org", "silent@example.org"]
    assert preview.unsubscribed == []
    await site.container.sunset.run()
    assert await _requests(site) == {"silent": None, "machine": None}
    await deliver_queued_mail(site.container)
    sent = [
        message.recipients[0]
        for message in await site.container.captured_mail.list(limit=100)
        if "still want" in message.subject
    ]
    assert sorted(sent) == ["machine@example.org", "silent@example.org"]
    async with site.container.db.read() as conn:
        entry = (
            await conn.execute(select(audit_log).where(audit_log.c.action == "sunset.run"))
        ).one()
    assert entry.target == f"newsletter:{site.newsletter_id}"
    assert "asked" in str(entry.detail)


async def test_running_twice_asks_once_and_unsubscribes_once(site: Site) -> None:
    """The job runs every hour on every worker: a second run (or a racing one) must neither
    send a second email nor unsubscribe twice."""
    await site.container.sunset.run()
    await site.container.sunset.run()
    async with site.container.db.read() as conn:
        queued = (
            await conn.execute(
                select(func.count()).where(jobs.c.idempotency_key.like("subscriber-mail:sunset:%"))
            )
        ).scalar_one()
    assert queued == 2
    site.clock.advance(8 * DAY)
    assert sorted((await site.container.sunset.dry_run("weekly")).unsubscribed) == [
        "machine@example.org",
        "silent@example.org",
    ]
    await site.container.sunset.run()
    await site.container.sunset.run()
    assert await _requests(site) == {"silent": "unsubscribed", "machine": "unsubscribed"}
    unsubscribed_at, count = await _subscription(site, "silent")
    assert unsubscribed_at is not None
    assert count == 1
    async with site.container.db.read() as conn:
        history = (
            await conn.execute(select(address_history.c.event, address_history.c.decision))
        ).all()
    assert sorted(history) == [("inactive", "unsubscribed")] * 2


async def test_keep_page_get_changes_nothing_and_post_keeps(site: Site) -> None:
    """Mail scanners follow every link: only the person's press of the button (a POST) may
    count as an answer, and once kept, the grace period's end unsubscribes nobody."""
    await site.container.sunset.run()
    token = await _keep_token(site, "silent@example.org")
    page = await site.http.get(f"/keep/{token}")
    assert page.status_code == 200
    assert "Keep me subscribed" in page.text
    assert (await _requests(site))["silent"] is None
    kept = await site.http.post(f"/keep/{token}")
    assert kept.status_code == 200
    assert "You will keep receiving" in kept.text
    assert (await _requests(site))["silent"] == "kept"
    assert (await site.http.post(f"/keep/{token}")).status_code == 200  # idempotent
    assert (await site.http.get(f"/keep/{token[:-2]}xx")).status_code == 404
    site.clock.advance(8 * DAY)
    await site.container.sunset.run()
    assert (await _subscription(site, "silent"))[0] is None
    assert (await _requests(site))["machine"] == "unsubscribed"


async def test_a_human_open_after_the_email_is_an_answer(site: Site) -> None:
    """A person who reads the next issue instead of pressing the button has answered."""
    await site.container.sunset.run()
    async with site.container.db.write() as conn:
        later = await person_engagement.sent_campaign(
            conn, site.newsletter_id, [site.people["silent"]], at=NOW + DAY
        )
        await person_engagement.hit(conn, later, site.people["silent"], at=NOW + 2 * DAY)
    site.clock.advance(3 * DAY)
    await site.container.sunset.run()
    assert (await _requests(site))["silent"] == "engaged"
    site.clock.advance(8 * DAY)
    await site.container.sunset.run()
    assert (await _subscription(site, "silent"))[0] is None


async def test_unsubscribed_for_inactivity_can_subscribe_again(site: Site) -> None:
    """Being cleaned out is not a ban: the normal subscribe flow brings the person back, and
    the keep link then says what happened instead of undoing it."""
    await site.container.sunset.run()
    token = await _keep_token(site, "silent@example.org")
    site.clock.advance(8 * DAY)
    await site.container.sunset.run()
    history = await site.container.subscribers.history(site.people["silent"])
    assert [(h["event"], h["decision"], h["source"]) for h in history] == [
        ("inactive", "unsubscribed", "sunset")
    ]  # on the person's admin page and in their privacy export
    page = await site.http.get(f"/keep/{token}")
    assert "subscribe again" in page.text
    assert (await site.http.post(f"/keep/{token}")).status_code == 200
    assert (await _subscription(site, "silent"))[0] is not None  # the POST did not undo it
    asked = await site.http.post(
        "/api/subscribe", json={"email": "silent@example.org", "newsletter": "weekly"}
    )
    assert asked.status_code == 202
    await deliver_queued_mail(site.container)
    unsubscribed_at, count = await _subscription(site, "silent")
    assert unsubscribed_at is None  # revived, waiting for the confirmation link
    assert count == 1  # history kept


async def test_the_workers_run_the_policy_periodically(site: Site) -> None:
    """Nobody runs it by hand in production: the workers' periodic job asks on its own."""
    async with workers(site.container):
        await wait_for(lambda: _requests(site), message="the periodic sunset never ran")
    assert set(await _requests(site)) == {"silent", "machine"}


async def test_the_admin_api_sets_the_policy_and_counts_a_dry_run(site: Site) -> None:
    """Operators who automate through the API need the same settings and the same dry run
    as the CLI, with values checked (after_days within the hits' retention)."""
    headers = await admin_headers(site.container)
    changed = await site.http.patch(
        "/api/admin/newsletters/quiet",
        json={"sunset_enabled": True, "sunset_after_days": 30, "sunset_min_sends": 2},
        headers=headers,
    )
    assert changed.status_code == 200, changed.text
    shown = changed.json()
    assert (shown["sunset_enabled"], shown["sunset_after_days"], shown["sunset_grace_days"]) == (
        True,
        30,
        30,
    )
    refused = await site.http.patch(
        "/api/admin/newsletters/quiet", json={"sunset_after_days": 5000}, headers=headers
    )
    assert refused.status_code == 422
    assert "sunset_after_days" in refused.text
    counted = await site.http.get("/api/admin/newsletters/weekly/sunset", headers=headers)
    assert counted.json() == {"would_ask": 2, "would_unsubscribe": 0}
    assert (await site.container.sunset.dry_run("quiet")).asked == ["off@example.org"]


async def test_each_run_examines_a_bounded_slice_and_all_are_covered(site: Site) -> None:
    """A million-subscriber newsletter must cost bounded work per run, yet nobody may be
    skipped for good: the slices continue where the last run stopped."""
    policy = SunsetPolicy(site.container.audience, batch=1)
    assert await policy.run() == 1
    assert await _requests(site) == {"silent": None}
    assert await policy.run() == 1
    assert await _requests(site) == {"silent": None, "machine": None}
    for _ in range(4):  # the rest of the list, and round again: nobody new, nobody twice
        await policy.run()
    assert await _requests(site) == {"silent": None, "machine": None}
