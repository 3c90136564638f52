"""`tidings webhooks create|list|update`: webhook endpoints (the admin API has the rest)."""

from __future__ import annotations

import getpass
import json
from typing import Any

import typer
from rich.table import Table

from tidings.access.audit import webhook_url_entry
from tidings.cli.context import container_for, err_console, out_console, run
from tidings.domain.audit import Actor
from tidings.outbound.webhooks import EndpointRow

app = typer.Typer(help="Manage webhook endpoints.", no_args_is_help=True)

IMPORTS_HELP = (
    "Receive the events a CSV import causes (one per imported row); --no-imports keeps an "
    "endpoint that wants only live sign-ups quiet during a big import."
)


def _public(row: EndpointRow) -> dict[str, Any]:
    return {
        "id": row.id,
        "url": row.url,
        "description": row.description,
        "event_types": row.event_types,
        "enabled": row.enabled,
        "disabled_reason": row.disabled_reason,
        "include_imports": row.include_imports,
    }


@app.command("create")
def create(
    ctx: typer.Context,
    url: str = typer.Argument(..., help="Where to POST events (http or https)."),
    event: list[str] = typer.Option(
        ["*"], "--event", "-e", help="An event type to receive (repeat); `*` for all."
    ),
    description: str = typer.Option("", "--description", help="What the endpoint is for."),
    imports: bool = typer.Option(True, "--imports/--no-imports", help=IMPORTS_HELP),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """Create an endpoint and print its signing secret. It is shown only this once."""

    async def go() -> None:
        async with container_for(ctx) as container:
            row = await container.webhooks.create_endpoint(
                url, event, description, include_imports=imports
            )
            actor = Actor.command_line(getpass.getuser())
            await container.audit.record_entry(actor, webhook_url_entry(row.id, row.url))
        if as_json:
            print(json.dumps({**_public(row), "secret": row.secret}))
            return
        print(row.secret)
        err_console.print(
            f"Created webhook endpoint {row.id}. Store the secret now: it cannot be shown again."
        )

    run(go)


@app.command("list")
def list_endpoints(
    ctx: typer.Context, as_json: bool = typer.Option(False, "--json", help="Print JSON.")
) -> None:
    """List endpoints (never their secrets)."""

    async def go() -> None:
        async with container_for(ctx) as container:
            rows = await container.webhooks.list_endpoints(after_id=None, limit=10_000)
        if as_json:
            print(json.dumps([_public(row) for row in rows], indent=2))
            return
        table = Table("id", "url", "events", "enabled", "imports")
        for row in rows:
            table.add_row(
                str(row.id),
                row.url,
                ", ".join(row.event_types),
                "yes" if row.enabled else f"no ({row.disabled_reason})",
                "yes" if row.include_imports else "no",
            )
        out_console.print(table)

    run(go)


@app.command("update")
def update(
    ctx: typer.Context,
    endpoint_id: int = typer.Argument(..., min=1, help="The endpoint's id."),
    imports: bool | None = typer.Option(None, "--imports/--no-imports", help=IMPORTS_HELP),
    enabled: bool | None = typer.Option(
        None, "--enable/--disable", help="Enable the endpoint, or stop sending to it."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """Change whether an endpoint receives import events, or enable/disable it."""

    async def go() -> None:
        async with container_for(ctx) as container:
            row = await container.webhooks.update_endpoint(
                endpoint_id, include_imports=imports, enabled=enabled
            )
        if as_json:
            print(json.dumps(_public(row)))
            return
        err_console.print(f"Updated webhook endpoint {row.id}.")

    run(go)
