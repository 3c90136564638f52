"""`tidings outbox list|show`: mail stored by the local capture provider."""

from __future__ import annotations

import json
import sys

import typer
from rich.table import Table

from tidings.cli.context import container_for, out_console, run

app = typer.Typer(
    help="Read mail captured by the local provider (email.provider = capture).",
    no_args_is_help=True,
)


@app.command("list")
def list_messages(
    ctx: typer.Context,
    limit: int = typer.Option(20, "--limit", min=1, max=500, help="How many, newest first."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """List captured messages, newest first."""

    async def go() -> None:
        async with container_for(ctx) as container:
            messages = await container.captured_mail.list(limit=limit)
        if as_json:
            print(
                json.dumps(
                    [
                        {
                            "id": m.id,
                            "to": m.recipients,
                            "subject": m.subject,
                            "captured_at": m.captured_at.isoformat(),
                        }
                        for m in messages
                    ]
                )
            )
            return
        table = Table("id", "captured", "to", "subject")
        for m in messages:
            table.add_row(
                str(m.id), f"{m.captured_at:%Y-%m-%d %H:%M:%S}", ", ".join(m.recipients), m.subject
            )
        out_console.print(table)

    run(go)


@app.command("show")
def show(
    ctx: typer.Context,
    message_id: int = typer.Argument(..., help="The id from `tidings outbox list`."),
) -> None:
    """Print one captured message exactly as it would have been sent (RFC 5322)."""

    async def go() -> None:
        async with container_for(ctx) as container:
            message = await container.captured_mail.get(message_id)
        sys.stdout.buffer.write(message.raw)
        sys.stdout.flush()

    run(go)
