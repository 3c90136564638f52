"""`tidings keys create|list|revoke`: admin API keys."""

from __future__ import annotations

import getpass
import json

import typer
from rich.table import Table

from tidings.cli.context import container_for, err_console, out_console, run
from tidings.domain.audit import Actor
from tidings.domain.errors import InvalidInput
from tidings.domain.roles import parse_role

app = typer.Typer(help="Manage admin API keys.", no_args_is_help=True)


@app.command("create")
def create(
    ctx: typer.Context,
    name: str = typer.Argument(..., help="What the key is for, e.g. `ci-deploy`."),
    role: str = typer.Option(
        "owner", "--role", help="owner (everything), editor (audience, campaigns) or viewer."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """Create an admin API key and print it. It is shown only this once."""
    try:
        chosen = parse_role(role)
    except InvalidInput as exc:
        raise typer.BadParameter(exc.detail, param_hint="--role") from None

    async def go() -> None:
        async with container_for(ctx) as container:
            created = await container.api_keys.create(
                name, role=chosen, actor=Actor.command_line(getpass.getuser())
            )
        if as_json:
            print(
                json.dumps(
                    {
                        "id": created.key.id,
                        "name": created.key.name,
                        "role": created.key.role,
                        "key": created.token,
                    }
                )
            )
            return
        print(created.token)
        err_console.print(
            f"Created key {created.key.id} ({created.key.name}). Store it now: "
            "it cannot be shown again."
        )

    run(go)


@app.command("list")
def list_keys(
    ctx: typer.Context, as_json: bool = typer.Option(False, "--json", help="Print JSON.")
) -> None:
    """List API keys (ids and names; the keys themselves are never stored)."""

    async def go() -> None:
        async with container_for(ctx) as container:
            rows = await container.api_keys.list(limit=10_000)
        if as_json:
            print(
                json.dumps(
                    [
                        {
                            "id": row.id,
                            "name": row.name,
                            "role": row.role,
                            "parent_id": row.parent_id,
                            "created_at": row.created_at.isoformat(),
                            "last_used_at": row.last_used_at and row.last_used_at.isoformat(),
                            "revoked_at": row.revoked_at and row.revoked_at.isoformat(),
                        }
                        for row in rows
                    ],
                    indent=2,
                )
            )
            return
        table = Table("id", "name", "role", "created", "last used", "revoked")
        for row in rows:
            table.add_row(
                row.id,
                row.name,
                row.role,
                f"{row.created_at:%Y-%m-%d %H:%M}",
                (row.last_used_at and f"{row.last_used_at:%Y-%m-%d %H:%M}") or "never",
                (row.revoked_at and f"{row.revoked_at:%Y-%m-%d %H:%M}") or "",
            )
        out_console.print(table)

    run(go)


@app.command("revoke")
def revoke(ctx: typer.Context, key_id: str = typer.Argument(..., help="The key's id.")) -> None:
    """Revoke an API key, and every key created with it; requests using them get 401 from
    now on."""

    async def go() -> None:
        async with container_for(ctx) as container:
            revoked = await container.api_keys.revoke(
                key_id, actor=Actor.command_line(getpass.getuser())
            )
        others = f" and {revoked - 1} key(s) created with it" if revoked > 1 else ""
        out_console.print(f"Revoked key {key_id}{others}.")

    run(go)
