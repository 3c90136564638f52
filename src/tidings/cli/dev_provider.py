"""`tidings dev-provider`: a local Mailgun-compatible server that stores what it accepts and can
inject faults."""

from __future__ import annotations

import asyncio
from pathlib import Path

import typer

from tidings.cli.context import cannot_listen, err_console, fail, wait_for_stop_signal

RATE_HELP = "Fraction of requests (0 to 1) that get it."


def dev_provider(
    host: str = typer.Option("127.0.0.1", "--host", help="Listen address."),
    port: int = typer.Option(8026, "--port", help="Listen port (0 picks a free one)."),
    api_key: str | None = typer.Option(
        None, "--api-key", help="Require HTTP basic auth `api:KEY`, as Mailgun does."
    ),
    store: Path | None = typer.Option(
        None,
        "--store",
        help="Append accepted batches and recipients to batches.jsonl and recipients.jsonl here.",
    ),
    fail_status: int | None = typer.Option(
        None, "--fail-status", min=400, max=599, help="Answer some requests with this status."
    ),
    fail_rate: float = typer.Option(1.0, "--fail-rate", min=0.0, max=1.0, help=RATE_HELP),
    fail_times: int | None = typer.Option(
        None, "--fail-times", min=1, help="Only the first N requests that draw it get it."
    ),
    retry_after: str | None = typer.Option(
        None, "--retry-after", help="Retry-After header of those answers, e.g. 30."
    ),
    drop_after_accept_rate: float = typer.Option(
        0.0,
        "--drop-after-accept-rate",
        min=0.0,
        max=1.0,
        help="Fraction of requests stored and then left unanswered (connection closed).",
    ),
    drop_before_accept_rate: float = typer.Option(
        0.0,
        "--drop-before-accept-rate",
        min=0.0,
        max=1.0,
        help="Fraction of requests left unanswered and not stored.",
    ),
    reject_rate: float = typer.Option(
        0.0,
        "--reject-rate",
        min=0.0,
        max=1.0,
        help="Fraction of requests accepted with some recipients rejected.",
    ),
    reject_fraction: float = typer.Option(
        0.5, "--reject-fraction", min=0.0, max=1.0, help="Share of recipients those reject."
    ),
    reject_status: int = typer.Option(
        550, "--reject-status", min=400, max=599, help="Status of each rejected recipient."
    ),
    slow: float = typer.Option(
        0.0, "--slow", min=0.0, help="Seconds to wait before accepting a request."
    ),
    slow_rate: float = typer.Option(1.0, "--slow-rate", min=0.0, max=1.0, help=RATE_HELP),
    seed: int | None = typer.Option(None, "--seed", help="Seed for choosing requests by rate."),
    events_url: str | None = typer.Option(
        None,
        "--events-url",
        help="Post signed Mailgun events for accepted recipients here, e.g. "
        "http://127.0.0.1:8000/api/events/mailgun: delivered for most, a hard bounce for "
        "local parts bounce-*, a soft bounce for softbounce-*, a complaint for complain-*.",
    ),
    events_signing_key: str | None = typer.Option(
        None,
        "--events-signing-key",
        envvar="TIDINGS_MAILGUN_WEBHOOK_SIGNING_KEY",
        help="Key the events are signed with (tidings' mailgun.webhook_signing_key).",
    ),
) -> None:
    """Run a local Mailgun-compatible batch provider for development, tests and benchmarks.

    It takes POST /v3/DOMAIN/messages and /v3/DOMAIN/messages.mime as Mailgun does, keeps
    every accepted recipient, and can misbehave. A request draws at most one fault, checked
    in this order: drop after accepting, drop before accepting, --fail-status, reject some
    recipients, slow. Recipients whose address contains +reject550 or +defer451 are always
    rejected with that status. Inspect and reprogram it under /_dev/ (messages, batches,
    faults, stats). Point the Mailgun provider at it with
    TIDINGS_MAILGUN_API_BASE_URL=http://127.0.0.1:8026 and any key and domain. With
    --events-url it posts signed Mailgun events back, as Mailgun's webhooks do.
    """
    # The server (uvicorn and Starlette) is imported when it runs, not with the command tree.
    from tidings.devservers.dev_faults import Fault
    from tidings.devservers.dev_server import DevProviderServer

    if store is not None:
        store.mkdir(parents=True, exist_ok=True)
    faults = []
    if drop_after_accept_rate > 0:
        faults.append(Fault(action="drop_after_accept", rate=drop_after_accept_rate))
    if drop_before_accept_rate > 0:
        faults.append(Fault(action="drop_before_accept", rate=drop_before_accept_rate))
    if fail_status is not None and fail_rate > 0:
        faults.append(
            Fault(
                action="status",
                status=fail_status,
                rate=fail_rate,
                times=fail_times,
                retry_after=retry_after,
            )
        )
    if reject_rate > 0:
        faults.append(
            Fault(
                action="reject",
                rate=reject_rate,
                reject_fraction=reject_fraction,
                reject_status=reject_status,
            )
        )
    if slow > 0 and slow_rate > 0:
        faults.append(Fault(action="accept", delay_seconds=slow, rate=slow_rate))
    server = DevProviderServer(
        host=host, port=port, api_key=api_key, store_dir=store, faults=faults, seed=seed
    )

    if events_url is not None and not events_signing_key:
        fail("--events-url needs --events-signing-key (or TIDINGS_MAILGUN_WEBHOOK_SIGNING_KEY)")

    async def go() -> None:
        if events_url is not None and events_signing_key:
            server.post_events_to(events_url, events_signing_key)
        try:
            await server.start()
        except OSError as exc:
            cannot_listen(host, port, exc, setting="--host and --port")
        err_console.print(
            f"Batch provider listening on {server.base_url}"
            + (f", storing to {store}" if store else "")
            + (f", posting events to {events_url}" if events_url else "")
            + " (Ctrl-C to stop)"
        )
        await wait_for_stop_signal()
        await server.stop()
        stats = server.stats
        err_console.print(
            f"Accepted {stats.get('accepted_recipients', 0)} recipient(s) "
            f"in {stats.get('accepted_requests', 0)} request(s)."
        )

    asyncio.run(go())
