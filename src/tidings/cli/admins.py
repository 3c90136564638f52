"""`tidings admins ...`: operators who sign in to the admin web UI at /admin (create, list,
set-password, set-role, disable, enable, delete, unlock, reset-two-factor). Each change is in
the audit log as `cli:<login>`."""

from __future__ import annotations

import getpass
import json
from collections.abc import Awaitable, Callable

import typer
from rich.table import Table

from tidings.access.admins import AdminAccounts
from tidings.cli.context import container_for, fail, out_console, run
from tidings.domain.audit import Actor
from tidings.domain.errors import InvalidInput
from tidings.domain.roles import Role, parse_role

app = typer.Typer(help="Manage admin UI accounts (sign-in at /admin).", no_args_is_help=True)

EMAIL = typer.Argument(..., help="The operator's email: their sign-in name.")


def _actor() -> Actor:
    return Actor.command_line(getpass.getuser())


def _role(value: str) -> Role:
    try:
        return parse_role(value)
    except InvalidInput as exc:
        raise typer.BadParameter(exc.detail, param_hint="--role") from None


@app.command("create")
def create(
    ctx: typer.Context,
    email: str = EMAIL,
    role: str = typer.Option(
        "owner", "--role", help="owner (everything), editor (audience, campaigns) or viewer."
    ),
) -> None:
    """Create an admin UI account. Prompts twice for the password (12 or more characters,
    not a common or easily guessed one); it is stored only as an argon2id hash."""
    chosen = _role(role)
    password = typer.prompt("Password", hide_input=True, confirmation_prompt=True)

    async def go() -> None:
        async with container_for(ctx) as container:
            try:
                admin = await container.admins.create(email, password, role=chosen, actor=_actor())
            except InvalidInput as exc:
                fail(f"{exc.detail} ({exc.field})", code=2)
        out_console.print(f"Created {chosen} {admin.email}; sign in at /admin.")

    run(go)


@app.command("list")
def list_admins(
    ctx: typer.Context, as_json: bool = typer.Option(False, "--json", help="Print JSON.")
) -> None:
    """List admin UI accounts: role, two-factor, whether disabled, when each last signed in."""

    async def go() -> None:
        async with container_for(ctx) as container:
            rows = await container.admins.list()
        if as_json:
            print(
                json.dumps(
                    [
                        {
                            "id": row.id,
                            "email": row.email,
                            "role": row.role,
                            "disabled": row.disabled_at is not None,
                            "two_factor": row.totp_enabled_at is not None,
                            "created_at": row.created_at.isoformat(),
                            "last_sign_in_at": row.last_sign_in_at
                            and row.last_sign_in_at.isoformat(),
                        }
                        for row in rows
                    ]
                )
            )
            return
        table = Table("id", "email", "role", "two-factor", "state", "created", "last sign-in")
        for row in rows:
            last = row.last_sign_in_at.isoformat(timespec="seconds") if row.last_sign_in_at else "-"
            table.add_row(
                str(row.id),
                row.email,
                row.role,
                "on" if row.totp_enabled_at else "off",
                "disabled" if row.disabled_at else "active",
                row.created_at.isoformat(timespec="seconds"),
                last,
            )
        out_console.print(table)

    run(go)


def _on_account(
    ctx: typer.Context,
    email: str,
    change: Callable[[AdminAccounts, int], Awaitable[object]],
    done: str,
) -> None:
    async def go() -> None:
        async with container_for(ctx) as container:
            admin = await container.admins.find(email)
            await change(container.admins, admin.id)
        out_console.print(done.format(email=email.strip().lower()))

    run(go)


@app.command("set-password")
def set_password(ctx: typer.Context, email: str = EMAIL) -> None:
    """Set an operator's password (prompted twice); every session of theirs ends and their
    failed sign-ins are forgotten."""
    password = typer.prompt("New password", hide_input=True, confirmation_prompt=True)

    async def change(admins: AdminAccounts, admin_id: int) -> None:
        try:
            await admins.set_password(admin_id, password, actor=_actor())
        except InvalidInput as exc:
            fail(f"{exc.detail} ({exc.field})", code=2)

    _on_account(ctx, email, change, "Set the password of {email}; their sessions ended.")


@app.command("set-role")
def set_role(
    ctx: typer.Context,
    email: str = EMAIL,
    role: str = typer.Argument(..., help="owner, editor or viewer."),
) -> None:
    """Change an operator's role. The last enabled owner cannot be demoted."""
    chosen = _role(role)

    async def change(admins: AdminAccounts, admin_id: int) -> None:
        await admins.set_role(admin_id, chosen, actor=_actor())

    _on_account(ctx, email, change, f"{{email}} is now {chosen}.")


@app.command("disable")
def disable(ctx: typer.Context, email: str = EMAIL) -> None:
    """Stop an operator signing in; their sessions end at once. The last enabled owner
    cannot be disabled."""

    async def change(admins: AdminAccounts, admin_id: int) -> None:
        await admins.disable(admin_id, actor=_actor())

    _on_account(ctx, email, change, "Disabled {email}; their sessions ended.")


@app.command("enable")
def enable(ctx: typer.Context, email: str = EMAIL) -> None:
    """Let a disabled operator sign in again."""

    async def change(admins: AdminAccounts, admin_id: int) -> None:
        await admins.enable(admin_id, actor=_actor())

    _on_account(ctx, email, change, "Enabled {email}.")


@app.command("delete")
def delete(
    ctx: typer.Context,
    email: str = EMAIL,
    yes: bool = typer.Option(False, "--yes", help="Do not ask for confirmation."),
) -> None:
    """Delete an operator's account and sessions (the audit log keeps their id). The last
    enabled owner cannot be deleted."""
    if not yes:
        typer.confirm(f"Delete the admin account {email}?", abort=True)

    async def change(admins: AdminAccounts, admin_id: int) -> None:
        await admins.delete(admin_id, actor=_actor())

    _on_account(ctx, email, change, "Deleted {email}.")


@app.command("unlock")
def unlock(ctx: typer.Context, email: str = EMAIL) -> None:
    """Forget an account's failed sign-ins, from every client, so that it can sign in at once
    (when the owner is refused on a new device during an attack)."""

    async def change(admins: AdminAccounts, admin_id: int) -> None:
        await admins.unlock(admin_id, actor=_actor())

    _on_account(ctx, email, change, "Unlocked {email}: its failed sign-ins are forgotten.")


@app.command("reset-two-factor")
def reset_two_factor(ctx: typer.Context, email: str = EMAIL) -> None:
    """Turn off an operator's two-factor sign-in (a lost phone and lost recovery codes); they
    sign in with their password and set it up again."""

    async def change(admins: AdminAccounts, admin_id: int) -> None:
        await admins.turn_off_two_factor(admin_id, actor=_actor())

    _on_account(ctx, email, change, "Turned off two-factor sign-in for {email}.")
