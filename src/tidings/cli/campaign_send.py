"""`tidings campaign send|schedule|cancel`: start, time and stop a campaign's send (SND-1)."""

from __future__ import annotations

import asyncio
import json
import sys
from datetime import datetime

import typer

from tidings.bootstrap import Container
from tidings.cli.context import container_for, err_console, fail, out_console, run
from tidings.domain.sending import CampaignStatus

TERMINAL = (CampaignStatus.SUBMITTED, CampaignStatus.FAILED)


def _confirm(subject: str, count: int, when: str, yes: bool) -> None:
    if yes:
        return
    if not sys.stdin.isatty():
        fail("refusing to send without confirmation: add --yes (no terminal to ask on)")
    if not typer.confirm(f"Send {subject!r} to {count} recipient(s) {when}?", default=False):
        fail("not sent")


async def _wait(container: Container, campaign_id: int, as_json: bool) -> None:
    """Poll the campaign until it is submitted or failed; exit 1 if it failed."""
    while True:
        draft = await container.campaigns.get(campaign_id)
        if draft.campaign.status in TERMINAL:
            break
        await asyncio.sleep(0.5)
    send = await container.sends.get_send(campaign_id)
    assert send is not None
    summary = {
        "campaign_id": campaign_id,
        "status": draft.campaign.status,
        "sent": send.email_count,
        "excluded": send.excluded_count,
        "failed": send.failed_count,
        "uncertain": send.uncertain_count,
        "error_code": send.error_code,
        "error": send.error,
        "retryable": send.retryable,
    }
    if as_json:
        print(json.dumps(summary))
    elif draft.campaign.status == CampaignStatus.SUBMITTED:
        out_console.print(
            f"campaign {campaign_id} submitted: {send.email_count} sent, "
            f"{send.excluded_count} excluded, {send.failed_count} failed, "
            f"{send.uncertain_count} uncertain"
        )
    else:
        err_console.print(f"campaign {campaign_id} failed: {send.error}", markup=False)
    if draft.campaign.status == CampaignStatus.FAILED:
        raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    @app.command("send")
    def send(
        ctx: typer.Context,
        campaign_id: int = typer.Argument(..., help="The campaign's id."),
        yes: bool = typer.Option(False, "--yes", "-y", help="Do not ask for confirmation."),
        wait: bool = typer.Option(
            False, "--wait", help="Wait until it is submitted or failed (a worker must run)."
        ),
        as_json: bool = typer.Option(False, "--json", help="Print the outcome as JSON."),
    ) -> None:
        """Send a draft (or a scheduled campaign) now. Workers (`tidings worker`, or
        `tidings serve`) do the sending; this queues it durably and returns."""

        async def go() -> None:
            async with container_for(ctx) as container:
                draft = await container.campaigns.get(campaign_id)
                count = await container.sends.audience_size(campaign_id)
                _confirm(draft.campaign.subject, count, "now", yes)
                accepted = await container.sends.send(campaign_id)
                if as_json and not wait:
                    print(
                        json.dumps(
                            {
                                "campaign_id": campaign_id,
                                "status": accepted.status,
                                "preflight_email_count": accepted.preflight_email_count,
                                "job_id": accepted.job_id,
                            }
                        )
                    )
                else:
                    out_console.print(
                        f"Queued campaign {campaign_id} for {accepted.preflight_email_count} "
                        "recipient(s)."
                    )
                if wait:
                    await _wait(container, campaign_id, as_json)

        run(go)

    @app.command("schedule")
    def schedule(
        ctx: typer.Context,
        campaign_id: int = typer.Argument(..., help="The campaign's id."),
        at: str = typer.Option(
            ..., "--at", help="When, ISO 8601 with a timezone: 2026-12-01T09:00:00Z."
        ),
        yes: bool = typer.Option(False, "--yes", "-y", help="Do not ask for confirmation."),
    ) -> None:
        """Send a draft at a later time (a durable scheduled job; cancel with `cancel`)."""
        try:
            when = datetime.fromisoformat(at.replace("Z", "+00:00"))
        except ValueError:
            fail("--at: not an ISO 8601 time like 2026-12-01T09:00:00Z")

        async def go() -> None:
            async with container_for(ctx) as container:
                draft = await container.campaigns.get(campaign_id)
                count = await container.sends.audience_size(campaign_id)
                _confirm(draft.campaign.subject, count, f"at {when.isoformat()}", yes)
                accepted = await container.sends.schedule(campaign_id, when)
            out_console.print(
                f"Scheduled campaign {campaign_id} for {when.isoformat()} "
                f"({accepted.preflight_email_count} recipient(s) today)."
            )

        run(go)

    @app.command("cancel")
    def cancel(
        ctx: typer.Context, campaign_id: int = typer.Argument(..., help="The campaign's id.")
    ) -> None:
        """Cancel a draft or scheduled campaign (a send in progress cannot be cancelled)."""

        async def go() -> None:
            async with container_for(ctx) as container:
                await container.sends.cancel(campaign_id)
            out_console.print(f"Cancelled campaign {campaign_id}.")

        run(go)
