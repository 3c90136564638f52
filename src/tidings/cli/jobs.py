"""`tidings jobs list|show|replay`: inspect the queue and replay dead jobs."""

from __future__ import annotations

import json

import typer
from rich.table import Table

from tidings.cli.context import container_for, out_console, run
from tidings.cli.outbox import outcome_line
from tidings.domain.jobs import JobStatus

app = typer.Typer(help="Inspect background jobs and replay dead ones.", no_args_is_help=True)


@app.command("list")
def list_jobs(
    ctx: typer.Context,
    status: JobStatus | None = typer.Option(None, "--status", help="Only jobs in this status."),
    kind: str | None = typer.Option(None, "--kind", help="Only jobs of this kind."),
    limit: int = typer.Option(50, "--limit", min=1, max=1000, help="How many, newest first."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """List jobs, newest first (`--status dead` shows what needs attention)."""

    async def go() -> None:
        async with container_for(ctx) as container:
            jobs = await container.queue.list_jobs(status=status, kind=kind, limit=limit)
        if as_json:
            print(
                json.dumps(
                    [
                        {
                            "id": j.id,
                            "kind": j.kind,
                            "status": j.status.value,
                            "attempts": j.attempts,
                            "last_error": j.last_error,
                            "run_at": j.run_at.isoformat(),
                        }
                        for j in jobs
                    ]
                )
            )
            return
        table = Table("id", "kind", "status", "attempts", "due", "last error")
        for j in jobs:
            table.add_row(
                str(j.id),
                j.kind,
                j.status.value,
                f"{j.attempts}/{j.max_attempts}",
                f"{j.run_at:%Y-%m-%d %H:%M:%S}",
                j.last_error or "",
            )
        out_console.print(table)

    run(go)


@app.command("show")
def show(ctx: typer.Context, job_id: int = typer.Argument(..., help="The job's id.")) -> None:
    """Show one job and its attempt history (no payload: it can hold addresses)."""

    async def go() -> None:
        async with container_for(ctx) as container:
            job, attempts = await container.queue.get(job_id)
            outcome = await container.message_outcomes.of_job(job_id)
        out_console.print(
            f"job {job.id} [{job.kind}] {job.status.value}, "
            f"attempts {job.attempts}/{job.max_attempts}, due {job.run_at:%c}"
        )
        if outcome is not None:
            out_console.print(f"  outcome: {outcome_line(outcome)}")
        for attempt in attempts:
            out_console.print(
                f"  #{attempt['attempt']} {attempt['finished_at']:%c} "
                f"{attempt['outcome']} {attempt['error'] or ''}"
            )

    run(go)


@app.command("replay")
def replay(ctx: typer.Context, job_id: int = typer.Argument(..., help="The job's id.")) -> None:
    """Run a dead (or finished) job again, with a fresh attempt budget."""

    async def go() -> None:
        async with container_for(ctx) as container:
            job = await container.queue.replay(job_id)
        out_console.print(f"Job {job.id} is due again.")

    run(go)
