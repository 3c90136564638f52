"""The bare clients `tidings bench send` puts beside a worker: aiosmtplib sending the same
personalised messages to the same sink, httpx posting the same batch requests to the same
provider (built beforehand, or while sending), and on PostgreSQL a psycopg client building
them from the send's rows with the least SQL (`bench.floor`).

None holds the campaign: the floor reads one batch of rows at a time, and the clients that
need their messages or people made before the clock starts (so that making them is not
timed) run on the campaign's first `SMTP_SAMPLE_MESSAGES` or `SAMPLE_RECIPIENTS` readers when
it is larger, and say so (`"sampled": {"rows": …, "of": …}`): a rate, which is what they
give, needs a sample, not the whole campaign in memory (14 KB a message, about 0.9 KB a
batch-API recipient)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any

import httpx
import psycopg
from aiosmtplib import SMTP

from tidings.bench import floor
from tidings.bench.render import sample_recipient
from tidings.delivery.form_data import encode_multipart
from tidings.delivery.mailgun import MailgunProvider
from tidings.delivery.provider import BatchMessage, BatchRecipient
from tidings.domain import tokens
from tidings.rendering.batch import batch_template, batch_variables
from tidings.rendering.engine import TemplateEngine
from tidings.rendering.render import SegmentRendering, render_segment
from tidings.rendering.sample import SAMPLE_BASE_URL, SAMPLE_LIST, SAMPLE_SENDER, sample_content
from tidings.rendering.slots import RecipientValues
from tidings.storage.database import libpq_url
from tidings.storage.dialect import is_postgresql_url

BENCH_DOMAIN = "mg.bench.example"
BATCHES_IN_FLIGHT = 2  # the worker's bulk_email.concurrency, and the bare client's
# The most readers a client with everything made beforehand is run on: about 270 MB of SMTP
# messages, 80 MB of batch request bodies or 95 MB of readers' values in the bench process.
SMTP_SAMPLE_MESSAGES = 20_000
SAMPLE_RECIPIENTS = 200_000


def sampled(rows: int, of: int) -> dict[str, int] | None:
    """The JSON's note that a client ran on the first `rows` of `of` readers (None: on all)."""
    return None if rows == of else {"rows": rows, "of": of}


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
    """The limit: aiosmtplib over `connections` connections, messages prepared beforehand
    (for at most `SMTP_SAMPLE_MESSAGES` of the `count` readers)."""
    rows = min(count, SMTP_SAMPLE_MESSAGES)
    messages = _messages(rows)
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
        "messages": rows,
        "seconds": round(elapsed, 3),
        "per_second": round(rows / elapsed, 1),
        "message_bytes": len(messages[0][1]),
        "sampled": sampled(rows, count),
    }


BATCH_SIZE = 1000
BENCH_SECRET = "bench-site-secret-" + "x" * 26  # a benchmark's own key


class BatchRequests:
    """The requests a campaign makes, one per 1,000 recipients, built the way a worker builds
    them: each recipient's two signed link tokens, Message-ID and variables, the form and its
    encoding. What a worker adds to this is the database: claims, reads and outcomes."""

    def __init__(self) -> None:
        self._now = datetime.now(UTC)
        self._rendering = _sample_rendering(self._now)
        self._template = batch_template(self._rendering)
        self._encoder = MailgunProvider(api_key="x", domain=BENCH_DOMAIN)

    def people(self, start: int, count: int) -> list[tuple[RecipientValues, datetime]]:
        """What a batch read gives a worker for the batch starting at recipient `start` of a
        campaign of `count`: the recipients and their rows' creation times."""
        return [
            (sample_recipient(number), self._now)
            for number in range(start, min(start + BATCH_SIZE, count))
        ]

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
    same work as a worker's, with no database) from readers' values made beforehand, as the
    others wait for their answers. For at most `SAMPLE_RECIPIENTS` of the `count` readers."""
    requests = BatchRequests()
    rows = min(count, SAMPLE_RECIPIENTS)
    starts = range(0, rows, BATCH_SIZE)
    # Made before the clock starts, one batch at a time: the bodies, or the readers' values.
    ready: dict[int, tuple[str, bytes]] = {}
    people: dict[int, list[tuple[RecipientValues, datetime]]] = {}
    for start in starts:
        if build_while_sending:
            people[start] = requests.people(start, rows)
        else:
            ready[start] = requests.build_for(requests.people(start, rows), f"bare-{start}")
    queue = list(starts)
    async with httpx.AsyncClient(
        base_url=f"http://127.0.0.1:{port}", auth=("api", "bench-key"), timeout=60
    ) as client:

        async def poster() -> None:
            while queue:
                start = queue.pop()
                content_type, body = (
                    ready.pop(start)
                    if ready
                    else requests.build_for(people.pop(start), f"bare-{start}")
                )
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
        "messages": rows,
        "batches": len(starts),
        "requests_built": "while sending" if build_while_sending else "beforehand",
        "seconds": round(elapsed, 3),
        "per_second": round(rows / elapsed, 1),
        "sampled": sampled(rows, count),
    }


async def bare_database_client(port: int, url: str) -> dict[str, Any] | None:
    """The floor with a database (PostgreSQL): the requests built the same way from the rows
    a finished send left in `url`, each batch's rows marked in flight and returned by one
    statement and marked sent by another (`bench.floor`), on one connection per
    request in flight. None on SQLite."""
    if not is_postgresql_url(url):
        return None
    requests = BatchRequests()
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
                    recipients = await floor.take(conn, batch_id)
                    people = [
                        (_values(recipient), recipient.created_at) for recipient in recipients
                    ]
                    content_type, body = requests.build_for(people, f"floor-{batch_id}")
                    response = await client.post(
                        f"/v3/{BENCH_DOMAIN}/messages",
                        content=body,
                        headers={"content-type": content_type},
                    )
                    response.raise_for_status()
                    await floor.settle(conn, batch_id)
                    count += len(recipients)

        started = time.perf_counter()
        await asyncio.gather(*(poster() for _ in range(BATCHES_IN_FLIGHT)))
        elapsed = time.perf_counter() - started
    return {
        "messages": count,
        "batches": batches,
        "requests_built": "while sending, from the rows",
        "seconds": round(elapsed, 3),
        "per_second": round(count / elapsed, 1),
        "sampled": None,  # every row, one batch at a time
    }


def _values(recipient: floor.FloorRecipient) -> RecipientValues:
    return RecipientValues(
        address=recipient.email,
        name=recipient.name,
        unsubscribe_token="",
        preferences_token="",
        subscriber_id=str(recipient.subscriber_id),
        recipient_id=str(recipient.recipient_id),
        attributes=recipient.attributes,
    )
