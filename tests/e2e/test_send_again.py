"""Send again (issue 37 item 2, ENG-7): a sent campaign again, as a new draft for those who
did not open, did not click, were not delivered, or all who got it; its audience frozen when
it is made, the no longer mailable left out at send, and the unknown never taken for "did not
open"."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import httpx
import pytest
from sqlalchemy import func, select, update

from tests.e2e.audience_helpers import create_newsletter
from tests.factories import admin_headers, api_client, make_settings
from tests.support import person_engagement, rows
from tests.support.admin_ui import signed_in, ui_app
from tests.support.cli import tidings_cli
from tests.support.sending import seed, sink_settings, wait_for_campaign_status, workers
from tidings.bootstrap import Container, utcnow
from tidings.devservers.sink import SmtpSink
from tidings.domain.send_again import ResendAudience, SendAgainRefused
from tidings.rendering.tracking import tracking_signer
from tidings.storage.tables import (
    audit_log,
    campaign_frozen_audience,
    campaign_recipients,
    campaign_sends,
    campaigns,
    subscribers,
    subscriptions,
)

DAY = timedelta(days=1)


async def _origin(
    container: Container,
    people: dict[str, dict[str, Any]],
    *,
    tracking: str,
    sent_ago: timedelta,
    tracked: bool = True,
) -> tuple[int, dict[str, int]]:
    """A newsletter tracking `tracking` and a campaign sent `sent_ago` (with its open pixel
    unless not `tracked`), one recipient row per person in `people` (name -> tracking consent
    offset from the send, `state`, ...)."""
    sent_at = container.clock() - sent_ago
    async with container.db.write() as conn:
        newsletter_id = await rows.newsletter(conn, tracking=tracking)
        ids = {}
        for name, given in people.items():
            consent = given.get("consent")
            ids[name] = await rows.subscriber(
                conn,
                email=f"{name}@example.org",
                tracking_consent_at=None if consent is None else sent_at + consent,
            )
            await rows.subscription(
                conn, ids[name], newsletter_id, confirmed_at=rows.NOW, consent_evidence="t"
            )
        origin = await person_engagement.sent_campaign(
            conn, newsletter_id, list(ids.values()), at=sent_at, tracked=tracked
        )
        await conn.execute(
            update(campaign_sends)
            .where(campaign_sends.c.campaign_id == origin)
            .values(prepared_at=sent_at, finished_at=sent_at)
        )
        for name, given in people.items():
            outcome = {k: v for k, v in given.items() if k not in ("consent", "hits")}
            if outcome:
                await conn.execute(
                    update(campaign_recipients)
                    .where(campaign_recipients.c.subscriber_id == ids[name])
                    .values(**outcome)
                )
            for verdict, kind in given.get("hits", ()):
                await person_engagement.hit(
                    conn, origin, ids[name], at=sent_at + DAY, verdict=verdict, kind=kind
                )
    return origin, ids


async def _frozen(container: Container, campaign_id: int) -> set[int]:
    async with container.db.read() as conn:
        query = select(campaign_frozen_audience.c.subscriber_id).where(
            campaign_frozen_audience.c.campaign_id == campaign_id
        )
        return set((await conn.execute(query)).scalars())


async def _campaign_count(container: Container) -> int:
    async with container.db.read() as conn:
        return int((await conn.execute(select(func.count()).select_from(campaigns))).scalar_one())


async def _unsubscribe(container: Container, subscriber_id: int) -> None:
    async with container.db.write() as conn:
        await conn.execute(
            update(subscriptions)
            .where(subscriptions.c.subscriber_id == subscriber_id)
            .values(
                unsubscribed_at=container.clock(),
                unsubscribe_count=1,
                last_unsubscribed_at=container.clock(),
            )
        )


async def _sent_origin(
    client: httpx.AsyncClient,
    container: Container,
    sink: SmtpSink,
    *,
    tracking: str,
    readers: int,
    consented: int,
) -> tuple[int, list[int]]:
    """Newsletter `weekly` tracking `tracking` with `readers` subscribers (the first
    `consented` of them consented to tracking a day ago), and "Issue 1" sent to all of them
    through the real pipeline to `sink`. Returns the campaign and the subscriber ids."""
    headers = await admin_headers(container)
    await create_newsletter(client, headers, tracking=tracking)
    await seed(container, "weekly", readers)
    async with container.db.write() as conn:
        people = list(
            (await conn.execute(select(subscribers.c.id).order_by(subscribers.c.id))).scalars()
        )
        await conn.execute(
            update(subscribers)
            .where(subscribers.c.id.in_(people[:consented]))
            .values(tracking_consent_at=container.clock() - DAY, tracking_consent_source="signup")
        )
    created = await client.post(
        "/api/admin/campaigns",
        json={"newsletter": "weekly", "subject": "Issue 1", "body": "Hello."},
        headers=headers,
    )
    origin = int(created.json()["id"])
    sent = await client.post(f"/api/admin/campaigns/{origin}/send", headers=headers)
    assert sent.status_code == 202, sent.text
    async with workers(container):
        assert await wait_for_campaign_status(container, origin) == "submitted"
        await sink.wait_for(readers)
    return origin, people


BEFORE = {"consent": -DAY}  # consented a day before the send: tracked per person


async def test_non_openers_are_frozen_at_creation_and_the_unknown_are_left_out_and_counted(
    database_url: str,
) -> None:
    """The resend goes to people we know did not open: a human open excludes, Apple's proxy
    fetching the pixel does not; someone unsubscribed since is left out, and the people whose
    opens we could not see (no consent when it was sent, or given only later) are left out
    and counted rather than mailed as non-openers. Once made, the audience is frozen: a later
    open changes nothing, and a later unsubscribe only drops that person at send time."""
    async with api_client(make_settings(database_url)) as (_client, container):
        origin, ids = await _origin(
            container,
            {
                "reader": {**BEFORE, "hits": [("human", "open")]},
                "clicker": {**BEFORE, "hits": [("human", "click")]},
                "apple": {**BEFORE, "hits": [("machine", "open")]},
                "silent": BEFORE,
                "leaver": BEFORE,
                "unconsented": {},
                "late": {"consent": DAY},
                "bounced": {**BEFORE, "bounced_at": rows.NOW, "bounce_kind": "soft"},
            },
            tracking="per_person",
            sent_ago=10 * DAY,
        )
        await _unsubscribe(container, ids["leaver"])
        draft, link = await container.send_again.create(
            origin, ResendAudience.NOT_OPENED, subject="In case you missed it"
        )
        resend = draft.campaign.id
        assert await _frozen(container, resend) == {ids["apple"], ids["silent"]}
        assert (link.chosen_count, link.left_out) == (
            2,
            {"not_mailable": 1, "not_tracked": 2},
        )
        assert draft.campaign.subject == "In case you missed it"
        assert draft.campaign.status == "draft"
        assert not draft.campaign.archive_public
        async with container.db.write() as conn:
            await person_engagement.hit(conn, origin, ids["silent"], at=container.clock())
        await _unsubscribe(container, ids["apple"])
        assert await _frozen(container, resend) == {ids["apple"], ids["silent"]}
        assert await container.sends.audience_size(resend) == 1  # apple is no longer mailable
        links = await container.send_again.links(origin)
        assert [r.campaign_id for r in links.resends] == [resend]
        assert (await container.send_again.links(resend)).origin == link
        clicks = (await container.send_again.create(origin, ResendAudience.NOT_CLICKED))[1]
        # reader opened but never clicked; apple has unsubscribed by now
        assert (clicks.chosen_count, clicks.left_out["not_mailable"]) == (2, 2)
        await container.campaigns.delete(clicks.campaign_id)  # a draft like any other
        assert await _frozen(container, clicks.campaign_id) == set()
        assert [r.campaign_id for r in (await container.send_again.links(origin)).resends] == [
            resend
        ]


async def test_opens_and_clicks_need_an_origin_tracked_per_person(database_url: str) -> None:
    """Aggregate counts say how many opened, never who: asking for non-openers of an
    aggregate (or untracked) campaign is refused with the reason, as a 409 problem, and makes
    nothing; who was not delivered needs no tracking and works."""
    async with api_client(make_settings(database_url)) as (client, container):
        headers = await admin_headers(container)
        untracked, _ = await _origin(
            container, {"ghost": BEFORE}, tracking="per_person", sent_ago=DAY, tracked=False
        )
        with pytest.raises(SendAgainRefused, match="sent without tracking"):
            await container.send_again.create(untracked, ResendAudience.NOT_OPENED)
        origin, _ids = await _origin(
            container, {"a": {}, "b": {"state": "failed"}}, tracking="aggregate", sent_ago=DAY
        )
        before = await _campaign_count(container)
        for audience in ("not_opened", "not_clicked"):
            refused = await client.post(
                f"/api/admin/campaigns/{origin}/send-again",
                json={"audience": audience},
                headers=headers,
            )
            assert refused.status_code == 409, refused.text
            assert refused.headers["content-type"].startswith("application/problem+json")
            assert refused.json()["code"] == "send_again_refused"
            assert "per_person" in refused.json()["detail"]
        assert await _campaign_count(container) == before
        made = await client.post(
            f"/api/admin/campaigns/{origin}/send-again",
            json={"audience": "not_delivered"},
            headers=headers,
        )
        assert made.status_code == 201, made.text
        assert made.json()["origin"]["audience_count"] == 1
        async with container.db.read() as conn:
            audited = (
                await conn.execute(
                    select(audit_log.c.action, audit_log.c.target).where(
                        audit_log.c.action == "campaign.send_again"
                    )
                )
            ).all()
        assert [tuple(row) for row in audited] == [
            ("campaign.send_again", f"campaign:{made.json()['id']}")
        ]


async def test_not_delivered_is_read_from_the_recipient_outcomes(database_url: str) -> None:
    """What "not delivered" means, row by row: failed, cancelled before hand-over, bounced,
    and, once the provider reports deliveries, sent but never reported delivered; a recipient
    handed over with no answer (uncertain) may have it, so is left out and counted."""
    async with api_client(make_settings(database_url)) as (_client, container):
        origin, ids = await _origin(
            container,
            {
                "delivered": {"delivered_at": rows.NOW},
                "unreported": {},
                "failed": {"state": "failed"},
                "cancelled": {"state": "cancelled"},
                "soft": {"bounced_at": rows.NOW, "bounce_kind": "soft"},
                "uncertain": {"state": "uncertain"},
                "complained": {"complained_at": rows.NOW},
            },
            tracking="off",
            sent_ago=DAY,
        )
        draft, link = await container.send_again.create(origin, ResendAudience.NOT_DELIVERED)
        names = {ids[n] for n in ("unreported", "failed", "cancelled", "soft")}
        assert await _frozen(container, draft.campaign.id) == names
        assert link.left_out == {"outcome_unknown": 1}
        everyone = (await container.send_again.create(origin, ResendAudience.ALL))[1]
        assert everyone.chosen_count == 3  # delivered, unreported, complained: sent, no bounce


async def test_opens_older_than_the_retention_are_unknown_not_absent(database_url: str) -> None:
    """Past tracking.retention_days a person's hits are deleted, so no hit no longer means
    no open: such people are left out as hits_purged, never mailed as non-openers."""
    settings = make_settings(database_url, tracking={"retention_days": 30})
    async with api_client(settings) as (_client, container):
        origin, _ids = await _origin(
            container,
            {"opened": {**BEFORE, "hits": [("human", "open")]}, "quiet": BEFORE},
            tracking="per_person",
            sent_ago=40 * DAY,
        )
        link = (await container.send_again.create(origin, ResendAudience.NOT_OPENED))[1]
        assert (link.chosen_count, link.left_out) == (0, {"hits_purged": 1})


async def test_bad_requests_are_refused_clearly_and_change_nothing(database_url: str) -> None:
    """A draft was never sent, an unknown id is nobody's, and two audiences at once is not a
    choice: each gets an error that says so (CLI and API), and no campaign is made."""
    async with api_client(make_settings(database_url)) as (client, container):
        headers = await admin_headers(container)
        async with container.db.write() as conn:
            newsletter_id = await rows.newsletter(conn, tracking="per_person")
            draft_id = await rows.campaign(conn, newsletter_id)
        before = await _campaign_count(container)
        cli = tidings_cli(database_url)
        two = cli("campaign", "resend-to", str(draft_id), "--not-opened", "--all")
        assert two.returncode != 0
        assert "exactly one of" in two.output
        unsent = cli("campaign", "resend-to", str(draft_id), "--all")
        assert unsent.returncode == 1
        assert "only a campaign that was sent" in unsent.output
        unknown = cli("campaign", "resend-to", "999999", "--not-delivered")
        assert unknown.returncode == 1
        assert "no campaign with id 999999" in unknown.output
        api = await client.post(
            f"/api/admin/campaigns/{draft_id}/send-again", json={"audience": "all"}, headers=headers
        )
        assert api.status_code == 409
        assert api.json()["code"] == "send_again_refused"
        missing = await client.post(
            "/api/admin/campaigns/999999/send-again", json={"audience": "all"}, headers=headers
        )
        assert missing.status_code == 404
        wrong = await client.post(
            f"/api/admin/campaigns/{draft_id}/send-again",
            json={"audience": "opened"},
            headers=headers,
        )
        assert wrong.status_code == 422
        assert await _campaign_count(container) == before


async def test_a_resend_is_an_ordinary_campaign_sent_through_smtp_and_verified(
    database_url: str,
) -> None:
    """End to end: a per_person campaign goes out through the real pipeline to an SMTP sink,
    one consented reader opens it, `campaign resend-to --not-opened` makes the draft, and
    sending it reaches exactly the consented non-openers, minus one who unsubscribed after the
    draft was made (excluded at send), with its own verified accounting and its link to the
    origin in `campaign stats --json` and the API."""
    async with SmtpSink(clock=utcnow, port=0) as sink:
        settings = sink_settings(database_url, sink)
        async with api_client(settings) as (client, container):
            headers = await admin_headers(container)
            origin, people = await _sent_origin(
                client, container, sink, tracking="per_person", readers=6, consented=4
            )
            consented = people[:4]
            async with container.db.write() as conn:
                await person_engagement.hit(conn, origin, consented[0], at=container.clock())
                await person_engagement.hit(
                    conn, origin, consented[1], at=container.clock(), verdict="machine"
                )
            made = tidings_cli(database_url)(
                "campaign", "resend-to", str(origin), "--not-opened", "--subject", "Again"
            )
            assert made.returncode == 0, made.output
            resend = int(made.stdout.split()[1].rstrip(":"))
            assert "audience 3" in made.stdout
            assert "left out 2" in made.stdout
            assert "2 not tracked per person" in made.stdout
            await _unsubscribe(container, consented[3])
            sent_again = await client.post(f"/api/admin/campaigns/{resend}/send", headers=headers)
            assert sent_again.status_code == 202, sent_again.text
            async with workers(container):
                assert await wait_for_campaign_status(container, resend) == "submitted"
                arrived = await sink.wait_for(8)
            async with container.db.read() as conn:
                emails = dict(
                    (await conn.execute(select(subscribers.c.id, subscribers.c.email))).all()
                )
            again = {m.recipients[0] for m in arrived if b"Subject: Again" in m.data}
            assert again == {emails[consented[1]], emails[consented[2]]}
            send = await container.sends.get_send(resend)
            assert send is not None
            assert (send.candidate_count, send.email_count) == (2, 2)
            stats = tidings_cli(database_url)("campaign", "stats", str(resend), "--json")
            assert stats.returncode == 0, stats.output
            assert json.loads(stats.stdout)["send_again"]["origin"]["origin_id"] == origin
            api_stats = await client.get(f"/api/admin/campaigns/{resend}/stats", headers=headers)
            assert api_stats.json()["send_again"] == json.loads(stats.stdout)["send_again"]
            linked = await client.get(f"/api/admin/campaigns/{origin}/send-again", headers=headers)
            assert [r["campaign_id"] for r in linked.json()["resends"]] == [resend]


async def test_a_campaign_keeps_the_tracking_mode_it_was_sent_under(database_url: str) -> None:
    """A campaign sent while its newsletter tracked in aggregate carried no per-person token:
    switching the newsletter to per_person afterwards does not make its non-openers knowable.
    The mode is frozen with the snapshot at preparation; send again to non-openers is refused
    naming it (not_delivered still works), its results keep showing the mode it was sent
    under, and anything rendered for it afterwards renders under that mode too."""
    async with SmtpSink(clock=utcnow, port=0) as sink:
        settings = sink_settings(database_url, sink)
        async with api_client(settings) as (client, container):
            headers = await admin_headers(container)
            origin, _people = await _sent_origin(
                client, container, sink, tracking="aggregate", readers=3, consented=3
            )
            switched = await client.patch(
                "/api/admin/newsletters/weekly", json={"tracking": "per_person"}, headers=headers
            )
            assert switched.status_code == 200, switched.text
            async with container.db.read() as conn:
                frozen = (
                    await conn.execute(
                        select(campaign_sends.c.tracking).where(
                            campaign_sends.c.campaign_id == origin
                        )
                    )
                ).scalar_one()
            assert frozen == "aggregate"
            before = await _campaign_count(container)
            for audience in ("not_opened", "not_clicked"):
                refused = await client.post(
                    f"/api/admin/campaigns/{origin}/send-again",
                    json={"audience": audience},
                    headers=headers,
                )
                assert refused.status_code == 409, refused.text
                assert (
                    "was sent while its newsletter tracked 'aggregate'"
                    in (refused.json()["detail"])
                )
            assert await _campaign_count(container) == before
            cli = tidings_cli(database_url)("campaign", "resend-to", str(origin), "--not-opened")
            assert cli.returncode != 0
            assert "tracked 'aggregate'" in cli.output
            made = await client.post(
                f"/api/admin/campaigns/{origin}/send-again",
                json={"audience": "not_delivered"},
                headers=headers,
            )
            assert made.status_code == 201, made.text
            stats = await client.get(f"/api/admin/campaigns/{origin}/stats", headers=headers)
            assert stats.json()["engagement"]["tracking"] == "aggregate"
            draft = await container.campaigns.get(origin)
            assert draft.newsletter.tracking == "per_person"
            assert draft.tracking == "aggregate"
            rendering = container.campaigns.render_for_send(
                draft, "free", "example.org", tracking_signer("s" * 32)
            )
            assert rendering.tracking is not None
            assert rendering.tracking.mode == "aggregate"
            # A draft made from it (send again) is not sent yet: it follows the newsletter.
            assert (await container.campaigns.get(int(made.json()["id"]))).tracking == (
                "per_person"
            )


async def test_the_send_again_form_makes_the_draft_and_both_pages_show_the_link(
    database_url: str,
) -> None:
    """An operator can do it from the sent campaign's page: the form offers the choice (opens
    only where tracked per person), makes the draft, audits it, and both pages say how the two
    are linked, with who was left out and why."""
    async with ui_app(make_settings(database_url)) as (browser, container):
        client = browser()
        csrf = await signed_in(client, container)
        origin, _ids = await _origin(
            container,
            {
                "silent": BEFORE,
                "unconsented": {},
                "reader": {**BEFORE, "hits": [("human", "open")]},
            },
            tracking="per_person",
            sent_ago=DAY,
        )
        page = await client.get(f"/admin/campaigns/{origin}")
        assert page.status_code == 200, page.text
        assert f'action="/admin/campaigns/{origin}/send-again"' in page.text
        assert 'value="not_opened" checked' in page.text
        made = await client.post(
            f"/admin/campaigns/{origin}/send-again",
            data={"audience": "not_opened", "subject": "Did you see this?", "csrf_token": csrf},
        )
        assert made.status_code == 303, made.text
        editor = await client.get(made.headers["location"])
        assert f'<a href="/admin/campaigns/{origin}">campaign {origin}</a>' in editor.text
        assert "1 not tracked per person" in editor.text
        assert "Did you see this?" in editor.text
        resend = int(made.headers["location"].rsplit("/", 1)[1])
        again = await client.get(f"/admin/campaigns/{origin}")
        assert f'<a href="/admin/campaigns/{resend}">campaign {resend}</a>' in again.text
        async with container.db.read() as conn:
            action = (
                await conn.execute(
                    select(audit_log.c.action).where(audit_log.c.target == f"campaign:{resend}")
                )
            ).scalar_one()
        assert action == "campaign.send_again"
