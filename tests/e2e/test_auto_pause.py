"""Auto-pause (SND-24) fed by real bounce events: hard bounces reported through the events API
for a campaign that workers are sending pause it by itself, with the reason — recorded as
`system:auto-pause`, a `campaign.paused` webhook, the status (API and CLI), the campaign page
and the dashboard — and an operator's resume carries on without tripping again at once."""

from __future__ import annotations

import asyncio
import email
import re
from datetime import UTC, datetime

from sqlalchemy import select

from tests.e2e.audience_helpers import create_newsletter
from tests.factories import admin_headers, make_settings, real_mail
from tests.support.admin_ui import signed_in, ui_app
from tests.support.cli import clean_env, tidings
from tests.support.sending import (
    FAST_QUEUE,
    create_campaign,
    recipient_states,
    seed,
    wait_for,
    wait_for_campaign_status,
    workers,
)
from tidings.bootstrap import utcnow
from tidings.devservers.sink import Faults, SmtpSink
from tidings.storage.sending import feedback_counts, interventions
from tidings.storage.tables import webhook_deliveries

AUDIENCE = 240
SAMPLE = 40  # messages handed over before the hard-bounce rate is judged (5%)
SLOW_DATA = Faults(delay_seconds=0.1, delay_commands=frozenset({"DATA"}))


def _message_id(raw: bytes) -> str:
    return str(email.message_from_bytes(raw)["Message-ID"]).strip("<>")


async def test_hard_bounces_past_the_threshold_pause_the_send_until_an_operator_resumes(
    database_url: str,
) -> None:
    """A list full of dead addresses gets the sender blocked by the mailbox providers long
    before the send ends: the send must stop itself, say why everywhere the operator looks,
    and carry on only when they decide — without tripping again on the same figures."""
    async with SmtpSink(clock=utcnow, port=0, faults=SLOW_DATA) as sink:
        settings = make_settings(
            database_url,
            queue=FAST_QUEUE,
            smtp={"host": "127.0.0.1", "port": sink.port, "security": "none"},
            bulk_email={
                "batch_size": 20,
                "in_flight_chunk": 5,
                "concurrency": 1,
                "auto_pause_hard_bounce_sample": SAMPLE,
            },
            **real_mail(provider="smtp"),
        )
        async with ui_app(settings) as (browser, container):
            client = browser()
            await signed_in(client, container)
            headers = await admin_headers(container)
            await create_newsletter(client, headers)
            await seed(container, "weekly", AUDIENCE)
            await container.webhooks.create_endpoint(
                "https://hooks.example.org/x", ["campaign.paused"]
            )
            campaign_id = await create_campaign(client, headers)
            sent = await client.post(f"/api/admin/campaigns/{campaign_id}/send", headers=headers)
            assert sent.status_code == 202, sent.text

            async def handed_over(at_least: int) -> bool:
                async with container.db.read() as conn:
                    return await feedback_counts.sent(conn, campaign_id) >= at_least

            bounced: list[str] = []

            async def bounce(messages: list[tuple[str, bytes]], prefix: str) -> None:
                events = [
                    {
                        "id": f"{prefix}-{address}",
                        "type": "hard_bounce",
                        "email": address,
                        "occurred_at": datetime.now(UTC).isoformat(),
                        "message_id": _message_id(raw),
                        "code": "5.1.1",
                    }
                    for address, raw in messages
                ]
                answer = await client.post(
                    "/api/admin/events", headers=headers, json={"events": events}
                )
                assert answer.status_code == 200, answer.text
                assert set(answer.json()["outcomes"]) == {"applied"}
                bounced.extend(address for address, _raw in messages)

            async with workers(container):
                await wait_for(lambda: handed_over(SAMPLE), within_seconds=60)
                mailed = [(m.recipients[0], m.data) for m in list(sink.messages)]
                # Two bounces: 2 of at least 40 is no more than 5%, so the send goes on.
                await bounce(mailed[:2], "first")
                assert (await container.send_status.status(campaign_id)).status == "submitting"
                # Ten more from the same send: well past 5% of what went out.
                await bounce(mailed[2:12], "more")
                status = await container.send_status.status(campaign_id)
                assert status.status == "paused"
                at_pause = len(sink.messages)

                async def quiet() -> bool:  # the chunks in flight finish, nothing more starts
                    states = await recipient_states(container, campaign_id)
                    return "sending" not in states

                await wait_for(quiet, within_seconds=30)
                stopped_at = len(sink.messages)
                assert stopped_at < AUDIENCE
                assert stopped_at - at_pause <= 20  # at most a chunk per batch in hand

            assert status.auto_pause is not None
            reason = status.auto_pause.reason
            # It paused at the first bounce past the threshold, in that event's transaction.
            assert re.fullmatch(
                r"hard bounces \d+ of \d+ sent \([\d.]+%\), over the 5% threshold", reason
            )
            assert all(address not in reason for address in bounced)
            async with container.db.read() as conn:
                recorded = await interventions.list_for(conn, campaign_id)
                hooks = [row.payload for row in await conn.execute(select(webhook_deliveries))]
            assert [(r.action, r.actor, r.note) for r in recorded] == [
                ("pause", "system:auto-pause", reason)
            ]
            assert [hook["data"]["reason"] for hook in hooks] == [reason]

            body = (
                await client.get(f"/api/admin/campaigns/{campaign_id}/status", headers=headers)
            ).json()
            assert (body["status"], body["auto_pause"]["reason"]) == ("paused", reason)
            summary = status.auto_pause.summary()
            assert summary in (await client.get(f"/admin/campaigns/{campaign_id}")).text
            assert summary in (await client.get("/admin")).text

            env = clean_env(DATABASE_URL=settings.database.url)
            ran = await asyncio.to_thread(tidings, "campaign", "status", str(campaign_id), env=env)
            assert reason in " ".join(ran.output.split())

            # The operator looked and resumes: the figures that tripped it count no more.
            await container.control.resume(campaign_id, actor="test:operator")
            async with workers(container):
                await bounce(
                    mailed[12:14], "late"
                )  # two more bounces of mail sent before the resume
                assert (await container.send_status.status(campaign_id)).status != "paused"
                final = await wait_for_campaign_status(container, campaign_id, within_seconds=120)
            assert final == "submitted"
            states = await recipient_states(container, campaign_id)
            assert states.get("sent", 0) + states.get("uncertain", 0) == AUDIENCE
            assert (await container.send_status.status(campaign_id)).auto_pause is None
            assert "auto-pause" not in (await client.get("/admin")).text
