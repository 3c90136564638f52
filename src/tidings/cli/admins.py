"""`tidings admins create|list`: operators who sign in to the admin web UI at /admin."""

from __future__ import annotations

import json

import typer
from rich.table import Table

from tidings.cli.context import container_for, fail, out_console, run
from tidings.domain.errors import InvalidInput

app = typer.Typer(help="Manage admin UI accounts (sign-in at /admin).", no_args_is_help=True)


@app.command("create")
def create(
    ctx: typer.Context,
    email: str = typer.Argument(..., help="The operator's email: their sign-in name."),
) -> None:
    """Create an admin UI account. Prompts twice for the password (12 or more characters);
    it is stored only as an argon2id hash."""
    password = typer.prompt("Password", hide_input=True, confirmation_prompt=True)

    async def go() -> None:
        async with container_for(ctx) as container:
            try:
                admin = await container.admins.create(email, password)
            except InvalidInput as exc:
                fail(f"{exc.detail} ({exc.field})", code=2)
        out_console.print(f"Created admin {admin.email}; sign in at /admin.")

    run(go)


@app.command("list")
def list_admins(
    ctx: typer.Context, as_json: bool = typer.Option(False, "--json", help="Print JSON.")
) -> None:
    """List admin UI accounts and when each last signed in."""

    async def go() -> None:
        async with container_for(ctx) as container:
            rows = await container.admins.list()
        if as_json:
            print(
                json.dumps(
                    [
                        {
                            "email": row.email,
                            "created_at": row.created_at.isoformat(),
                            "last_sign_in_at": row.last_sign_in_at
                            and row.last_sign_in_at.isoformat(),
                        }
                        for row in rows
                    ]
                )
            )
            return
        table = Table("email", "created", "last sign-in")
        for row in rows:
            last = row.last_sign_in_at.isoformat(timespec="seconds") if row.last_sign_in_at else "-"
            table.add_row(row.email, row.created_at.isoformat(timespec="seconds"), last)
        out_console.print(table)

    run(go)
