"""`tidings dev-smtp`: a local SMTP sink that stores what it receives and can inject faults."""

from __future__ import annotations

import asyncio
from pathlib import Path

import typer

from tidings.bootstrap import utcnow
from tidings.cli.context import cannot_listen, err_console, wait_for_stop_signal


def dev_smtp(
    host: str = typer.Option("127.0.0.1", "--host", help="Listen address."),
    port: int = typer.Option(2525, "--port", help="Listen port."),
    store: Path | None = typer.Option(
        None, "--store", help="Write each received message to this directory as a .eml file."
    ),
    delay: float = typer.Option(0.0, "--delay", help="Seconds to wait before each reply."),
    data_reply: str | None = typer.Option(
        None, "--data-reply", help='Answer every DATA with this reply, e.g. "451 4.3.0 later".'
    ),
    fail_every: int = typer.Option(
        0, "--fail-every", help="Answer every Nth DATA with 451 (0: never)."
    ),
    disconnect: bool = typer.Option(
        False, "--disconnect-during-data", help="Drop every connection mid-DATA."
    ),
    reports_to: str | None = typer.Option(
        None,
        "--reports-to",
        help="HOST:PORT of `tidings inbound`: mail back a DSN for recipients bounce-* (hard) "
        "and softbounce-* (soft), and an ARF complaint for complain-*, to each message's "
        "envelope sender.",
    ),
) -> None:
    """Run a local SMTP sink for development, tests and benchmarks.

    Recipients whose address contains +reject550 or +defer451 are refused at RCPT with that
    code, so per-recipient failures can be tried from any client. Point tidings at it with
    TIDINGS_EMAIL_PROVIDER=smtp TIDINGS_SMTP_HOST=127.0.0.1 TIDINGS_SMTP_PORT=2525
    TIDINGS_SMTP_SECURITY=none. With --reports-to it mails bounces and complaints back to
    `tidings inbound`, as a relay and a mailbox provider would.
    """
    # The sink (aiosmtpd) is imported when it runs, not with the command tree.
    from tidings.devservers.sink import Faults, SmtpSink

    if store is not None:
        store.mkdir(parents=True, exist_ok=True)
    if data_reply is not None and not (data_reply[:3].isdigit() and data_reply[:1] in "2345"):
        raise typer.BadParameter(
            "must start with a three-digit SMTP code", param_hint="--data-reply"
        )
    reporter = None
    if reports_to is not None:
        report_host, _, report_port = reports_to.rpartition(":")
        if not report_host or not report_port.isdigit():
            raise typer.BadParameter("must be HOST:PORT", param_hint="--reports-to")
        from tidings.devservers.dev_reports import ReportSender

        reporter = ReportSender(report_host, int(report_port))
    faults = Faults(
        delay_seconds=delay,
        data_reply=data_reply,
        fail_every_nth=fail_every,
        disconnect_during_data=disconnect,
    )

    async def go() -> None:
        sink = SmtpSink(
            clock=utcnow,
            host=host,
            port=port,
            faults=faults,
            store_dir=store,
            on_message=reporter.on_message if reporter is not None else None,
        )
        try:
            await sink.start()
        except OSError as exc:
            cannot_listen(host, port, exc, setting="--host and --port")
        err_console.print(
            f"SMTP sink listening on {host}:{sink.port}"
            + (f", storing to {store}" if store else "")
            + " (Ctrl-C to stop)"
        )
        await wait_for_stop_signal()
        await sink.stop()
        if reporter is not None:
            await reporter.drain()
        err_console.print(f"Received {len(sink.messages)} message(s).")

    asyncio.run(go())
