"""`tidings audit list`: the audit log, newest first: who did what, when, from where."""

from __future__ import annotations

import json

import typer
from rich.table import Table

from tidings.cli.context import container_for, out_console, run

app = typer.Typer(help="Read the audit log (UI-2).", no_args_is_help=True)


@app.command("list")
def list_entries(
    ctx: typer.Context,
    action: str = typer.Option(
        "", "--action", help="Only actions starting with this, e.g. `admin.` or `key.created`."
    ),
    actor: str = typer.Option(
        "", "--actor", help="Only this actor: `admin:ID`, `key:ID`, `cli:LOGIN` or `anonymous`."
    ),
    limit: int = typer.Option(100, "--limit", min=1, max=10_000, help="At most this many."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """List audit log entries, newest first: sign-ins, failed and slowed sign-ins (repeats
    counted in one entry an hour), operator and API key changes, sends, cancels, deletes,
    imports and exports."""

    async def go() -> None:
        async with container_for(ctx) as container:
            rows = await container.audit.list(
                action=action or None, actor=actor or None, limit=limit
            )
        if as_json:
            entries = [
                {
                    "id": row.id,
                    "occurred_at": row.occurred_at.isoformat(),
                    "actor": row.actor,
                    "action": row.action,
                    "target": row.target,
                    "client_ip": row.client_ip,
                    "detail": row.detail,
                    "occurrences": row.occurrences,
                    "last_occurred_at": row.last_occurred_at.isoformat()
                    if row.last_occurred_at
                    else None,
                }
                for row in rows
            ]
            print(json.dumps(entries, indent=2))
            return
        table = Table("when", "actor", "action", "target", "from", "times")
        for row in rows:
            table.add_row(
                row.occurred_at.isoformat(timespec="seconds"),
                row.actor,
                row.action,
                row.target or "",
                row.client_ip or "",
                str(row.occurrences),
            )
        out_console.print(table)

    run(go)
