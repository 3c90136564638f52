"""`tidings subscribers import|export|confirm-pending|show`: the audience in and out as CSV
(AUD-9), the double opt-in email to those an import left waiting, and one person with their
history (AUD-13).

`import` exits 0 when every row imported and 1 when any row failed (the others are imported
all the same) or the file could not be imported at all (unknown columns, unknown newsletter,
not UTF-8). The summary and the rows not imported go to stdout (`> report.txt` keeps them),
or the report as JSON with `--json`; the progress bar and errors that stop it, to stderr.
"""

from __future__ import annotations

import dataclasses
import getpass
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any, TextIO

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn
from rich.table import Table
from rich.text import Text

from tidings.access.audit import export_entry
from tidings.audience.import_header import RowError, parse_column_map
from tidings.audience.import_vocabulary import FIELDS
from tidings.audience.importer import ImportReport
from tidings.audience.subscribers import SubscriberView
from tidings.cli.context import container_for, err_console, fail, out_console, run
from tidings.cli.subscribers_add import subscribe
from tidings.cli.subscribers_bulk import bulk
from tidings.domain.audience import Tier
from tidings.domain.audit import Actor
from tidings.domain.consent import SubscriptionState
from tidings.domain.errors import InvalidInput
from tidings.engagement.activity import ActivityEntry

app = typer.Typer(
    help="Import and export subscribers as CSV; show one with their history.", no_args_is_help=True
)
ERRORS_SHOWN = 50
DEFAULT_RATE = 10.0
RATE_HELP = "Confirmation emails queued per second at most (the relay sees no burst)."


def _actor() -> str:
    """Who asserted consent, for `consent_evidence` (`import:cli:<login>`)."""
    try:
        return f"cli:{getpass.getuser()}"
    except (OSError, KeyError):
        return "cli"


def _count_rows(file: Path) -> int:
    """Lines after the header, for the progress bar. Reading the whole file first also
    turns an encoding problem into a clear error before anything is written."""
    try:
        with file.open(encoding="utf-8-sig", newline="") as text:
            return max(sum(1 for _ in text) - 1, 0)
    except UnicodeDecodeError:
        fail(f"{file} is not UTF-8 text: save it as CSV UTF-8 and try again")
    except OSError as exc:
        fail(f"cannot read {file}: {exc.strerror}")


def _progress(*, quiet: bool) -> Progress:
    return Progress(
        TextColumn("[progress.description]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeRemainingColumn(),
        console=err_console,
        disable=quiet,
        transient=True,
    )


@app.command("import")
def import_file(
    ctx: typer.Context,
    file: Path = typer.Argument(
        ...,
        help="CSV file (`,`, `;` or tab separated) with a header row, or one address a line.",
    ),
    newsletter: str = typer.Option(
        ..., "--newsletter", help="Newsletter slug for rows without a `newsletter` column."
    ),
    column_map: list[str] = typer.Option(
        [],
        "--map",
        help=f"COLUMN=FIELD: read the file's COLUMN as FIELD ({', '.join(FIELDS)}); "
        "COLUMN= ignores it. Repeat for several.",
    ),
    send_confirmations: bool = typer.Option(
        False,
        "--send-confirmations",
        help="Afterwards, email the double opt-in link to every subscription of --newsletter "
        "still waiting for confirmation (as `confirm-pending`).",
    ),
    assert_consent: bool = typer.Option(
        False,
        "--assert-consent",
        help="You hold every person's consent: rows without a status (or another tool's "
        "subscribed, active, enabled) import confirmed, with you as the evidence.",
    ),
    rate: float = typer.Option(DEFAULT_RATE, "--rate", min=0.1, max=10_000, help=RATE_HELP),
    as_json: bool = typer.Option(False, "--json", help="Print the report as JSON."),
) -> None:
    """Import subscribers from CSV (columns: email, name, tier, labels, newsletter, status,
    created_at; also the column names of Mailchimp, Substack, Ghost and listmonk exports, such
    as `Email Address`, `First Name`, `Last Name`; other columns become custom fields, as
    does listmonk's `attributes` JSON, except other tools' bookkeeping columns, which are
    ignored and listed). Safe
    to repeat: the second run changes nothing. Importing `confirmed` asserts consent on your
    behalf; other rows wait for the person to confirm, and only --send-confirmations (or
    `confirm-pending`) emails them. Exit code 1 when any row failed."""
    try:
        mapping = parse_column_map(column_map)
    except InvalidInput as exc:
        fail(f"--map: {exc.detail}", code=2)
    total = _count_rows(file)
    progress = _progress(quiet=as_json)
    task = progress.add_task("Importing", total=total)

    async def go() -> ImportReport:
        async with container_for(ctx) as container:
            with progress, file.open(encoding="utf-8-sig", newline="") as lines:
                return await container.importer.import_csv(
                    lines,
                    newsletter_slug=newsletter,
                    actor=_actor(),
                    on_progress=lambda rows: progress.update(task, completed=rows),
                    column_map=mapping,
                    assert_consent=assert_consent,
                )

    report = run(go)
    asked = _ask_to_confirm(ctx, newsletter, rate, quiet=as_json) if send_confirmations else None
    if as_json:
        print(json.dumps({**dataclasses.asdict(report), "confirmations_queued": asked}, indent=2))
    else:
        _print_report(report)
        if asked is not None:
            out_console.print(f"Queued {asked} confirmation email(s).")
    raise typer.Exit(1 if report.failed_rows else 0)


def _ask_to_confirm(ctx: typer.Context, newsletter: str, rate: float, *, quiet: bool) -> int:
    progress = _progress(quiet=quiet)
    task = progress.add_task("Asking to confirm", total=None)

    async def go() -> int:
        async with container_for(ctx) as container:
            with progress:
                return await container.pending_confirmations.ask(
                    newsletter,
                    rate_per_second=rate,
                    on_progress=lambda queued: progress.update(task, completed=queued),
                )

    return run(go)


@app.command("confirm-pending")
def confirm_pending(
    ctx: typer.Context,
    newsletter: str = typer.Option(..., "--newsletter", help="The newsletter's slug."),
    rate: float = typer.Option(DEFAULT_RATE, "--rate", min=0.1, max=10_000, help=RATE_HELP),
    as_json: bool = typer.Option(False, "--json", help="Print the count as JSON."),
) -> None:
    """Email the double opt-in link to every subscription of the newsletter still waiting for
    its person's confirmation (suppressed addresses excepted), through the queue at --rate a
    second. Running it again sends again, with a new link; earlier links stay valid."""
    asked = _ask_to_confirm(ctx, newsletter, rate, quiet=as_json)
    if as_json:
        print(json.dumps({"confirmations_queued": asked}))
    else:
        out_console.print(f"Queued {asked} confirmation email(s) for {newsletter}.")


def _print_report(report: ImportReport) -> None:
    summary = Table("rows", "created", "updated", "unchanged", "suppressed", "skipped", "failed")
    summary.add_row(
        *(
            str(count)
            for count in (
                report.total_rows,
                report.created,
                report.updated,
                report.unchanged,
                report.suppressed,
                report.skipped,
                report.failed_rows,
            )
        )
    )
    out_console.print(summary)
    out_console.print(
        f"{report.mailable} row(s) mailable now; {report.awaiting_confirmation} wait for the "
        "person to confirm"
        + (
            " (send them the link with --send-confirmations or `tidings subscribers "
            "confirm-pending`)."
            if report.awaiting_confirmation
            else "."
        )
    )
    if report.attribute_columns:
        out_console.print(
            f"Custom fields from column(s): {', '.join(report.attribute_columns)} "
            "(--map COLUMN= ignores one)."
        )
    if report.ignored_columns:
        out_console.print(
            f"Ignored column(s): {', '.join(report.ignored_columns)} "
            "(--map COLUMN=FIELD reads one as a field)."
        )
    if report.suppressed:
        out_console.print(
            f"{report.suppressed} row(s) of suppressed addresses (or marked bounced, complained "
            "or blocked by the source, now suppressed) will not be mailed."
        )
    if report.kept_unsubscribed:
        out_console.print(
            f"{report.kept_unsubscribed} row(s) asked for a subscription that the person had "
            "unsubscribed from; they stay unsubscribed."
        )
    for change in report.label_changes:
        out_console.print(
            f"label {change.written!r} → {change.kept!r} ({change.rows} row(s))", markup=False
        )
    _print_problems(report.warnings, report.warned_rows, "Values skipped (the rows imported)")
    _print_problems(report.errors, report.failed_rows, "Rows not imported")


def _print_problems(problems: list[RowError], rows: int, title: str) -> None:
    if not problems:
        return
    table = Table("line", "column", "value", "problem", title=title)
    for problem in problems[:ERRORS_SHOWN]:
        # Text, not markup: cells come from the file and may hold "[…]".
        table.add_row(
            str(problem.line),
            Text(problem.column or problem.field),
            Text("" if problem.value is None else repr(problem.value)),
            Text(problem.message),
        )
    out_console.print(table)
    hidden = rows - min(len(problems), ERRORS_SHOWN)
    if hidden > 0:
        out_console.print(f"… and more on {hidden} other row(s); --json lists them.")


@app.command("export")
def export_file(
    ctx: typer.Context,
    newsletter: str | None = typer.Option(None, "--newsletter", help="Only this newsletter."),
    state: SubscriptionState | None = typer.Option(None, "--state", help="Only this state."),
    tier: Tier | None = typer.Option(None, "--tier", help="Only subscribers on this tier."),
    label: str | None = typer.Option(None, "--label", help="Only subscribers with this label."),
    out: Path | None = typer.Option(None, "--out", "-o", help="Write here instead of stdout."),
) -> None:
    """Export the audience as CSV, one row per subscription, in the columns `import`
    reads. Cells a spreadsheet would run as a formula are prefixed with an apostrophe."""

    filters = {
        "newsletter": newsletter,
        "state": state.value if state else None,
        "tier": tier.value if tier else None,
        "label": label,
    }

    async def go(sink: TextIO) -> int:
        async with container_for(ctx) as container:
            rows = await container.importer.export_csv(sink, **filters)
            actor = Actor.command_line(getpass.getuser())
            await container.audit.record_entry(actor, export_entry(rows, **filters))
            return rows

    if out is None:
        rows = run(lambda: go(sys.stdout))
    else:
        # Written beside the target and renamed at the end: a failed export leaves no
        # half-written file that looks complete.
        descriptor, partial = tempfile.mkstemp(dir=out.parent, prefix=f".{out.name}.")
        try:
            with os.fdopen(descriptor, "w", encoding="utf-8", newline="") as sink:
                rows = run(lambda: go(sink))
            Path(partial).replace(out)
        finally:
            Path(partial).unlink(missing_ok=True)
    # The count goes beside the CSV, never into it.
    (err_console if out is None else out_console).print(f"Exported {rows} row(s).")


@app.command("show")
def show(
    ctx: typer.Context,
    email: str = typer.Argument(..., help="The subscriber's address."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """Show one subscriber: subscriptions, suppression, and their history — bounces,
    complaints and what was decided about them (AUD-13), suppressions and lifts — and their
    activity: opens and clicks (per-person tracking, with their consent) among their bounces,
    complaints and unsubscribes, newest first."""

    async def go() -> tuple[SubscriberView, list[dict[str, Any]], list[ActivityEntry]]:
        async with container_for(ctx) as container:
            view = await container.subscribers.find(email)
            subscriber_id = view.subscriber.id
            history = await container.subscribers.history(subscriber_id)
            return view, history, await container.activity.of(subscriber_id)

    view, history, activity = run(go)
    if as_json:
        from tidings.api.admin.subscribers import SubscriberPublic  # FastAPI: this command only

        shown = SubscriberPublic.of(view).model_dump(mode="json")
        print(
            json.dumps({**shown, "history": history, "activity": [e.as_json() for e in activity]})
        )
        return
    row = view.subscriber
    out_console.print(
        f"{row.email} (id {row.id}, {row.tier})" + (" — suppressed" if view.suppressed else ""),
        markup=False,
    )
    consent = row.tracking_consent_at
    out_console.print(
        "Open and click tracking: "
        + (
            f"agreed {consent.isoformat()} ({row.tracking_consent_source})"
            if consent
            else "not agreed"
        ),
        markup=False,
    )
    subscriptions = Table("newsletter", "state", "confirmed", "unsubscribed")
    for item in view.subscriptions:
        subscriptions.add_row(
            item.newsletter,
            item.state.value,
            str(item.confirmed_at or "—"),
            str(item.unsubscribed_at or "—"),
        )
    out_console.print(subscriptions)
    events = Table("when", "kind", "what", "decision", "source", "code")
    for entry in history:
        what = entry.get("event") or entry.get("action")
        decision = entry.get("decision") or entry.get("reason")
        events.add_row(
            entry["created_at"],
            entry["kind"],
            str(what),
            str(decision),
            str(entry.get("source") or entry.get("actor") or ""),
            str(entry.get("code") or ""),
        )
    out_console.print(events)
    timeline = Table("when", "what", "campaign", "link or detail", "verdict")
    for line in activity:
        timeline.add_row(
            line.at.isoformat(),
            line.kind,
            line.campaign,
            line.url or line.detail or "",
            line.verdict or "",
        )
    out_console.print(timeline)


app.command("bulk")(bulk)
app.command("subscribe")(subscribe)
