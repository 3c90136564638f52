"""`tidings inbound`: the SMTP/LMTP receiver for bounces, complaints and unsubscribe mail
(PRV-6)."""

from __future__ import annotations

import asyncio
import json
from typing import TYPE_CHECKING

import typer

from tidings.cli.context import (
    cannot_listen,
    container_for,
    err_console,
    fail,
    run,
    state_of,
    wait_for_stop_signal,
)
from tidings.observability.logging import get_logger

if TYPE_CHECKING:
    from tidings.bootstrap import Container

log = get_logger("tidings.inbound")
app = typer.Typer(invoke_without_command=True)


@app.callback()
def inbound(
    ctx: typer.Context,
    host: str = typer.Option("127.0.0.1", "--host", help="Listen address."),
    port: int = typer.Option(2526, "--port", help="Listen port (0 picks a free one)."),
    lmtp: bool = typer.Option(
        False, "--lmtp", help="Speak LMTP (for Postfix `transport` lmtp:...), not SMTP."
    ),
    imap: bool = typer.Option(
        False,
        "--imap",
        help="Poll the IMAP mailbox of inbound.imap_* instead of listening (every "
        "inbound.imap_poll_seconds; each message deleted there once recorded).",
    ),
    once: bool = typer.Option(
        False, "--once", help="With --imap: poll once, print the outcomes as JSON, and exit."
    ),
) -> None:
    """Receive bounces, complaints and unsubscribe mail until SIGTERM or Ctrl-C.

    Point the MX (or the relay's bounce delivery) of inbound.bounce_address's domain here:
    bounces to the VERP return path (RFC 3464 DSNs and the non-standard formats flufl.bounce
    knows), RFC 5965 ARF complaint reports, and mail to email.unsubscribe_address (subject
    unsubscribe-TOKEN, as List-Unsubscribe's mailto writes it). Other recipients are refused.
    Mail it cannot read is kept for the operator (GET /api/admin/events?status=unparsed).
    With --imap, the same mail is read from a bounce mailbox instead (inbound.imap_host...).

    Only a report naming a VERP address whose MAC verifies acts on anyone; the rest is kept as
    unverified: review it with `tidings inbound list`, then `apply` or `discard` it.
    """
    if ctx.invoked_subcommand is not None:
        return  # list, apply or discard (cli/inbound_review.py)
    settings = state_of(ctx).settings()  # at warning and up, unless --log-level
    if settings.inbound.bounce_address is None and settings.email.unsubscribe_address is None:
        fail(
            "nothing to receive: set inbound.bounce_address (TIDINGS_INBOUND_BOUNCE_ADDRESS) "
            "and/or email.unsubscribe_address (TIDINGS_EMAIL_UNSUBSCRIBE_ADDRESS)",
            code=2,
        )
    if once and not imap:
        fail("--once goes with --imap", code=2)
    if imap:
        _poll(ctx, once=once)
        return

    async def go() -> None:
        async with container_for(ctx) as container:
            server = container.inbound_server(host=host, port=port, lmtp=lmtp)
            try:
                await server.start()
            except OSError as exc:
                cannot_listen(host, port, exc, setting="--host and --port")
            err_console.print(
                f"Receiving {'LMTP' if lmtp else 'SMTP'} on {host}:{server.port} (Ctrl-C to stop)"
            )
            await wait_for_stop_signal()
            await server.stop()

    run(go)


def _poll(ctx: typer.Context, *, once: bool) -> None:
    """Drain the bounce mailbox now, then every inbound.imap_poll_seconds until stopped."""
    settings = state_of(ctx).settings(long_running=not once)
    if settings.inbound.imap_host is None:
        fail(
            "no mailbox to poll: set inbound.imap_host, inbound.imap_user and "
            "inbound.imap_password (TIDINGS_INBOUND_IMAP_HOST, ...)",
            code=2,
        )
    from tidings.delivery.imap_mailbox import MailboxUnavailable, open_mailbox

    async def drain(container: Container) -> dict[str, int]:
        account = container.bounce_mailbox
        assert account is not None
        async with open_mailbox(account) as mailbox:
            return await container.inbound_mail.drain(mailbox)

    async def go() -> None:
        async with container_for(ctx) as container:
            if once:
                print(json.dumps(await drain(container), sort_keys=True))
                return
            stop = asyncio.create_task(wait_for_stop_signal())
            err_console.print(
                f"Polling {settings.inbound.imap_host} every "
                f"{settings.inbound.imap_poll_seconds:g} s (Ctrl-C to stop)"
            )
            while not stop.done():
                try:
                    counted = await drain(container)
                except MailboxUnavailable as exc:  # the next poll tries again
                    log.warning("inbound.imap_unavailable", reason=exc.detail)
                else:
                    if counted:
                        log.info("inbound.imap_polled", **counted)
                await asyncio.wait({stop}, timeout=settings.inbound.imap_poll_seconds)

    run(go)
