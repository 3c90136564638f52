"""`tidings subscribers import|export`: the audience in and out as CSV (AUD-9).

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
from typing import TextIO

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn
from rich.table import Table

from tidings.audience.importer import ImportReport
from tidings.cli.context import container_for, err_console, fail, out_console, run
from tidings.domain.audience import Tier
from tidings.domain.consent import SubscriptionState

app = typer.Typer(help="Import and export subscribers as CSV.", no_args_is_help=True)
ERRORS_SHOWN = 50


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


@app.command("import")
def import_file(
    ctx: typer.Context,
    file: Path = typer.Argument(..., help="CSV file with a header row; only `email` is required."),
    newsletter: str = typer.Option(
        ..., "--newsletter", help="Newsletter slug for rows without a `newsletter` column."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print the report as JSON."),
) -> None:
    """Import subscribers from CSV (columns: email, name, tier, labels, newsletter, status,
    created_at). Safe to repeat: the second run changes nothing. Importing `confirmed` asserts
    consent on your behalf; no confirmation emails are sent. Exit code 1 when any row failed."""
    total = _count_rows(file)
    progress = Progress(
        TextColumn("[progress.description]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeRemainingColumn(),
        console=err_console,
        disable=as_json,
        transient=True,
    )
    task = progress.add_task("Importing", total=total)

    async def go() -> ImportReport:
        async with container_for(ctx) as container:
            with progress, file.open(encoding="utf-8-sig", newline="") as lines:
                return await container.importer.import_csv(
                    lines,
                    newsletter_slug=newsletter,
                    actor=_actor(),
                    on_progress=lambda rows: progress.update(task, completed=rows),
                )

    report = run(go)
    if as_json:
        print(json.dumps(dataclasses.asdict(report), indent=2))
    else:
        _print_report(report)
    raise typer.Exit(1 if report.failed_rows else 0)


def _print_report(report: ImportReport) -> None:
    summary = Table("rows", "created", "updated", "unchanged", "suppressed", "failed")
    summary.add_row(
        *(
            str(count)
            for count in (
                report.total_rows,
                report.created,
                report.updated,
                report.unchanged,
                report.suppressed,
                report.failed_rows,
            )
        )
    )
    out_console.print(summary)
    if report.suppressed:
        out_console.print(
            f"{report.suppressed} suppressed address(es) were stored but will not be mailed."
        )
    if report.kept_unsubscribed:
        out_console.print(
            f"{report.kept_unsubscribed} row(s) asked for a subscription that the person had "
            "unsubscribed from; they stay unsubscribed."
        )
    if not report.errors:
        return
    errors = Table("line", "field", "problem", title="Rows not imported")
    for error in report.errors[:ERRORS_SHOWN]:
        errors.add_row(str(error.line), error.field, error.message)
    out_console.print(errors)
    hidden = report.failed_rows - min(len(report.errors), ERRORS_SHOWN)
    if hidden > 0:
        out_console.print(f"… and {hidden} more failed row(s); --json lists them.")


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

    async def go(sink: TextIO) -> int:
        async with container_for(ctx) as container:
            return await container.importer.export_csv(
                sink,
                newsletter=newsletter,
                state=state.value if state else None,
                tier=tier.value if tier else None,
                label=label,
            )

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
