"""Transactional mail hears back too (PRV-6, issue 22 item 4): a provider's delivered, bounced
or complained event about a transactional message lands on that message, shown where the
outbox and the job are shown (the admin API, `tidings outbox show`, `tidings jobs show`)."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Any

from tests.e2e.test_delivery_engine import FAST_QUEUE, serving
from tests.factories import admin_headers, make_settings
from tests.support.cli import clean_env, tidings
from tests.support.waiting import wait_for
from tidings.delivery.mailgun_events import event_data, signed_body

KEY = "whsec-transactional-key"


async def test_a_transactional_messages_bounce_and_delivery_are_shown_with_it(
    database_url: str,
) -> None:
    """An operator asking "did the password-reset mail arrive?" needs the answer on the
    message: the provider's hard bounce with its code, and a later delivery report beside it;
    the same event twice, or events out of order, leave the same record."""
    settings = make_settings(database_url, queue=FAST_QUEUE, mailgun={"webhook_signing_key": KEY})
    async with serving(settings) as (client, container):
        headers = await admin_headers(container)
        body = {"to": "someone@example.org", "subject": "Reset", "text": "Your link"}
        queued = await client.post("/api/admin/emails", json=body, headers=headers)
        assert queued.status_code == 202, queued.text

        async def captured() -> list[dict[str, Any]]:
            page = await client.get("/api/admin/outbox", headers=headers)
            return list(page.json()["items"])

        (item,) = await wait_for(captured)
        shown = await client.get(f"/api/admin/outbox/{item['id']}", headers=headers)
        assert shown.json()["outcome"] == {
            "delivered_at": None,
            "bounced_at": None,
            "bounce_kind": None,
            "bounce_code": None,
            "complained_at": None,
        }
        bounced_at = datetime.now(UTC).replace(microsecond=0)

        async def report(event: str, at: datetime, event_id: str, **extra: Any) -> None:
            data = event_data(
                event,
                "someone@example.org",
                event_id=event_id,
                occurred_at=at,
                message_id=item["message_id"],
                **extra,
            )
            response = await client.post(
                "/api/events/mailgun",
                content=signed_body(KEY, data, now=datetime.now(UTC)),
                headers={"content-type": "application/json"},
            )
            assert response.status_code == 200, response.text

        for _ in range(2):  # a retried webhook is the same event
            await report("failed", bounced_at, "bounce-1", severity="permanent", code=550)
        await report("failed", bounced_at - timedelta(minutes=5), "soft-1", severity="temporary")
        await report("delivered", bounced_at - timedelta(minutes=10), "delivered-1")
        outcome = (await client.get(f"/api/admin/outbox/{item['id']}", headers=headers)).json()[
            "outcome"
        ]
        assert outcome["bounce_kind"] == "hard"
        assert outcome["bounce_code"] == "550"
        assert datetime.fromisoformat(outcome["bounced_at"]) == bounced_at
        assert datetime.fromisoformat(outcome["delivered_at"]) == bounced_at - timedelta(minutes=10)
        assert outcome["complained_at"] is None
        job_id = queued.json()["job_id"]
        job = (await client.get(f"/api/admin/jobs/{job_id}", headers=headers)).json()
        assert job["outcome"] == outcome  # also where the job is inspected
        env = clean_env(DATABASE_URL=database_url)
        shown_cli = await asyncio.to_thread(tidings, "outbox", "show", str(item["id"]), env=env)
        job_cli = await asyncio.to_thread(tidings, "jobs", "show", str(job_id), env=env)
    assert shown_cli.returncode == 0, shown_cli.output
    assert "Outcome: delivered " in shown_cli.stdout
    assert "hard bounce (550)" in shown_cli.stdout
    assert job_cli.returncode == 0, job_cli.output
    assert "outcome: delivered " in job_cli.stdout
    assert "hard bounce (550)" in job_cli.stdout
