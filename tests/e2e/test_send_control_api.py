"""Pause, resume and cancel through the admin API, the CLI and the campaign page (SND-23):
wrong states are refused with a clear problem and change nothing, every action is audited
with who, a paused send is left alone by recovery, a send paused while preparing stops at a
page boundary and resumes in the same attempt with every reader mailed once."""

from __future__ import annotations

import asyncio
from collections import Counter
from email import message_from_bytes

from sqlalchemy import func, select

from tests.factories import admin_headers, api_client, make_settings
from tests.support.admin_ui import composed_campaign, signed_in, ui_app
from tests.support.cli import clean_env, tidings
from tests.support.sending import (
    FAST_QUEUE,
    create_campaign,
    queued_send,
    recipient_states,
    wait_for,
    wait_for_campaign_status,
    workers,
)
from tidings.bootstrap import Container
from tidings.domain.jobs import JobStatus
from tidings.storage.sending import interventions
from tidings.storage.tables import campaign_batches, captured_messages


async def _actions(container: Container, campaign_id: int) -> list[tuple[str, str]]:
    async with container.db.read() as conn:
        return [(r.action, r.actor) for r in await interventions.list_for(conn, campaign_id)]


async def _mailed(container: Container) -> Counter[str]:
    async with container.db.read() as conn:
        raw = [row.raw for row in await conn.execute(select(captured_messages.c.raw))]
    return Counter(str(message_from_bytes(data)["To"]) for data in raw)


async def _send_job_done(container: Container) -> bool:
    found = await container.queue.list_jobs(kind="send_campaign")
    return bool(found) and all(job.status == JobStatus.DONE for job in found)


async def _preparing(container: Container, campaign_id: int) -> bool:
    """Preparation has written some batches and not finished: a page boundary is ahead."""
    send = await container.sends.get_send(campaign_id)
    async with container.db.read() as conn:
        query = select(func.count()).where(campaign_batches.c.campaign_id == campaign_id)
        written = (await conn.execute(query)).scalar_one()
    return send is not None and send.prepared_at is None and written > 0


async def test_pause_resume_cancel_api_refuses_wrong_states_and_audits_who(
    database_url: str,
) -> None:
    """Scripts drive sends through the API: a pause of a draft or a resume of a send that is
    not paused must say why (409 problem) and change nothing; each action that happens is
    recorded with the key that asked; a paused send is never picked up by the sweep."""
    settings = make_settings(database_url, queue=FAST_QUEUE, bulk_email={"batch_size": 20})
    async with api_client(settings) as (client, container):
        campaign_id = await queued_send(client, container, 60)
        headers = await admin_headers(container)
        base = f"/api/admin/campaigns/{campaign_id}"
        draft_id = await create_campaign(client, headers, subject="Draft")
        refused = await client.post(f"/api/admin/campaigns/{draft_id}/pause", headers=headers)
        assert refused.status_code == 409
        assert refused.headers["content-type"].startswith("application/problem+json")
        assert "only a send in progress" in refused.json()["detail"]
        not_paused = await client.post(f"{base}/resume", headers=headers)
        assert not_paused.status_code == 409
        assert "only a paused send" in not_paused.json()["detail"]
        missing = await client.post("/api/admin/campaigns/999999/pause", headers=headers)
        assert missing.status_code == 404
        assert (await client.post(f"{base}/pause")).status_code == 401
        assert (await container.campaigns.get(draft_id)).campaign.status == "draft"
        assert await _actions(container, campaign_id) == []

        paused = await client.post(f"{base}/pause", headers=headers)
        assert paused.status_code == 200, paused.text
        assert paused.json() == {
            "campaign_id": campaign_id,
            "action": "pause",
            "status": "paused",
            "attempt": 1,
        }
        again = await client.post(f"{base}/pause", headers=headers)
        assert again.status_code == 409
        status = await client.get(f"{base}/status", headers=headers)
        assert status.json()["status"] == "paused"
        assert await container.send_recovery().sweep() == 0
        async with workers(container):  # its queued send job finds it paused and stops
            await wait_for(lambda: _send_job_done(container))
        assert await recipient_states(container, campaign_id) == {}
        assert (await container.campaigns.get(campaign_id)).campaign.status == "paused"

        resumed = await client.post(f"{base}/resume", headers=headers)
        assert resumed.status_code == 202, resumed.text
        async with workers(container):
            assert await wait_for_campaign_status(container, campaign_id) == "submitted"
        assert await recipient_states(container, campaign_id) == {"sent": 60}
        actions = await _actions(container, campaign_id)
        assert [action for action, _ in actions] == ["pause", "resume"]
        assert all(actor.startswith("admin:") and len(actor) > 6 for _, actor in actions)
        done = await client.post(f"{base}/cancel", headers=headers)
        assert done.status_code == 409  # submitted: nothing left to cancel


async def test_a_send_paused_while_preparing_stops_at_a_page_and_resumes_once_each(
    database_url: str,
) -> None:
    """Pausing a big send that is still being prepared must stop it at a page boundary with
    nobody mailed, and resuming must finish it in the same attempt, everyone mailed once."""
    audience = 600
    settings = make_settings(
        database_url,
        queue=FAST_QUEUE,
        bulk_email={"batch_size": 5, "batch_creation_concurrency": 1},
    )
    async with api_client(settings) as (client, container):
        campaign_id = await queued_send(client, container, audience)

        async with workers(container):
            await wait_for(lambda: _preparing(container, campaign_id))
            await container.control.pause(campaign_id, actor="test:operator")
            await wait_for(lambda: _send_job_done(container))
            async with container.db.read() as conn:
                statuses = set(
                    (
                        await conn.execute(
                            select(campaign_batches.c.status).where(
                                campaign_batches.c.campaign_id == campaign_id
                            )
                        )
                    ).scalars()
                )
            assert statuses == {"pending"}  # written pages wait; none was dispatched
            assert await _mailed(container) == Counter()
            assert (await container.campaigns.get(campaign_id)).campaign.status == "paused"
            resumed = await container.control.resume(campaign_id, actor="test:operator")
            assert resumed.attempt == 1
            assert await wait_for_campaign_status(container, campaign_id) == "submitted"
        mailed = await _mailed(container)
        assert len(mailed) == audience
        assert set(mailed.values()) == {1}
        send = await container.sends.get_send(campaign_id)
        assert send is not None
        assert (send.attempt, send.candidate_count, send.email_count) == (1, audience, audience)


async def test_cli_pause_resume_and_cancel_asks_first(database_url: str) -> None:
    """`tidings campaign cancel` of a send in progress is irreversible for the unsent readers:
    without --yes and no terminal it refuses and changes nothing; pause and resume say what
    they did; each is audited as the operator's login."""
    settings = make_settings(database_url, queue=FAST_QUEUE)
    async with api_client(settings) as (client, container):
        campaign_id = await queued_send(client, container, 12)
        env = clean_env(DATABASE_URL=container.settings.database.url)

        def cli_run(*args: str) -> tuple[int, str]:
            ran = tidings("campaign", *args, str(campaign_id), env=env)
            return ran.returncode, ran.output

        code, output = await asyncio.to_thread(cli_run, "pause")
        assert code == 0, output
        assert f"tidings campaign resume {campaign_id}" in output
        code, output = await asyncio.to_thread(cli_run, "pause")
        assert code != 0
        assert "only a send in progress" in output
        code, output = await asyncio.to_thread(cli_run, "status")
        assert "paused" in output, output
        code, output = await asyncio.to_thread(cli_run, "cancel")
        assert code != 0
        assert "--yes" in output
        assert (await container.campaigns.get(campaign_id)).campaign.status == "paused"
        code, output = await asyncio.to_thread(cli_run, "resume")
        assert code == 0, output
        code, output = await asyncio.to_thread(cli_run, "cancel", "--yes")
        assert code == 0, output
        assert (await container.campaigns.get(campaign_id)).campaign.status == "cancelled"
        async with workers(container):  # the finalise step closes it: nobody was handed over

            async def closed() -> bool:
                send = await container.sends.get_send(campaign_id)
                return send is not None and send.cancelled_count is not None

            await wait_for(closed)
        assert await recipient_states(container, campaign_id) in ({"cancelled": 12}, {})
        send = await container.sends.get_send(campaign_id)
        assert send is not None
        assert (send.email_count, send.error_code) == (0, None)
        actions = await _actions(container, campaign_id)
        assert [action for action, _ in actions] == ["pause", "resume", "cancel"]
        assert all(actor.startswith("cli:") for _, actor in actions)


async def test_campaign_page_pauses_resumes_and_cancels(sqlite_url: str) -> None:
    """The operator watching a send on its page needs the controls there, not in a terminal."""
    async with ui_app(make_settings(sqlite_url, queue=FAST_QUEUE)) as (browser, container):
        client = browser()
        csrf = await signed_in(client, container)
        campaign_url, campaign_id = await composed_campaign(client, container, csrf, 4)
        await client.post(campaign_url + "/send", data={"csrf_token": csrf})
        page = await client.get(campaign_url)
        assert "Pause the send" in page.text
        assert "Cancel the send" in page.text
        assert "Resume the send" not in page.text
        paused = await client.post(campaign_url + "/pause", data={"csrf_token": csrf})
        assert paused.status_code == 303
        page = await client.get(campaign_url)
        assert "The send is paused" in page.text
        assert "Resume the send" in page.text
        again = await client.post(campaign_url + "/pause", data={"csrf_token": csrf})
        assert again.status_code == 409
        assert "only a send in progress" in again.text
        resumed = await client.post(campaign_url + "/resume", data={"csrf_token": csrf})
        assert resumed.status_code == 303
        asked = await client.get(campaign_url + "/cancel")
        assert "Cancel this campaign for good?" in asked.text
        unconfirmed = await client.post(campaign_url + "/cancel", data={"csrf_token": csrf})
        assert unconfirmed.status_code == 400  # asked again; nothing changed
        assert (await container.campaigns.get(campaign_id)).campaign.status != "cancelled"
        cancelled = await client.post(
            campaign_url + "/cancel", data={"csrf_token": csrf, "confirmed": "yes"}
        )
        assert cancelled.status_code == 303
        assert (await container.campaigns.get(campaign_id)).campaign.status == "cancelled"
        actions = await _actions(container, campaign_id)
        assert [action for action, _ in actions] == ["pause", "resume", "cancel"]
        assert all(actor.startswith("ui:") for _, actor in actions)


async def test_a_send_cancelled_while_preparing_mails_nobody_and_counts_every_row(
    database_url: str,
) -> None:
    """Cancelling a send still being prepared must stop it at a page boundary, mail nobody,
    and leave every recipient row written so far `cancelled` and counted."""
    settings = make_settings(
        database_url,
        queue=FAST_QUEUE,
        bulk_email={"batch_size": 5, "batch_creation_concurrency": 1},
    )
    async with api_client(settings) as (client, container):
        campaign_id = await queued_send(client, container, 600)

        async with workers(container):
            await wait_for(lambda: _preparing(container, campaign_id))
            await container.control.cancel(campaign_id, actor="test:operator")

            async def closed() -> bool:
                send = await container.sends.get_send(campaign_id)
                return send is not None and send.cancelled_count is not None

            await wait_for(closed)
        states = await recipient_states(container, campaign_id)
        assert set(states) == {"cancelled"}
        assert await _mailed(container) == Counter()
        send = await container.sends.get_send(campaign_id)
        assert send is not None
        assert (send.email_count, send.cancelled_count) == (0, states["cancelled"])
        async with container.db.read() as conn:
            statuses = set(
                (
                    await conn.execute(
                        select(campaign_batches.c.status).where(
                            campaign_batches.c.campaign_id == campaign_id
                        )
                    )
                ).scalars()
            )
        assert statuses == {"cancelled"}
        assert (await container.campaigns.get(campaign_id)).campaign.status == "cancelled"
