"""Unschedule is not cancel (issue 38 item 2): a scheduled campaign goes back to draft with its
job removed, through the API, the CLI and the admin UI; cancel, and a schedule sent now, leave
no job behind either; every one is audited. And a schedule's wall-clock time in the site's
zone: a DST gap refused with the reason, a fold read as its first occurrence (item 3)."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

from tests.e2e.audience_helpers import create_newsletter
from tests.factories import admin_headers, api_client, make_settings
from tests.support.admin_ui import composed_campaign, signed_in, ui_app
from tests.support.cli import clean_env, tidings
from tests.support.sending import create_campaign, seed
from tidings.bootstrap import Container
from tidings.domain.jobs import JobStatus

GAP = "2027-03-28T02:30"  # Europe/Paris jumps from 02:00 to 03:00 that night
FOLD = "2027-10-31T02:30"  # and goes back from 03:00 to 02:00 this one


async def _waiting_send_jobs(container: Container, campaign_id: int) -> list[int]:
    """The send jobs still queued for this campaign (pending or running)."""
    jobs = await container.queue.list_jobs(kind="send_campaign")
    return [
        job.id
        for job in jobs
        if job.payload.get("campaign_id") == campaign_id
        and job.status in (JobStatus.PENDING, JobStatus.RUNNING)
    ]


async def _audited(container: Container, campaign_id: int) -> list[tuple[str, str]]:
    """(action, actor) of the campaign's audit entries, oldest first."""
    entries = await container.audit.list(action="campaign")
    target = f"campaign:{campaign_id}"
    # Draft saves (`campaign.update`, the audit trail's entry for any write no route names)
    # are not what these tests are about.
    return [
        (e.action, e.actor)
        for e in reversed(entries)
        if e.target == target and e.action != "campaign.update"
    ]


async def _actions(container: Container, campaign_id: int) -> list[str]:
    return [action for action, _ in await _audited(container, campaign_id)]


def _later(minutes: int = 60) -> str:
    return (datetime.now(UTC) + timedelta(minutes=minutes)).isoformat()


async def test_unschedule_returns_to_draft_and_removes_the_job_through_the_api(
    database_url: str,
) -> None:
    """An operator who unschedules expects a draft they can edit, and nothing that fires at
    the old time: the job goes in the same transaction, the action is audited, and a second
    unschedule is a clear 409 that changes nothing."""
    async with api_client(make_settings(database_url)) as (client, container):
        headers = await admin_headers(container)
        await create_newsletter(client, headers)
        await seed(container, "weekly", 3)
        campaign_id = await create_campaign(client, headers)
        base = f"/api/admin/campaigns/{campaign_id}"
        scheduled = await client.post(
            f"{base}/schedule", json={"scheduled_at": _later()}, headers=headers
        )
        assert scheduled.status_code == 202, scheduled.text
        assert await _waiting_send_jobs(container, campaign_id) == [scheduled.json()["job_id"]]

        undone = await client.post(f"{base}/unschedule", headers=headers)
        assert undone.status_code == 200, undone.text
        assert undone.json() == {
            "campaign_id": campaign_id,
            "action": "unschedule",
            "status": "draft",
            "attempt": None,
        }
        draft = await container.campaigns.get(campaign_id)
        assert (draft.campaign.status, draft.campaign.scheduled_at) == ("draft", None)
        assert await _waiting_send_jobs(container, campaign_id) == []

        again = await client.post(f"{base}/unschedule", headers=headers)
        assert again.status_code == 409
        assert again.headers["content-type"].startswith("application/problem+json")
        assert "only a scheduled one" in again.json()["detail"]
        edited = await client.patch(base, json={"subject": "Issue 1, revised"}, headers=headers)
        assert edited.status_code == 200, edited.text  # a draft again: editable

        rescheduled = await client.post(
            f"{base}/schedule", json={"scheduled_at": _later()}, headers=headers
        )
        assert rescheduled.status_code == 202, rescheduled.text
        assert rescheduled.json()["attempt"] == 2  # a fresh job, not the removed one
        assert await _waiting_send_jobs(container, campaign_id) == [rescheduled.json()["job_id"]]
        assert await _actions(container, campaign_id) == [
            "campaign.schedule",
            "campaign.unschedule",
            "campaign.schedule",
        ]


async def test_cancel_and_send_now_leave_no_scheduled_job_behind(database_url: str) -> None:
    """A schedule cancelled for good, or sent now instead, must not leave its job waiting for
    the old time (the Jobs page would list it; a worker would wake for nothing)."""
    async with api_client(make_settings(database_url)) as (client, container):
        headers = await admin_headers(container)
        await create_newsletter(client, headers)
        await seed(container, "weekly", 3)
        cancelled_id = await create_campaign(client, headers)
        sent_id = await create_campaign(client, headers)
        for campaign_id in (cancelled_id, sent_id):
            scheduled = await client.post(
                f"/api/admin/campaigns/{campaign_id}/schedule",
                json={"scheduled_at": _later()},
                headers=headers,
            )
            assert scheduled.status_code == 202, scheduled.text

        cancelled = await client.post(
            f"/api/admin/campaigns/{cancelled_id}/cancel", headers=headers
        )
        assert cancelled.json()["status"] == "cancelled"
        assert await _waiting_send_jobs(container, cancelled_id) == []
        unscheduled = await client.post(
            f"/api/admin/campaigns/{cancelled_id}/unschedule", headers=headers
        )
        assert unscheduled.status_code == 409  # cancelled is for good

        sent = await client.post(f"/api/admin/campaigns/{sent_id}/send", headers=headers)
        assert sent.status_code == 202, sent.text
        assert await _waiting_send_jobs(container, sent_id) == [sent.json()["job_id"]]
        jobs = await container.queue.list_jobs(kind="send_campaign")
        assert len(jobs) == 1  # the two schedules' jobs are gone


async def test_a_time_the_site_zone_skips_is_refused_and_a_repeated_one_is_read_first(
    database_url: str,
) -> None:
    """02:30 on the night clocks jump does not exist in Paris: scheduling it must say so,
    not silently send at 03:30. 02:30 on the night they go back happens twice: it is the
    first (00:30 UTC), as documented. Bad zones and offset-less times without one are 422s
    naming their field."""
    async with api_client(make_settings(database_url)) as (client, container):
        headers = await admin_headers(container)
        await create_newsletter(client, headers)
        await seed(container, "weekly", 3)
        campaign_id = await create_campaign(client, headers)
        url = f"/api/admin/campaigns/{campaign_id}/schedule"

        gap = await client.post(
            url, json={"scheduled_at": GAP, "timezone": "Europe/Paris"}, headers=headers
        )
        assert gap.status_code == 422, gap.text
        problem = gap.json()
        assert gap.headers["content-type"].startswith("application/problem+json")
        assert "does not exist in Europe/Paris" in problem["detail"]
        assert "daylight saving" in problem["detail"]
        assert (await container.campaigns.get(campaign_id)).campaign.status == "draft"
        assert await _waiting_send_jobs(container, campaign_id) == []

        naive = await client.post(url, json={"scheduled_at": FOLD}, headers=headers)
        assert naive.status_code == 422
        (error,) = naive.json()["errors"]
        assert error["field"] == "body.scheduled_at"
        assert "timezone" in error["message"]
        unknown = await client.post(
            url, json={"scheduled_at": FOLD, "timezone": "Mars/Olympus"}, headers=headers
        )
        assert unknown.status_code == 422
        assert "timezone" in unknown.json()["detail"]

        fold = await client.post(
            url, json={"scheduled_at": FOLD, "timezone": "Europe/Paris"}, headers=headers
        )
        assert fold.status_code == 202, fold.text
        stored = (await container.campaigns.get(campaign_id)).campaign.scheduled_at
        assert stored == datetime(2027, 10, 31, 0, 30, tzinfo=UTC)  # the first 02:30


async def test_unschedule_and_a_dst_gap_from_the_command_line(database_url: str) -> None:
    """The terminal has the same verbs: `unschedule` back to draft (job removed, audited as
    the login), a wall-clock `--at` read in the site's zone, a gap refused naming --at with
    nothing changed, and `cancel` of a schedule asking first."""
    settings = make_settings(database_url, site={"timezone": "Europe/Paris"})
    async with api_client(settings) as (client, container):
        headers = await admin_headers(container)
        await create_newsletter(client, headers)
        await seed(container, "weekly", 3)
        campaign_id = await create_campaign(client, headers)
        env = clean_env(DATABASE_URL=database_url, SITE_TIMEZONE="Europe/Paris")

        def cli(*args: str) -> tuple[int, str]:
            ran = tidings("campaign", *args, env=env)
            return ran.returncode, ran.output

        code, output = await asyncio.to_thread(
            cli, "schedule", str(campaign_id), "--at", GAP, "--yes"
        )
        assert code == 1
        assert "--at: 2027-03-28 02:30 does not exist in Europe/Paris" in output
        assert (await container.campaigns.get(campaign_id)).campaign.status == "draft"

        code, output = await asyncio.to_thread(
            cli, "schedule", str(campaign_id), "--at", FOLD, "--yes"
        )
        assert code == 0, output
        assert "happens twice in Europe/Paris" in output
        assert "2027-10-31 00:30 UTC" in output
        assert len(await _waiting_send_jobs(container, campaign_id)) == 1

        code, output = await asyncio.to_thread(cli, "cancel", str(campaign_id))
        assert code == 1  # for good: asked first, and there is no terminal to ask on
        assert "--yes" in output
        code, output = await asyncio.to_thread(cli, "unschedule", str(campaign_id))
        assert code == 0, output
        assert "draft again" in output
        assert (await container.campaigns.get(campaign_id)).campaign.status == "draft"
        assert await _waiting_send_jobs(container, campaign_id) == []
        code, output = await asyncio.to_thread(cli, "unschedule", str(campaign_id))
        assert code == 1
        assert "only a scheduled one" in output
        entries = await _audited(container, campaign_id)
        assert [(action, actor.startswith("cli:")) for action, actor in entries] == [
            ("campaign.schedule", True),
            ("campaign.unschedule", True),
        ]


async def test_the_pages_unschedule_confirm_a_cancel_and_list_waiting_jobs(
    database_url: str,
) -> None:
    """In the admin: "Cancel schedule" is unschedule (back to the editor, the job gone from
    the Jobs page and the dashboard); cancelling for good is asked on a page of its own
    (no script needed) and a post without the confirmation changes nothing; a gap typed in
    the editor comes back at the field with the reason."""
    settings = make_settings(database_url, site={"timezone": "Europe/Paris"})
    async with ui_app(settings) as (browser, container):
        client = browser()
        csrf = await signed_in(client, container)
        campaign_url, campaign_id = await composed_campaign(client, container, csrf, 3)
        gap = await client.post(
            campaign_url + "/schedule",
            data={"csrf_token": csrf, "scheduled_at": GAP, "zone": "Europe/Paris"},
        )
        assert gap.status_code in (400, 422)
        assert "does not exist in Europe/Paris" in gap.text
        assert 'aria-invalid="true"' in gap.text
        assert (await container.campaigns.get(campaign_id)).campaign.status == "draft"

        when = (datetime.now(UTC) + timedelta(days=2)).strftime("%Y-%m-%dT%H:%M")
        scheduled = await client.post(
            campaign_url + "/schedule",
            data={"csrf_token": csrf, "scheduled_at": when, "zone": "UTC"},
        )
        assert scheduled.status_code == 303, scheduled.text
        editor = await client.get(campaign_url)
        assert "Cancel schedule" in editor.text
        jobs_page = await client.get("/admin/jobs")
        assert f"campaign {campaign_id}</a>" in jobs_page.text
        assert "send_campaign" in jobs_page.text
        dashboard = await client.get("/admin")
        assert f'send_campaign for <a href="/admin/campaigns/{campaign_id}">' in dashboard.text

        undone = await client.post(campaign_url + "/unschedule", data={"csrf_token": csrf})
        assert undone.status_code == 303
        assert (await container.campaigns.get(campaign_id)).campaign.status == "draft"
        assert await _waiting_send_jobs(container, campaign_id) == []
        assert f"campaign {campaign_id}</a>" not in (await client.get("/admin/jobs")).text
        assert "No job is waiting or running." in (await client.get("/admin/jobs")).text

        asked = await client.get(campaign_url + "/cancel")
        assert "Cancel this campaign for good?" in asked.text
        bare = await client.post(campaign_url + "/cancel", data={"csrf_token": csrf})
        assert bare.status_code == 400
        assert (await container.campaigns.get(campaign_id)).campaign.status == "draft"
        done = await client.post(
            campaign_url + "/cancel", data={"csrf_token": csrf, "confirmed": "yes"}
        )
        assert done.status_code == 303
        assert (await container.campaigns.get(campaign_id)).campaign.status == "cancelled"
        page = await client.get(campaign_url)
        assert "What was sent" not in page.text  # it never went out
        assert await _actions(container, campaign_id) == [
            "campaign.schedule",
            "campaign.unschedule",
            "campaign.cancel",
        ]
