"""`tidings media add|list|delete`: the media library (CMP-6) from the command line."""

from __future__ import annotations

import asyncio
import getpass
import json
from pathlib import Path
from typing import Any

import typer
from rich.table import Table

from tidings.bootstrap import Container
from tidings.campaigns.media import MediaRow
from tidings.cli.context import container_for, err_console, out_console, run
from tidings.domain.audit import Actor

app = typer.Typer(
    help="The media library: images for campaigns (PNG, JPEG, GIF, WebP), re-encoded and "
    "served from the public site.",
    no_args_is_help=True,
)


def _public(container: Container, row: MediaRow) -> dict[str, Any]:
    described = container.media.described(row)
    return {**described, "created_at": row.created_at.isoformat()}


@app.command("add")
def add(
    ctx: typer.Context,
    file: Path = typer.Argument(
        ..., exists=True, dir_okay=False, readable=True, help="The image: PNG, JPEG, GIF or WebP."
    ),
    alt: str = typer.Option(
        ..., "--alt", help="What the image shows, for readers who cannot see it (required)."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """Add an image: checked (size, pixels, no SVG, no HTML or script in it), re-encoded
    without its metadata at the email layout's width and twice it, and stored once however
    often it is added. Prints its address and what to paste into a campaign."""

    async def go() -> dict[str, Any]:
        async with container_for(ctx) as container:
            with file.open("rb") as handle:

                async def read(size: int) -> bytes:
                    return await asyncio.to_thread(handle.read, size)

                actor = Actor.command_line(getpass.getuser())
                added = await container.media.add(read, filename=file.name, alt=alt, actor=actor)
            return {**_public(container, added.media), "created": added.created}

    shown = run(go)
    if as_json:
        print(json.dumps(shown))
        return
    if not shown["created"]:
        err_console.print(f"The same file is already in the library as image {shown['id']}.")
    else:
        err_console.print(
            f"Added image {shown['id']}: {shown['width']}×{shown['height']} "
            f"({shown['format']}{', animated' if shown['frames'] > 1 else ''})."
        )
    print(shown["url"])
    print(f"Markdown: {shown['markdown']}")


@app.command("list")
def list_media(
    ctx: typer.Context,
    search: str = typer.Option("", "--search", "-s", help="Words in the file name or alt text."),
    limit: int = typer.Option(100, "--limit", min=1, max=10_000, help="At most this many."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """List the library, newest first."""

    async def go() -> list[dict[str, Any]]:
        async with container_for(ctx) as container:
            rows = await container.media.search(search=search, limit=limit)
            return [_public(container, row) for row in rows]

    rows = run(go)
    if as_json:
        print(json.dumps(rows, indent=2))
        return
    table = Table("id", "file", "alt", "size", "url")
    for row in rows:
        size = f"{row['width']}×{row['height']}" + (" animated" if row["frames"] > 1 else "")
        table.add_row(str(row["id"]), row["filename"], row["alt"], size, row["url"])
    out_console.print(table)


@app.command("delete")
def delete(
    ctx: typer.Context,
    media_id: int = typer.Argument(..., min=1, help="The image's id (`tidings media list`)."),
    force: bool = typer.Option(
        False, "--force", help="Delete even though campaigns link to it (they show it broken)."
    ),
) -> None:
    """Delete an image and its files. Refused while a campaign or a welcome email links to
    it (they are listed) unless --force."""

    async def go() -> list[str]:
        async with container_for(ctx) as container:
            actor = Actor.command_line(getpass.getuser())
            used = await container.media.delete(media_id, actor=actor, force=force)
            return [f"{usage.kind} {usage.id} ({usage.title})" for usage in used]

    used = run(go)
    err_console.print(f"Deleted image {media_id}.", markup=False)
    for place in used:
        err_console.print(f"It was still used by {place}.", markup=False)
