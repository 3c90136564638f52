"""`tidings campaign status|recipients`: how a send is going (SND-17, SND-18), and who is
uncertain or failed, with the Message-IDs to look up at the provider (SND-13)."""

from __future__ import annotations

import asyncio
import csv
import json
import sys
from typing import TYPE_CHECKING, Any

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn
from rich.table import Table

from tidings.api.admin.send_views import RecipientPublic, SendStatusPublic
from tidings.audience.import_header import neutralise_formula
from tidings.campaigns.send_status import CampaignRecipient
from tidings.cli.context import container_for, fail, out_console, run
from tidings.domain.send_status import SendingStatus
from tidings.domain.sending import CampaignStatus, RecipientState

if TYPE_CHECKING:
    from tidings.bootstrap import Container

# A follow ends at these; it exits 0 only for a submitted send.
FOLLOW_ENDS = (
    CampaignStatus.SUBMITTED,
    CampaignStatus.FAILED,
    CampaignStatus.CANCELLED,
    CampaignStatus.PAUSED,
)
PAGE = 500
COLUMNS = ["id", "batch_id", "subscriber_id", "address", "message_id", "state", "reason"]


def status_json(campaign_id: int, found: SendingStatus) -> dict[str, Any]:
    """The same fields as `GET /api/admin/campaigns/{id}/status`."""
    return SendStatusPublic.of(campaign_id, found).model_dump(mode="json")


def _eta(found: SendingStatus) -> str:
    if found.eta_seconds is None:
        return "ETA unknown"
    minutes, seconds = divmod(found.eta_seconds, 60)
    return f"ETA {minutes}m{seconds:02d}s" if minutes else f"ETA {seconds}s"


def phase_of_status(found: SendingStatus) -> str:
    return f" ({found.phase.value})" if found.phase else ""


def status_line(campaign_id: int, found: SendingStatus) -> str:
    """One line: status, phase, processed/total, ETA (and for a failed send, what next)."""
    progress = f"{found.completed}/{found.total} processed"
    if found.status == CampaignStatus.FAILED:
        advice = "retryable" if found.retryable else "not retryable"
        return (
            f"campaign {campaign_id}: failed during {found.failed_during}, {progress}; "
            f"{found.error_code} ({advice}): {found.error}"
        )
    totals = found.recipients
    counts = (
        f"{totals.sent} sent, {totals.excluded} excluded, {totals.failed} failed, "
        f"{totals.uncertain} uncertain"
    )
    if found.status == CampaignStatus.SUBMITTED:
        return f"campaign {campaign_id}: submitted, {progress}: {counts}"
    if found.status == CampaignStatus.CANCELLED and found.attempt:
        return f"campaign {campaign_id}: cancelled: {counts}, {totals.cancelled} cancelled"
    if found.status == CampaignStatus.PAUSED:
        why = f"; {found.auto_pause.summary()}" if found.auto_pause else ""
        if found.provider_problem is not None:  # the provider refused the sender (SND-26)
            why += f"; {found.provider_problem.summary()}"
        return (
            f"campaign {campaign_id}: paused{phase_of_status(found)}, {progress}{why}; "
            f"`tidings campaign resume {campaign_id}` carries on"
        )
    phase = phase_of_status(found)
    if found.status in (CampaignStatus.PENDING, CampaignStatus.SUBMITTING):
        line = f"campaign {campaign_id}: {found.status.value}{phase}, {progress}, {_eta(found)}"
        if found.provider_problem is not None:
            line += f"; {found.provider_problem.summary()}"
        return line
    return f"campaign {campaign_id}: {found.status.value}"


async def _follow(
    container: Container, campaign_id: int, *, as_json: bool, interval: float
) -> SendingStatus:
    """Poll until the send ends; JSON prints one line per poll, otherwise a progress bar."""
    found = await container.send_status.status(campaign_id)
    if found.status == CampaignStatus.DRAFT:
        fail(f"campaign {campaign_id} is a draft: nothing is being sent")
    if as_json:
        while True:
            print(json.dumps(status_json(campaign_id, found)), flush=True)
            if found.status in FOLLOW_ENDS:
                return found
            await asyncio.sleep(interval)
            found = await container.send_status.status(campaign_id)
    columns = (
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[eta]}"),
    )
    with Progress(*columns, console=out_console, transient=True) as bar:
        task = bar.add_task("", total=None, eta="")
        while found.status not in FOLLOW_ENDS:
            bar.update(
                task,
                description=f"{found.status.value} ({found.phase or 'waiting'})",
                completed=found.completed,
                total=found.total or None,
                eta=_eta(found),
            )
            await asyncio.sleep(interval)
            found = await container.send_status.status(campaign_id)
    out_console.print(status_line(campaign_id, found), markup=False)
    return found


def _write_recipients(rows: list[CampaignRecipient], form: str, writer: Any) -> None:
    for row in rows:
        if form == "json":
            print(RecipientPublic.of(row).model_dump_json())
            continue
        values = [getattr(row, column) for column in COLUMNS]
        writer.writerow(["" if v is None else neutralise_formula(str(v)) for v in values])


def register(app: typer.Typer) -> None:
    @app.command("status")
    def status(
        ctx: typer.Context,
        campaign_id: int = typer.Argument(..., help="The campaign's id."),
        follow: bool = typer.Option(
            False,
            "--follow",
            "-f",
            help="Show progress until the send ends; exit 0 if submitted, 1 if failed.",
        ),
        as_json: bool = typer.Option(
            False, "--json", help="Print JSON (with --follow: one line per poll)."
        ),
        interval: float = typer.Option(
            1.0, "--interval", min=0.1, max=60, help="Seconds between polls with --follow."
        ),
    ) -> None:
        """Show a campaign's send: status, phase, processed/total and ETA."""

        async def go() -> SendingStatus:
            async with container_for(ctx) as container:
                if follow:
                    return await _follow(container, campaign_id, as_json=as_json, interval=interval)
                found = await container.send_status.status(campaign_id)
            if as_json:
                print(json.dumps(status_json(campaign_id, found)))
            else:
                out_console.print(status_line(campaign_id, found), markup=False)
            return found

        found = run(go)
        if follow and found.status != CampaignStatus.SUBMITTED:
            raise typer.Exit(1)

    @app.command("recipients")
    def recipients(
        ctx: typer.Context,
        campaign_id: int = typer.Argument(..., help="The campaign's id."),
        state: RecipientState = typer.Option(
            ..., "--state", help="Which recipients (uncertain or failed, usually)."
        ),
        as_json: bool = typer.Option(False, "--json", help="One JSON object per line."),
        as_csv: bool = typer.Option(False, "--csv", help="CSV with a header row."),
    ) -> None:
        """List a campaign's recipients in one state (e.g. uncertain or failed) with their
        subscriber id, address, Message-ID and reason: what to look up at the provider."""
        if as_json and as_csv:
            fail("--json and --csv: choose one")

        async def go() -> list[CampaignRecipient]:
            shown: list[CampaignRecipient] = []
            writer = csv.writer(sys.stdout)
            if as_csv:
                writer.writerow(COLUMNS)
            after: int | None = None
            async with container_for(ctx) as container:
                while True:
                    rows = await container.send_status.recipients(
                        campaign_id, state, after_id=after, limit=PAGE
                    )
                    if as_json or as_csv:
                        _write_recipients(rows, "json" if as_json else "csv", writer)
                    else:
                        shown.extend(rows)
                    if len(rows) < PAGE:
                        return shown
                    after = rows[-1].id

        shown = run(go)
        if as_json or as_csv:
            return
        table = Table(*COLUMNS)
        for row in shown:
            table.add_row(
                *("" if v is None else str(v) for v in (getattr(row, c) for c in COLUMNS))
            )
        out_console.print(table)
        out_console.print(f"{len(shown)} {state.value} recipient(s)", markup=False)
