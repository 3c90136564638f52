"""`tidings inbound`: the SMTP/LMTP receiver for bounces, complaints and unsubscribe mail
(PRV-6)."""

from __future__ import annotations

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


def inbound(
    ctx: typer.Context,
    host: str = typer.Option("127.0.0.1", "--host", help="Listen address."),
    port: int = typer.Option(2526, "--port", help="Listen port (0 picks a free one)."),
    lmtp: bool = typer.Option(
        False, "--lmtp", help="Speak LMTP (for Postfix `transport` lmtp:...), not SMTP."
    ),
) -> None:
    """Receive bounces, complaints and unsubscribe mail until SIGTERM or Ctrl-C.

    Point the MX (or the relay's bounce delivery) of inbound.bounce_address's domain here:
    bounces to the VERP return path (RFC 3464 DSNs and the non-standard formats flufl.bounce
    knows), RFC 5965 ARF complaint reports, and mail to email.unsubscribe_address (subject
    unsubscribe-TOKEN, as List-Unsubscribe's mailto writes it). Other recipients are refused.
    Mail it cannot read is kept for the operator (GET /api/admin/events?status=unparsed).
    """
    settings = state_of(ctx).settings(long_running=True)
    if settings.inbound.bounce_address is None and settings.email.unsubscribe_address is None:
        fail(
            "nothing to receive: set inbound.bounce_address (TIDINGS_INBOUND_BOUNCE_ADDRESS) "
            "and/or email.unsubscribe_address (TIDINGS_EMAIL_UNSUBSCRIBE_ADDRESS)",
            code=2,
        )
    from tidings.delivery.inbound_server import InboundServer  # aiosmtpd, only when it runs

    async def go() -> None:
        async with container_for(ctx) as container:
            mail = container.inbound_mail
            server = InboundServer(
                accepts=mail.accepts,
                deliver=mail.receive,
                host=host,
                port=port,
                lmtp=lmtp,
                max_bytes=mail.max_bytes,
            )
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
