"""`tidings newsletters create|list`: the lists people subscribe to."""

from __future__ import annotations

import json

import typer
from rich.table import Table

from tidings.audience.newsletters import NewsletterFields
from tidings.cli.context import container_for, out_console, run
from tidings.cli.options import email_address, header_text

app = typer.Typer(help="Manage newsletters (lists).", no_args_is_help=True)


@app.command("create")
def create(
    ctx: typer.Context,
    slug: str = typer.Argument(..., help="URL name: lowercase letters, digits, dashes."),
    name: str = typer.Option(..., "--name", help="Display name.", callback=header_text),
    sender_name: str = typer.Option(
        ..., "--sender-name", help="From: display name.", callback=header_text
    ),
    sender_address: str = typer.Option(
        ..., "--sender-address", help="From: address.", callback=email_address
    ),
    reply_to: str | None = typer.Option(
        None, "--reply-to", help="Reply-To address.", callback=email_address
    ),
    description: str = typer.Option("", "--description", help="Shown on signup pages."),
    single_opt_in: bool = typer.Option(
        False, "--single-opt-in", help="Skip the confirmation email (not recommended)."
    ),
) -> None:
    """Create a newsletter (double opt-in unless --single-opt-in)."""

    async def go() -> None:
        async with container_for(ctx) as container:
            row = await container.newsletters.create(
                NewsletterFields(
                    slug=slug,
                    name=name,
                    sender_name=sender_name,
                    sender_address=sender_address,
                    reply_to=reply_to,
                    description=description,
                    double_opt_in=not single_opt_in,
                )
            )
        out_console.print(f"Created newsletter {row.slug} ({row.name}).")

    run(go)


@app.command("list")
def list_newsletters(
    ctx: typer.Context, as_json: bool = typer.Option(False, "--json", help="Print JSON.")
) -> None:
    """List newsletters."""

    async def go() -> None:
        async with container_for(ctx) as container:
            rows = await container.newsletters.list()
        if as_json:
            print(
                json.dumps(
                    [
                        {
                            "slug": r.slug,
                            "name": r.name,
                            "sender": r.sender_address,
                            "double_opt_in": r.double_opt_in,
                        }
                        for r in rows
                    ]
                )
            )
            return
        table = Table("slug", "name", "sender", "double opt-in")
        for r in rows:
            table.add_row(
                r.slug,
                r.name,
                f"{r.sender_name} <{r.sender_address}>",
                "yes" if r.double_opt_in else "no",
            )
        out_console.print(table)

    run(go)
