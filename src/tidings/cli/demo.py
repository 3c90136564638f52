"""`tidings demo`: start a real server on a fresh SQLite file and walk through it, ending with
a campaign sent to a local SMTP sink (`demo_campaign`)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import typer

from tidings.cli.context import fail, free_port, out_console
from tidings.cli.demo_campaign import (
    SUBSCRIBERS,
    create_newsletter,
    import_subscribers,
    send_a_campaign,
)
from tidings.cli.demo_engagement import MACHINE_WINDOW_SECONDS, read_and_click
from tidings.cli.demo_hearing import hear_back
from tidings.cli.demo_signup import sign_up_through_the_form


def _tidings(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(  # noqa: S603 - our own executable with fixed arguments
        [sys.executable, "-m", "tidings", *args],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )


def _wait_until_up(base: str, server: subprocess.Popen[bytes], deadline_s: float) -> None:
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        if server.poll() is not None:
            fail(f"the server exited early with code {server.returncode}")
        try:
            if httpx.get(f"{base}/healthz", timeout=1).status_code == 200:
                return
        except httpx.TransportError:
            time.sleep(0.1)
    fail("the server did not answer /healthz in time")


def demo(
    keep: bool = typer.Option(False, "--keep", help="Leave the server running until Ctrl-C."),
    subscribers: int = typer.Option(
        SUBSCRIBERS,
        "--subscribers",
        min=10,
        max=1_000_000,
        help="Generated subscribers to import and send the campaign to (one in five paid).",
    ),
    directory: Path | None = typer.Option(
        None,
        "--dir",
        help="Put the database, the log and the received mail here (an empty or new "
        "directory; default: a fresh temporary one).",
    ),
) -> None:
    """Start `tidings serve` on a fresh SQLite file and exercise it end to end: an API key, a
    newsletter, a subscriber who signs up through the public form and confirms through the
    emailed link, 10,000 generated subscribers (--subscribers) imported from CSV, then a campaign
    to all sent
    through the workers to a local SMTP sink and followed, every message checked; then the
    sink mails back a bounce and a complaint, `tidings inbound` reads them, both subscribers are
    suppressed and the campaign's statistics show it."""
    if directory is not None and directory.exists() and any(directory.iterdir()):
        fail(f"--dir {directory}: not empty (the demo starts from nothing)")
    started = time.monotonic()
    workdir = directory or Path(tempfile.mkdtemp(prefix="tidings-demo-"))
    workdir.mkdir(parents=True, exist_ok=True)
    port = free_port()
    while port == 8000:  # site.public_url's default: real mail is refused under it
        port = free_port()
    base = f"http://127.0.0.1:{port}"
    smtp_port = free_port()
    inbound_port = free_port()
    mail_dir = workdir / "mail"
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("TIDINGS_")},
        "TIDINGS_DATABASE_URL": f"sqlite:///{workdir / 'demo.db'}",
        "TIDINGS_SITE_PUBLIC_URL": base,
        # The demo mails a local sink over SMTP, which is real mail: it says who it is from.
        "TIDINGS_THEME_POSTAL_ADDRESS": "The Demo Gazette, 1 Harbour Road, Porthaven",
        "TIDINGS_EMAIL_FROM_ADDRESS": "desk@demo.example.org",
        "TIDINGS_LOG_FORMAT": "json",
        "TIDINGS_EMAIL_PROVIDER": "smtp",
        "TIDINGS_SMTP_HOST": "127.0.0.1",
        "TIDINGS_SMTP_PORT": str(smtp_port),
        "TIDINGS_SMTP_SECURITY": "none",
        "TIDINGS_QUEUE_POLL_INTERVAL_SECONDS": "0.2",
        # Bounces come back to a VERP return path, read by `tidings inbound` (issue 22).
        "TIDINGS_INBOUND_BOUNCE_ADDRESS": "bounces@demo.example.org",
        # Its people read within seconds of the send (demo_engagement.py).
        "TIDINGS_TRACKING_MACHINE_WINDOW_SECONDS": str(MACHINE_WINDOW_SECONDS),
    }
    out_console.rule("tidings demo")
    out_console.print(f"database: {workdir / 'demo.db'} (fresh)")
    log_file = (workdir / "server.log").open("wb")
    sink = subprocess.Popen(  # noqa: S603 - our own executable with fixed arguments
        [
            sys.executable,
            "-m",
            "tidings",
            "dev-smtp",
            "--port",
            str(smtp_port),
            "--store",
            str(mail_dir),
            "--reports-to",
            f"127.0.0.1:{inbound_port}",
        ],
        env=env,
        stdout=log_file,
        stderr=subprocess.STDOUT,
    )
    server = subprocess.Popen(  # noqa: S603
        [sys.executable, "-m", "tidings", "serve", "--port", str(port)],
        env=env,
        stdout=log_file,
        stderr=subprocess.STDOUT,
    )
    inbound: subprocess.Popen[bytes] | None = None
    try:
        _wait_until_up(base, server, deadline_s=30)  # migrated: `tidings inbound` needs that
        inbound = subprocess.Popen(  # noqa: S603 - our own executable with fixed arguments
            [sys.executable, "-m", "tidings", "inbound", "--port", str(inbound_port)],
            env=env,
            stdout=log_file,
            stderr=subprocess.STDOUT,
        )
        ready = httpx.get(f"{base}/readyz").json()
        out_console.print(f"[green]✓[/] serve is up at {base}; readyz: {ready}")
        spec = httpx.get(f"{base}/openapi.json").json()
        out_console.print(f"[green]✓[/] OpenAPI document lists {len(spec['paths'])} paths")
        created = _tidings("keys", "create", "demo", "--json", env=env)
        if created.returncode != 0:
            fail(f"keys create failed: {created.stderr.strip()}")
        token = json.loads(created.stdout)["key"]
        out_console.print(f"[green]✓[/] created an admin API key: {token[:15]}…")
        anonymous = httpx.get(f"{base}/api/admin/keys")
        keys = httpx.get(f"{base}/api/admin/keys", headers={"Authorization": f"Bearer {token}"})
        out_console.print(
            f"[green]✓[/] GET /api/admin/keys without a key -> {anonymous.status_code} "
            f"{anonymous.headers['content-type']}; with it -> {keys.status_code}, "
            f"{len(keys.json()['items'])} key(s)"
        )
        if anonymous.status_code != 401 or keys.status_code != 200:
            fail("admin authentication did not behave as documented")
        newsletter = create_newsletter(base, token)
        form_subscriber = sign_up_through_the_form(base, newsletter, mail_dir)
        import_subscribers(newsletter, env, subscribers)
        campaign_id = send_a_campaign(
            base, token, newsletter, mail_dir, env, form_subscriber, subscribers
        )
        read_and_click(base, campaign_id, mail_dir, env)
        hear_back(base, token, campaign_id, env)
        if keep:
            out_console.print(f"Server running at {base} (Ctrl-C to stop).")
            server.wait()
    finally:
        for process in (server, sink, inbound):
            if process is not None and process.poll() is None:
                process.send_signal(signal.SIGTERM)
                process.wait(timeout=30)
        log_file.close()
    out_console.print(
        f"[green]✓[/] server stopped cleanly (exit {server.returncode}); "
        f"logs in {workdir / 'server.log'}; the demo took {time.monotonic() - started:.0f} s"
    )
