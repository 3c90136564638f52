"""`tidings outbox list|show`: mail stored by the local capture provider."""

from __future__ import annotations

import json
import os
import sys
import tempfile
import webbrowser
from pathlib import Path

import typer
from rich.table import Table

from tidings.cli.context import container_for, err_console, fail, out_console, run
from tidings.delivery.mail_reading import ReadableMessage, read_message
from tidings.outbound.message_outcomes import MessageOutcome

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
    text: bool = typer.Option(False, "--text", help="Only the plain-text part."),
    html: bool = typer.Option(False, "--html", help="Only the HTML part."),
    links: bool = typer.Option(False, "--links", help="Only the links, one a line."),
    open_it: bool = typer.Option(
        False, "--open", help="Open the HTML part (else the text) in the web browser."
    ),
    raw: bool = typer.Option(False, "--raw", help="The message exactly as sent (RFC 5322)."),
) -> None:
    """Show one captured message: its headers, its text and its links, numbered (the
    confirmation link among them). One of --text, --html, --links, --open or --raw shows
    just that."""
    chosen = [
        flag
        for flag, on in (
            ("--text", text),
            ("--html", html),
            ("--links", links),
            ("--open", open_it),
            ("--raw", raw),
        )
        if on
    ]
    if len(chosen) > 1:
        fail(f"choose one of {', '.join(chosen)}", code=2)

    async def go() -> tuple[bytes, MessageOutcome | None]:
        async with container_for(ctx) as container:
            captured = await container.captured_mail.get(message_id)
            return captured.raw, await container.message_outcomes.of_message(captured.message_id)

    data, outcome = run(go)
    if raw:
        sys.stdout.buffer.write(data)
        sys.stdout.flush()
        return
    message = read_message(data)
    if text or html:
        body = message.text if text else message.html
        if body is None:
            fail(f"message {message_id} has no {'text' if text else 'HTML'} part")
        print(body, end="" if body.endswith("\n") else "\n")
    elif links:
        for link in message.links:
            print(link)
    elif open_it:
        _open_in_browser(message_id, message.html, message.text)
    else:
        _print_readable(message, outcome)


def outcome_line(outcome: MessageOutcome | None) -> str:
    """What was heard back about the message (PRV-6), one line."""
    if outcome is None:
        return "nothing reported (not a transactional message)"
    heard = []
    if outcome.delivered_at is not None:
        heard.append(f"delivered {outcome.delivered_at:%Y-%m-%d %H:%M:%S}")
    if outcome.bounced_at is not None:
        code = f" ({outcome.bounce_code})" if outcome.bounce_code else ""
        heard.append(f"{outcome.bounce_kind} bounce{code} {outcome.bounced_at:%Y-%m-%d %H:%M:%S}")
    if outcome.complained_at is not None:
        heard.append(f"complaint {outcome.complained_at:%Y-%m-%d %H:%M:%S}")
    return ", ".join(heard) or "nothing reported yet"


def _print_readable(message: ReadableMessage, outcome: MessageOutcome | None) -> None:
    for name, value in message.headers:
        print(f"{name}: {value}")
    print(f"Outcome: {outcome_line(outcome)}")
    print()
    print((message.text or "(no plain-text part; try --html or --open)").rstrip("\n"))
    if message.links:
        print()
        print("Links:")
        for number, link in enumerate(message.links, start=1):
            print(f"  [{number}] {link}")


def _open_in_browser(message_id: int, html: str | None, text: str | None) -> None:
    """Write the part to a private temporary file and hand its file:// URL to the browser."""
    body, suffix = (html, ".html") if html is not None else (text or "", ".txt")
    descriptor, name = tempfile.mkstemp(prefix=f"tidings-outbox-{message_id}-", suffix=suffix)
    with os.fdopen(descriptor, "w", encoding="utf-8") as file:
        file.write(body)
    url = Path(name).as_uri()
    if not webbrowser.open(url):
        fail(f"no web browser to open; the message is at {name}")
    err_console.print(f"Opened {url}")
