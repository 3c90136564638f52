"""`tidings campaign send|schedule|unschedule|cancel|pause|resume`: start, time, untime, pause,
resume and stop a campaign's send (SND-1, SND-23), each audited as `cli:<login>`."""

from __future__ import annotations

import asyncio
import getpass
import json
import sys
from datetime import UTC, datetime
from typing import TYPE_CHECKING

import typer

from tidings.cli.context import container_for, err_console, fail, out_console, run
from tidings.domain.audit import Actor
from tidings.domain.clock import is_naive
from tidings.domain.errors import InvalidInput
from tidings.domain.local_time import read_local
from tidings.domain.sending import CampaignStatus

if TYPE_CHECKING:
    from tidings.bootstrap import Container

TERMINAL = (CampaignStatus.SUBMITTED, CampaignStatus.FAILED, CampaignStatus.CANCELLED)


# Cancelling is for good: asked first for a schedule (`unschedule` keeps it as a draft) and
# a send; a draft alone is not worth a question.
CANCEL_ASKS = (
    CampaignStatus.SCHEDULED,
    CampaignStatus.PENDING,
    CampaignStatus.SUBMITTING,
    CampaignStatus.PAUSED,
)


def _actor() -> str:
    return f"cli:{getpass.getuser()}"


async def _audited(container: Container, action: str, campaign_id: int) -> None:
    """The audit log's entry for a send action taken from the command line (UI-2), as the
    API and the admin UI record theirs."""
    await container.audit.record(
        Actor.command_line(getpass.getuser()), action, target=f"campaign:{campaign_id}"
    )


def _ask(question: str, yes: bool, refused: str) -> None:
    if yes:
        return
    if not sys.stdin.isatty():
        fail(f"{refused} without confirmation: add --yes (no terminal to ask on)")
    if not typer.confirm(question, default=False):
        fail(refused)


def _moment(typed: datetime, zone: str) -> tuple[datetime, str | None]:
    """The instant a typed `--at` means: as given with an offset, else read in `zone` (a DST
    gap refused naming --at, a fold read as its first occurrence, with a note)."""
    if not is_naive(typed):
        return typed, None
    try:
        local = read_local(typed, zone, field="--at")
    except InvalidInput as refused:
        fail(refused.detail)
    return local.at, local.note(zone)


def _confirm(subject: str, count: int, when: str, yes: bool) -> None:
    _ask(f"Send {subject!r} to {count} recipient(s) {when}?", yes, "refusing to send")


async def _wait(container: Container, campaign_id: int, as_json: bool) -> None:
    """Poll the campaign until it is submitted or failed, or paused itself; exit 1 unless
    it was submitted."""
    while True:
        draft = await container.campaigns.get(campaign_id)
        if draft.campaign.status in TERMINAL:
            break
        if draft.campaign.status == CampaignStatus.PAUSED:
            await _paused_itself(container, campaign_id, as_json)
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
    elif draft.campaign.status == CampaignStatus.CANCELLED:
        err_console.print(f"campaign {campaign_id} was cancelled", markup=False)
    elif draft.campaign.status == CampaignStatus.SUBMITTED:
        out_console.print(
            f"campaign {campaign_id} submitted: {send.email_count} sent, "
            f"{send.excluded_count} excluded, {send.failed_count} failed, "
            f"{send.uncertain_count} uncertain"
        )
    else:
        err_console.print(f"campaign {campaign_id} failed: {send.error}", markup=False)
    if draft.campaign.status != CampaignStatus.SUBMITTED:
        raise typer.Exit(1)


async def _paused_itself(container: Container, campaign_id: int, as_json: bool) -> None:
    """A send that paused itself — its provider refused the sender (SND-26), or its bounce
    or complaint rate passed a threshold (SND-24) — waits for an operator: say why, exit 1.
    An operator's own pause is waited through."""
    found = await container.send_status.status(campaign_id)
    problem, auto_pause = found.provider_problem, found.auto_pause
    if problem is not None and problem.paused:
        why = problem.summary()
    elif auto_pause is not None:
        why = auto_pause.summary()
    else:
        return
    if as_json:
        totals = found.recipients
        print(
            json.dumps(
                {
                    "campaign_id": campaign_id,
                    "status": found.status.value,
                    "sent": totals.sent,
                    "failed": totals.failed,
                    "uncertain": totals.uncertain,
                    "paused_because": why,
                }
            )
        )
    else:
        err_console.print(
            f"campaign {campaign_id} paused: {why}. Resume it with "
            f"`tidings campaign resume {campaign_id}`.",
            markup=False,
        )
    raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    @app.command("send")
    def send(
        ctx: typer.Context,
        campaign_id: int = typer.Argument(..., help="The campaign's id."),
        yes: bool = typer.Option(False, "--yes", "-y", help="Do not ask for confirmation."),
        wait: bool = typer.Option(
            False,
            "--wait",
            help="Wait until it is submitted or failed, or pauses itself (a provider refusing "
            "the sender, an auto-pause: exit 1 naming why). A worker must run.",
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
                await _audited(container, "campaign.send", campaign_id)
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
            ...,
            "--at",
            help="When: ISO 8601 with an offset (2026-12-01T09:00:00Z), or a wall-clock time "
            "(2026-12-01T09:00) read in --zone. A time the zone skips (a daylight-saving gap) "
            "is refused; one it has twice (a fold) is its first occurrence.",
        ),
        zone: str | None = typer.Option(
            None,
            "--zone",
            help="The IANA zone a wall-clock --at is read in (default: the site's, site.timezone).",
        ),
        yes: bool = typer.Option(False, "--yes", "-y", help="Do not ask for confirmation."),
    ) -> None:
        """Send a draft at a later time (a durable scheduled job). `unschedule` puts it back
        to draft; `cancel` ends it for good."""
        try:
            typed = datetime.fromisoformat(at.replace("Z", "+00:00"))
        except ValueError:
            fail("--at: not an ISO 8601 time like 2026-12-01T09:00:00Z or 2026-12-01T09:00")

        async def go() -> None:
            async with container_for(ctx) as container:
                when, note = _moment(typed, zone or container.settings.site.timezone)
                draft = await container.campaigns.get(campaign_id)
                count = await container.sends.audience_size(campaign_id)
                _confirm(draft.campaign.subject, count, f"at {when.isoformat()}", yes)
                accepted = await container.sends.schedule(campaign_id, when)
                await _audited(container, "campaign.schedule", campaign_id)
            if note:
                err_console.print(f"note: {note}", markup=False)
            out_console.print(
                f"Scheduled campaign {campaign_id} for {when.isoformat()} "
                f"({when.astimezone(UTC):%Y-%m-%d %H:%M} UTC; "
                f"{accepted.preflight_email_count} recipient(s) today)."
            )

        run(go)

    @app.command("unschedule")
    def unschedule(
        ctx: typer.Context, campaign_id: int = typer.Argument(..., help="The campaign's id.")
    ) -> None:
        """Put a scheduled campaign back to draft: its send job is removed, nothing is sent,
        and it can be edited, scheduled again or sent. (`cancel` ends a campaign for good.)"""

        async def go() -> None:
            async with container_for(ctx) as container:
                await container.control.unschedule(campaign_id, actor=_actor())
                await _audited(container, "campaign.unschedule", campaign_id)
            out_console.print(
                f"Campaign {campaign_id} is a draft again; nothing was sent and no job is "
                "left queued."
            )

        run(go)

    @app.command("cancel")
    def cancel(
        ctx: typer.Context,
        campaign_id: int = typer.Argument(..., help="The campaign's id."),
        yes: bool = typer.Option(
            False, "--yes", "-y", help="Do not ask for confirmation (a schedule or a send)."
        ),
    ) -> None:
        """Cancel for good a draft, a scheduled campaign, or a send in progress or paused. A
        send stops at each worker's next chunk; recipients never handed over end `cancelled`.
        To keep a scheduled campaign as a draft instead, use `unschedule`."""

        async def go() -> None:
            async with container_for(ctx) as container:
                draft = await container.campaigns.get(campaign_id)
                if draft.campaign.status == CampaignStatus.SCHEDULED:
                    _ask(
                        f"Cancel {draft.campaign.subject!r} for good? It will never be sent "
                        f"(`tidings campaign unschedule {campaign_id}` keeps it as a draft).",
                        yes,
                        "not cancelled",
                    )
                elif draft.campaign.status in CANCEL_ASKS:
                    _ask(
                        f"Cancel the send of {draft.campaign.subject!r}? Recipients not yet "
                        "handed over will never get it.",
                        yes,
                        "not cancelled",
                    )
                done = await container.control.cancel(campaign_id, actor=_actor())
                await _audited(container, "campaign.cancel", campaign_id)
            what = "the send of campaign" if done.attempt else "campaign"
            out_console.print(f"Cancelled {what} {campaign_id}.")

        run(go)

    @app.command("pause")
    def pause(
        ctx: typer.Context, campaign_id: int = typer.Argument(..., help="The campaign's id.")
    ) -> None:
        """Pause a send in progress: chunks already handed over finish, nothing new goes out.
        It stays paused (through restarts) until `resume` or `cancel`."""

        async def go() -> None:
            async with container_for(ctx) as container:
                await container.control.pause(campaign_id, actor=_actor())
                await _audited(container, "campaign.pause", campaign_id)
            out_console.print(
                f"Paused campaign {campaign_id}. Resume it with "
                f"`tidings campaign resume {campaign_id}`."
            )

        run(go)

    @app.command("resume")
    def resume(
        ctx: typer.Context, campaign_id: int = typer.Argument(..., help="The campaign's id.")
    ) -> None:
        """Resume a paused send, in the same attempt, to the recipients not yet handed over."""

        async def go() -> None:
            async with container_for(ctx) as container:
                done = await container.control.resume(campaign_id, actor=_actor())
                await _audited(container, "campaign.resume", campaign_id)
            out_console.print(
                f"Resumed campaign {campaign_id} (attempt {done.attempt}). Follow it with "
                f"`tidings campaign status {campaign_id} --follow`."
            )

        run(go)
