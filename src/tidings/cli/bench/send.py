"""`tidings bench send` (BEN-2): a campaign of N recipients submitted by real `tidings worker`
processes to a local SMTP sink, beside a bare aiosmtplib client sending the same personalised
messages to the same sink with the same number of connections, in the same run: the ratio is
the figure. Postfix's `smtp-sink` is used when found (Python sinks saturate first); the JSON
says which sink ran."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import psycopg
from aiosmtplib import SMTP
from sqlalchemy.engine import make_url

from tidings.audience.newsletters import NewsletterFields
from tidings.bootstrap import running
from tidings.campaigns.commands import DraftFields
from tidings.cli.bench.bare_process import peak_rss_mb
from tidings.cli.context import free_port
from tidings.config import load_settings
from tidings.delivery.form_data import encode_multipart
from tidings.delivery.mailgun import MailgunProvider
from tidings.delivery.provider import BatchMessage, BatchRecipient
from tidings.domain import tokens
from tidings.observability.logging import configure_logging
from tidings.rendering.batch import batch_template, batch_variables
from tidings.rendering.bench import sample_recipient
from tidings.rendering.engine import TemplateEngine
from tidings.rendering.render import SegmentRendering, render_segment
from tidings.rendering.sample import SAMPLE_BASE_URL, SAMPLE_LIST, SAMPLE_SENDER, sample_content
from tidings.rendering.slots import RecipientValues
from tidings.storage.bench import floor, seeding
from tidings.storage.bench.scratch import scratch_database
from tidings.storage.database import async_url, libpq_url

POSTFIX_ROOT_ENV = "TIDINGS_BENCH_POSTFIX_ROOT"
DEFAULT_POSTFIX_ROOT = Path.home() / ".cache" / "tidings" / "postfix"


def postfix_root() -> Path | None:
    """Where `smtp-sink` was unpacked (`apt-get download postfix` then `dpkg -x DEB ROOT`)."""
    root = Path(os.environ.get(POSTFIX_ROOT_ENV, DEFAULT_POSTFIX_ROOT))
    return root if (root / "usr/sbin/smtp-sink").is_file() else None


@asynccontextmanager
async def smtp_sink(prefer_postfix: bool) -> AsyncIterator[tuple[str, int]]:
    """A sink on loopback in its own process: Postfix `smtp-sink` if available, else
    `tidings dev-smtp`. Yields (name, port)."""
    port = free_port()
    root = postfix_root() if prefer_postfix else None
    if root is not None:
        env = {**os.environ, "LD_LIBRARY_PATH": str(root / "usr/lib/postfix")}
        command = [str(root / "usr/sbin/smtp-sink")]
        if os.geteuid() == 0:
            command += ["-u", "nobody"]
        command += [f"127.0.0.1:{port}", "1000"]
        name = "postfix smtp-sink"
    else:
        env = dict(os.environ)
        command = [sys.executable, "-m", "tidings", "dev-smtp", "--port", str(port)]
        name = "tidings dev-smtp (aiosmtpd)"
    process = await asyncio.create_subprocess_exec(
        *command, env=env, stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL
    )
    try:
        await _wait_for_port(port)
        yield name, port
    finally:
        process.terminate()
        await process.wait()


def _sample_rendering(now: datetime) -> SegmentRendering:
    """The sample issue's paid segment: what both bare clients send, as the worker does."""
    return render_segment(
        sample_content(),
        "paid",
        sender=SAMPLE_SENDER,
        list_info=SAMPLE_LIST,
        base_url=SAMPLE_BASE_URL,
        engine=TemplateEngine(),
        now=now,
    )


def _messages(count: int) -> list[tuple[str, bytes]]:
    now = datetime.now(UTC)
    rendering = _sample_rendering(now)
    return [
        (person.address, rendering.personalise(person, now=now))
        for person in (sample_recipient(number) for number in range(count))
    ]


async def bare_client(port: int, count: int, connections: int) -> dict[str, Any]:
    """The limit: aiosmtplib over `connections` connections, messages prepared beforehand."""
    messages = _messages(count)
    share = [messages[index::connections] for index in range(connections)]

    async def one_connection(mine: list[tuple[str, bytes]]) -> None:
        client = SMTP(hostname="127.0.0.1", port=port, use_tls=False, start_tls=False)
        await client.connect()
        for address, data in mine:
            await client.sendmail(SAMPLE_SENDER.address, [address], data)
        await client.quit()

    started = time.perf_counter()
    await asyncio.gather(*(one_connection(mine) for mine in share))
    elapsed = time.perf_counter() - started
    return {
        "messages": count,
        "seconds": round(elapsed, 3),
        "per_second": round(count / elapsed, 1),
        "message_bytes": len(messages[0][1]),
    }


BENCH_DOMAIN = "mg.bench.example"
BATCHES_IN_FLIGHT = 2  # the worker's bulk_email.concurrency, and the bare client's


@asynccontextmanager
async def dev_provider_process() -> AsyncIterator[int]:
    """`tidings dev-provider` in its own process on a free loopback port."""
    port = free_port()
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "tidings",
        "dev-provider",
        "--port",
        str(port),
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.DEVNULL,
    )
    try:
        await _wait_for_port(port)
        yield port
    finally:
        process.terminate()
        await process.wait()


async def _wait_for_port(port: int) -> None:
    for _ in range(400):
        try:
            _, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.close()
            return
        except OSError:
            await asyncio.sleep(0.05)


BATCH_SIZE = 1000
BENCH_SECRET = "bench-site-secret-" + "x" * 26  # a benchmark's own key


class BatchRequests:
    """The requests a campaign of `count` readers makes, one per 1,000, built the way a worker
    builds them: each reader's two signed link tokens, Message-ID and variables, the form and
    its encoding. What a worker adds to this is the database: claims, reads and outcomes."""

    def __init__(self, count: int) -> None:
        now = datetime.now(UTC)
        self._rendering = _sample_rendering(now)
        self._template = batch_template(self._rendering)
        self._encoder = MailgunProvider(api_key="x", domain=BENCH_DOMAIN)
        # What a batch read gives a worker: the reader and its rows' ids and creation times.
        self._people = [(sample_recipient(number), now) for number in range(count)]
        self.starts = list(range(0, count, BATCH_SIZE))

    def build(self, start: int) -> tuple[str, bytes]:
        """(Content-Type, body) of the batch starting at reader `start`."""
        return self.build_for(self._people[start : start + BATCH_SIZE], f"bare-{start}")

    def build_for(
        self, people: Iterable[tuple[RecipientValues, datetime]], key: str
    ) -> tuple[str, bytes]:
        """(Content-Type, body) of one request to `people` (each with its creation time, which
        its link tokens sign)."""
        template, rendering = self._template, self._rendering
        recipients = []
        for person, created in people:
            number = int(person.subscriber_id)
            values = person._replace(
                unsubscribe_token=tokens.sign(BENCH_SECRET, "unsubscribe", number, created),
                preferences_token=tokens.sign(BENCH_SECRET, "preferences", number, created),
            )
            recipients.append(
                BatchRecipient(
                    values.address,
                    rendering.message_id_for(values.address),
                    batch_variables(template, values),
                )
            )
        message = BatchMessage(
            sender=template.from_header,
            subject=template.subject,
            html=template.html,
            text=template.text,
            headers=template.headers,
            variable_names=template.variable_names,
            recipients=recipients,
            idempotency_key=key,
        )
        return encode_multipart(self._encoder.form_fields(message))


async def bare_http_client(
    port: int, count: int, *, concurrency: int, build_while_sending: bool = False
) -> dict[str, Any]:
    """The limit for the batch API: httpx posting the requests, `concurrency` at once, built
    beforehand; or, with `build_while_sending`, each poster building its next request (the
    same work as a worker's, with no database) as the others wait for their answers."""
    batches = BatchRequests(count)
    ready: dict[int, tuple[str, bytes]] = {}
    if not build_while_sending:
        ready = {start: batches.build(start) for start in batches.starts}
    queue = list(batches.starts)
    async with httpx.AsyncClient(
        base_url=f"http://127.0.0.1:{port}", auth=("api", "bench-key"), timeout=60
    ) as client:

        async def poster() -> None:
            while queue:
                start = queue.pop()
                content_type, body = ready.pop(start) if ready else batches.build(start)
                response = await client.post(
                    f"/v3/{BENCH_DOMAIN}/messages",
                    content=body,
                    headers={"content-type": content_type},
                )
                response.raise_for_status()

        started = time.perf_counter()
        await asyncio.gather(*(poster() for _ in range(concurrency)))
        elapsed = time.perf_counter() - started
    return {
        "messages": count,
        "batches": len(batches.starts),
        "requests_built": "while sending" if build_while_sending else "beforehand",
        "seconds": round(elapsed, 3),
        "per_second": round(count / elapsed, 1),
    }


async def bare_database_client(port: int, url: str) -> dict[str, Any] | None:
    """The floor with a database (PostgreSQL): the requests built the same way from the rows
    a finished send left in `url`, each batch's rows marked in flight and returned by one
    statement and marked sent by another (`storage.bench.floor`), on one connection per
    request in flight. None on SQLite."""
    if make_url(url).get_backend_name() != "postgresql":
        return None
    requests = BatchRequests(0)
    async with await psycopg.AsyncConnection.connect(libpq_url(url), autocommit=True) as conn:
        queue = await floor.batch_ids(conn)
    batches, count = len(queue), 0
    async with httpx.AsyncClient(
        base_url=f"http://127.0.0.1:{port}", auth=("api", "bench-key"), timeout=60
    ) as client:

        async def poster() -> None:
            nonlocal count
            async with await psycopg.AsyncConnection.connect(
                libpq_url(url), autocommit=True
            ) as conn:
                while queue:
                    batch_id = queue.pop()
                    readers = await floor.take(conn, batch_id)
                    people = [(_values(reader), reader.created_at) for reader in readers]
                    content_type, body = requests.build_for(people, f"floor-{batch_id}")
                    response = await client.post(
                        f"/v3/{BENCH_DOMAIN}/messages",
                        content=body,
                        headers={"content-type": content_type},
                    )
                    response.raise_for_status()
                    await floor.settle(conn, batch_id)
                    count += len(readers)

        started = time.perf_counter()
        await asyncio.gather(*(poster() for _ in range(BATCHES_IN_FLIGHT)))
        elapsed = time.perf_counter() - started
    return {
        "messages": count,
        "batches": batches,
        "requests_built": "while sending, from the rows",
        "seconds": round(elapsed, 3),
        "per_second": round(count / elapsed, 1),
    }


def _values(reader: floor.Reader) -> RecipientValues:
    return RecipientValues(
        address=reader.email,
        name=reader.name,
        unsubscribe_token="",
        preferences_token="",
        subscriber_id=str(reader.subscriber_id),
        recipient_id=str(reader.recipient_id),
        attributes=reader.attributes,
    )


def _cpu_seconds(pid: int) -> float | None:
    """User + system CPU the process has used so far (Linux /proc; None elsewhere)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def bare_process(url: str) -> dict[str, Any]:
    """The memory floor for a worker (`bare_process`): its libraries loaded, connected, nothing
    sent."""
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "tidings.cli.bench.bare_process",
        async_url(url),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    output, errors = await process.communicate()
    if process.returncode != 0:
        raise RuntimeError(f"the bare process failed: {errors.decode(errors='replace')[-500:]}")
    figures: dict[str, Any] = json.loads(output)
    return figures


async def tidings_send(
    url: str, count: int, workers: int, worker_env: dict[str, str]
) -> dict[str, Any]:
    """A real campaign: seeded audience, queued send, `workers` worker processes configured
    by `worker_env` (the provider). Rate from the first batch claimed to the last finished."""
    content = sample_content()
    settings = load_settings(database={"url": url}, log={"level": "warning", "format": "json"})
    async with running(settings, apply_migrations=True) as container:
        newsletter = await container.newsletters.create(
            NewsletterFields(
                slug="bench", name="Bench", sender_name="Bench", sender_address="bench@example.org"
            )
        )
        async with container.db.write() as conn:
            await seeding.seed_audience(
                conn, newsletter_id=newsletter.id, count=count, now=container.sending.now()
            )
        async with container.db.read() as conn:
            seeded_bytes = await seeding.database_bytes(conn)
            seeded_wal = await seeding.wal_position(conn)
        draft = await container.campaigns.create(
            "bench",
            DraftFields(
                subject=content.subject,
                preheader=content.preheader,
                body=content.body,
                body_format=content.body_format,
            ),
        )
        await container.sends.send(draft.campaign.id)
        clean = {k: v for k, v in os.environ.items() if not k.startswith("TIDINGS_")}
        env = {
            **clean,
            "TIDINGS_DATABASE_URL": url,
            "TIDINGS_LOG_LEVEL": "warning",
            "TIDINGS_LOG_FORMAT": "json",
            **worker_env,
        }
        async with container.db.read() as conn:
            xid_before = await seeding.next_transaction_id(conn)
        processes = [
            await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                "tidings",
                "worker",
                env=env,
                stdout=asyncio.subprocess.DEVNULL,
                stderr=asyncio.subprocess.DEVNULL,
            )
            for _ in range(workers)
        ]
        started = time.perf_counter()
        cpu_at_prepared: list[float | None] | None = None
        try:
            while True:
                status = (await container.campaigns.get(draft.campaign.id)).campaign.status
                if status in ("submitted", "failed"):
                    break
                if cpu_at_prepared is None:
                    prepared = await container.sends.get_send(draft.campaign.id)
                    if prepared is not None and prepared.prepared_at is not None:
                        cpu_at_prepared = [_cpu_seconds(process.pid) for process in processes]
                await asyncio.sleep(0.2)
            wall = time.perf_counter() - started
            rss = [peak_rss_mb(process.pid) for process in processes]
            cpu_done = [_cpu_seconds(process.pid) for process in processes]
        finally:
            for process in processes:
                if process.returncode is None:
                    process.send_signal(signal.SIGTERM)
            for process in processes:
                await process.wait()
        window = await container.sends.submission_window(draft.campaign.id)
        send = await container.sends.get_send(draft.campaign.id)
        async with container.db.read() as conn:
            sent_bytes = await seeding.database_bytes(conn)
            sent_wal = await seeding.wal_position(conn)
            xid_after = await seeding.next_transaction_id(conn)
            batches = await seeding.batch_count(conn, draft.campaign.id)
    assert send is not None
    wal = None if seeded_wal is None or sent_wal is None else sent_wal - seeded_wal
    seconds = window.total_seconds() if window else wall
    return {
        "status": status,
        "recipients": count,
        "sent": send.email_count,
        "workers": workers,
        "submission_seconds": round(seconds, 3),
        "wall_seconds_with_preparation": round(wall, 3),
        "per_second": round(count / seconds, 1) if seconds else None,
        "per_second_per_worker": round(count / seconds / workers, 1) if seconds else None,
        "worker_peak_rss_mb": rss,
        # What the send itself added (preparation, recipient rows, batches, jobs): seeded
        # audience before, the database once the campaign is submitted after.
        "database_mb_with_audience": round(seeded_bytes / 2**20, 1),
        "database_growth_mb": round((sent_bytes - seeded_bytes) / 2**20, 1),
        "database_growth_bytes_per_recipient": round((sent_bytes - seeded_bytes) / count),
        # Write-ahead log the send wrote (PostgreSQL; this server's other databases too).
        "wal_bytes_per_recipient": None if wal is None else round(wal / count),
        # Writing transactions from the workers' start to the end (PostgreSQL; preparation,
        # batches, the queue's own, and this server's other databases too) per batch.
        "batches": batches,
        "write_transactions_per_batch": (
            None
            if xid_before is None or xid_after is None or not batches
            else round((xid_after - xid_before) / batches, 2)
        ),
        # CPU the workers spent per recipient once the campaign was prepared: unlike the rate,
        # barely moved by other load on the machine, so it compares runs on a busy host.
        "worker_cpu_us_per_recipient": _cpu_per_recipient(cpu_at_prepared, cpu_done, count),
    }


def _cpu_per_recipient(
    before: list[float | None] | None, after: list[float | None], count: int
) -> float | None:
    if before is None or None in before or None in after or not count:
        return None
    spent = sum(a or 0.0 for a in after) - sum(b or 0.0 for b in before)
    if spent <= 0:
        # Under one clock tick (10 ms): a send this small is below what /proc can measure.
        return None
    return round(spent / count * 1_000_000, 1)


def _ratio(ours: dict[str, Any], bare: dict[str, Any]) -> float | None:
    if not ours["per_second"]:
        return None
    return round(float(ours["per_second"]) / float(bare["per_second"]), 3)


async def smtp_figures(
    url: str,
    *,
    recipients: int,
    workers: int,
    connections: int,
    prefer_postfix: bool,
    extra_env: dict[str, str] | None = None,
) -> dict[str, Any]:
    async with smtp_sink(prefer_postfix) as (sink_name, port):
        bare = await bare_client(port, recipients, connections)
        async with scratch_database(url) as scratch:
            ours = await tidings_send(
                scratch,
                recipients,
                workers,
                {
                    "TIDINGS_EMAIL_PROVIDER": "smtp",
                    "TIDINGS_SMTP_HOST": "127.0.0.1",
                    "TIDINGS_SMTP_PORT": str(port),
                    "TIDINGS_SMTP_SECURITY": "none",
                    "TIDINGS_SMTP_POOL_SIZE": str(connections),
                    "TIDINGS_BULK_EMAIL_SUBMISSION_CONCURRENCY": str(connections),
                    **(extra_env or {}),
                },
            )
    return {
        "sink": sink_name,
        "bare_client": bare,
        "tidings": ours,
        "ratio_to_bare_client": _ratio(ours, bare),
    }


async def dkim_figures(
    url: str, *, recipients: int, workers: int, connections: int, prefer_postfix: bool
) -> dict[str, Any]:
    """The SMTP figures again, each message signed with a fresh 2048-bit RSA key (PRV-7)."""
    with tempfile.TemporaryDirectory() as folder:
        key = Path(folder) / "dkim.pem"
        made = await asyncio.create_subprocess_exec(
            *("openssl", "genrsa", "-out", str(key), "2048"),
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.DEVNULL,
        )
        if await made.wait() != 0:
            raise RuntimeError("openssl genrsa failed: --dkim needs openssl on PATH")
        return await smtp_figures(
            url,
            recipients=recipients,
            workers=workers,
            connections=connections,
            prefer_postfix=prefer_postfix,
            extra_env={
                "TIDINGS_DKIM_SELECTOR": "bench",
                "TIDINGS_DKIM_DOMAIN": "example.org",
                "TIDINGS_DKIM_PRIVATE_KEY_FILE": str(key),
            },
        )


async def http_figures(url: str, *, recipients: int, workers: int) -> dict[str, Any]:
    async with dev_provider_process() as port:
        bare = await bare_http_client(port, recipients, concurrency=BATCHES_IN_FLIGHT)
        building = await bare_http_client(
            port, recipients, concurrency=BATCHES_IN_FLIGHT, build_while_sending=True
        )
        async with scratch_database(url) as scratch:
            ours = await tidings_send(
                scratch,
                recipients,
                workers,
                {
                    "TIDINGS_EMAIL_PROVIDER": "mailgun",
                    "TIDINGS_MAILGUN_API_KEY": "bench-key",
                    "TIDINGS_MAILGUN_DOMAIN": BENCH_DOMAIN,
                    "TIDINGS_MAILGUN_API_BASE_URL": f"http://127.0.0.1:{port}",
                    "TIDINGS_BULK_EMAIL_CONCURRENCY": str(BATCHES_IN_FLIGHT),
                },
            )
            least = await bare_database_client(port, scratch)
    return {
        "server": "tidings dev-provider (Mailgun-compatible)",
        "bare_client": bare,
        "bare_client_building_requests": building,
        "tidings": ours,
        "ratio_to_bare_client": _ratio(ours, bare),
        # What the database and the accounting cost, beside the same requests built in-line.
        "ratio_to_bare_client_building_requests": _ratio(ours, building),
        # The least any send with a database could do (PostgreSQL): its distance to the client
        # building requests is what touching the rows costs, a worker's to it the guarantees.
        "bare_client_with_database": least,
        "ratio_of_bare_client_with_database_to_building_requests": (
            None if least is None else _ratio(least, building)
        ),
        "ratio_to_bare_client_with_database": None if least is None else _ratio(ours, least),
    }


async def bench_send(
    url: str,
    *,
    recipients: int,
    workers: int,
    connections: int,
    prefer_postfix: bool,
    providers: tuple[str, ...] = ("smtp", "http"),
    dkim: bool = False,
) -> dict[str, Any]:
    configure_logging("warning", "json")
    result: dict[str, Any] = {"benchmark": "send", "database": url.split(":", 1)[0]}
    async with scratch_database(url) as scratch:
        # A worker's memory beside what its libraries alone take, connected, nothing sent.
        result["bare_process"] = floor_process = await bare_process(scratch)
    if "smtp" in providers:
        result["smtp"] = await smtp_figures(
            url,
            recipients=recipients,
            workers=workers,
            connections=connections,
            prefer_postfix=prefer_postfix,
        )
        if dkim:
            result["smtp_dkim"] = await dkim_figures(
                url,
                recipients=recipients,
                workers=workers,
                connections=connections,
                prefer_postfix=prefer_postfix,
            )
            result["dkim_rate_ratio"] = _ratio(
                result["smtp_dkim"]["tidings"], result["smtp"]["tidings"]
            )
        if postfix_root() is None:
            result["postfix_hint"] = (
                f"for a faster sink: apt-get download postfix && dpkg -x postfix_*.deb "
                f"{DEFAULT_POSTFIX_ROOT} (or set {POSTFIX_ROOT_ENV})"
            )
    if "http" in providers:
        result["http"] = await http_figures(url, recipients=recipients, workers=workers)
    floor_rss = floor_process["peak_rss_mb"]
    for provider in ("smtp", "smtp_dkim", "http"):
        if provider in result:
            ours = result[provider]["tidings"]
            ours["worker_peak_rss_mb_above_bare_process"] = [
                None if rss is None or floor_rss is None else round(rss - floor_rss, 1)
                for rss in ours["worker_peak_rss_mb"]
            ]
    return result
