"""`tidings inbound list|apply|discard`: the operator's review of reports by mail that nothing
authenticated (PRV-6). They act on nobody until applied here, in the admin or the API."""

from __future__ import annotations

import getpass
import json

import typer
from rich.table import Table

from tidings.audience.hearing.recording import LISTED_STATUSES
from tidings.cli.context import container_for, fail, out_console, run
from tidings.domain.audit import Actor


def list_reports(
    ctx: typer.Context,
    status: str = typer.Option(
        "unverified",
        "--status",
        help="applied, unmatched, ignored, unparsed or unverified; `all` for every status.",
    ),
    everything: bool = typer.Option(
        False, "--all", help="Also the reports already applied or discarded."
    ),
    limit: int = typer.Option(50, "--limit", min=1, max=1000, help="How many, newest first."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """List received bounces, complaints and mail, newest first: by default the unverified
    reports waiting for review (apply or discard them with `tidings inbound apply|discard ID`)."""

    if status != "all" and status not in LISTED_STATUSES:
        fail(f"--status must be one of {', '.join(LISTED_STATUSES)} or all", code=2)

    async def go() -> None:
        async with container_for(ctx) as container:
            rows = await container.feedback.events(
                status=None if status == "all" else status,
                after_id=None,
                limit=limit,
                awaiting_review=status == "unverified" and not everything,
            )
        if as_json:
            print(
                json.dumps(
                    [
                        {
                            "id": row.id,
                            "source": row.source,
                            "status": row.status,
                            "kind": row.kind,
                            "reason": row.diagnostic if row.status != "applied" else None,
                            "received_at": row.received_at.isoformat(),
                            "reviewed": row.reviewed,
                            "reviewed_by": row.reviewed_by,
                        }
                        for row in rows
                    ]
                )
            )
            return
        if not rows:
            waiting = status == "unverified" and not everything
            out_console.print("No reports waiting for review." if waiting else "No events.")
            return
        table = Table("id", "received", "source", "status", "claims", "why kept", "reviewed")
        for row in rows:
            table.add_row(
                str(row.id),
                f"{row.received_at:%Y-%m-%d %H:%M:%S}",
                row.source,
                row.status,
                row.kind or "",
                row.diagnostic if row.status in ("unverified", "unparsed") else "",
                f"{row.reviewed} by {row.reviewed_by}" if row.reviewed else "",
            )
        out_console.print(table)

    run(go)


def apply_report(
    ctx: typer.Context, event_id: int = typer.Argument(..., help="The report's id.")
) -> None:
    """Act on an unverified report by the addresses it names (audited). Only when you know it
    is genuine: nothing authenticated it, and anyone can mail the bounce address."""
    _review(ctx, event_id, apply=True)


def discard_report(
    ctx: typer.Context, event_id: int = typer.Argument(..., help="The report's id.")
) -> None:
    """Mark an unverified report reviewed and not acted on (audited)."""
    _review(ctx, event_id, apply=False)


def _review(ctx: typer.Context, event_id: int, *, apply: bool) -> None:
    actor = Actor.command_line(getpass.getuser())
    action = "inbound.apply" if apply else "inbound.discard"

    async def go() -> list[str]:
        async with container_for(ctx) as container:
            outcomes = await container.inbound_mail.review(event_id, apply=apply, actor=actor.label)
            await container.audit.record(actor, action, target=f"inbound:{event_id}")
        return [outcome.value for outcome in outcomes]

    outcomes = run(go)
    if apply:
        out_console.print(f"Report {event_id} applied: {', '.join(outcomes)}")
    else:
        out_console.print(f"Report {event_id} discarded")


def register(app: typer.Typer) -> None:
    """Add the review commands to the `tidings inbound` group."""
    app.command("list")(list_reports)
    app.command("apply")(apply_report)
    app.command("discard")(discard_report)
