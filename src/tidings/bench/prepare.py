"""`tidings bench prepare MEMBERS CONCURRENCY` (BEN-1): recipient preparation of a synthetic
audience on a scratch database of the configured kind — the full audience, discard and rebuild
after a complete pending attempt, a label audience of every fifth member, and the full audience
with an A/B test (ENG-8: 3 variants in a 20% test share, assigned in SQL by a keyed hash) —
beside one bare INSERT … SELECT of the same rows measured in the same run, with statement
counts, rows fetched into Python, the longest transaction, the preparing process's RSS, and
how far each variant's share lies from its expectation."""

from __future__ import annotations

import gc
import math
import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from sqlalchemy import event

from tidings.audience.newsletters import NewsletterFields
from tidings.bench import seeding, yardsticks
from tidings.bench.scratch import scratch_database
from tidings.bootstrap import Container, running
from tidings.campaigns.commands import DraftFields
from tidings.campaigns.jobs.payloads import SEND_CAMPAIGN, SendCampaign
from tidings.campaigns.preparation import Preparation
from tidings.config import Settings, load_settings
from tidings.domain.ab_tests import AbField, AbMetric, AbTest, split_segment
from tidings.domain.jobs import JobStatus
from tidings.domain.segments import parse_filter
from tidings.observability.logging import configure_logging
from tidings.queue import rounds
from tidings.storage import ab_tests as ab_queries

PAGE_SIZE = os.sysconf("SC_PAGE_SIZE")


BASELINE: dict[str, int] = {}


def _rss_bytes() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * PAGE_SIZE


@dataclass
class Probe:
    """Counts statements and rows fetched, times transactions, and samples RSS every 10 ms
    from a thread (the event loop may be busy in driver work)."""

    statements: int = 0
    rows_fetched: int = 0
    longest_transaction: float = 0.0
    peak_rss: int = 0
    _began: dict[int, float] = field(default_factory=dict)
    _stop: threading.Event = field(default_factory=threading.Event)

    def install(self, container: Container) -> None:
        engine = container.db.engine.sync_engine

        def after(_conn: Any, cursor: Any, statement: str, *_rest: Any) -> None:
            self.statements += 1
            # Rows a SELECT brought into Python (drivers that report it: psycopg does).
            if statement.lstrip().upper().startswith("SELECT") and cursor.rowcount > 0:
                self.rows_fetched += cursor.rowcount

        def began(conn: Any) -> None:
            self._began[id(conn)] = time.perf_counter()

        def ended(conn: Any) -> None:
            started = self._began.pop(id(conn), None)
            if started is not None:
                self.longest_transaction = max(
                    self.longest_transaction, time.perf_counter() - started
                )

        event.listen(engine, "after_cursor_execute", after)
        event.listen(engine, "begin", began)
        event.listen(engine, "commit", ended)
        event.listen(engine, "rollback", ended)

    @contextmanager
    def sampling(self) -> Iterator[None]:
        self.statements = self.rows_fetched = 0
        self.longest_transaction = 0.0
        self.peak_rss = _rss_bytes()
        self._stop.clear()

        def sample() -> None:
            while not self._stop.wait(0.01):
                self.peak_rss = max(self.peak_rss, _rss_bytes())

        thread = threading.Thread(target=sample, daemon=True)
        thread.start()
        try:
            yield
        finally:
            self._stop.set()
            thread.join()

    def figures(self) -> dict[str, Any]:
        return {
            "statements": self.statements,
            "rows_fetched": self.rows_fetched,
            "longest_transaction_seconds": round(self.longest_transaction, 4),
            "peak_rss_mb": round(self.peak_rss / 2**20, 1),
            "peak_rss_growth_mb": round((self.peak_rss - BASELINE.get("rss", 0)) / 2**20, 1),
        }


AB_TEST = AbTest(
    field=AbField.SUBJECT,
    alternatives=("Bench B", "Bench C"),
    test_share=20,
    wait=timedelta(hours=4),
    metric=AbMetric.CLICKS,
)


async def _campaign(container: Container, audience_filter: str, ab: AbTest | None = None) -> int:
    draft = await container.campaigns.create(
        "bench",
        DraftFields(
            subject="Bench", body="Hello {{ name }}.", audience_filter=audience_filter, ab=ab
        ),
    )
    await container.sends.send(draft.campaign.id)
    return draft.campaign.id


async def _prepare(container: Container, probe: Probe, campaign_id: int) -> dict[str, Any]:
    """Run the real preparation under a claimed send job, as a worker would."""
    key = SendCampaign(campaign_id, 1).idempotency_key
    job, _attempts = await container.queue.get_by_key(key)
    if job.status != JobStatus.PENDING:
        await container.queue.replay(job.id)
    async with container.db.write() as conn:
        (job,) = await rounds.claim(
            conn,
            kinds=[SEND_CAMPAIGN],
            limit=1,
            now=container.sending.now(),
            lease=container.queue.policy.lease,
        )
    draft = await container.campaigns.get(campaign_id)
    send = await container.sends.get_send(campaign_id)
    assert send is not None
    preparation = Preparation(container.sending)
    gc.collect()
    with probe.sampling():
        started = time.perf_counter()
        candidates = await preparation.prepare(job, draft, send)
        elapsed = time.perf_counter() - started
    await preparation.drop_candidates(job, campaign_id)  # clean-up, timed on its own
    async with container.db.write() as conn:
        await rounds.complete(conn, job, now=container.sending.now())
    gc.collect()
    return {
        "candidates": candidates,
        "seconds": round(elapsed, 3),
        "phases": preparation.timings,
        **probe.figures(),
        "retained_rss_mb_after_gc": round(_rss_bytes() / 2**20, 1),
    }


async def _reference(container: Container, probe: Probe, audience_filter: str) -> dict[str, Any]:
    draft = await container.campaigns.create("bench", DraftFields(subject="Reference", body="x"))
    newsletter_id = draft.newsletter.id
    with probe.sampling():
        started = time.perf_counter()
        async with container.db.write() as conn:
            rows = await yardsticks.reference_insert_select(
                conn, draft.campaign.id, newsletter_id, parse_filter(audience_filter)
            )
        elapsed = time.perf_counter() - started
    await container.campaigns.delete(draft.campaign.id)
    return {"rows": rows, "seconds": round(elapsed, 3), **probe.figures()}


async def _ab_split(container: Container, campaign_id: int, candidates: int) -> dict[str, Any]:
    """Each variant's and the remainder's recipients from the prepared batches, and each
    variant's distance from its expected count (candidates × share / variants) in standard
    deviations of a binomial draw: a fair keyed hash stays within about 3."""
    async with container.db.read() as conn:
        per_segment = await ab_queries.sent_per_segment(conn, campaign_id)
    variants: dict[str, int] = {}
    remainder = 0
    for segment, (recipients, _sent) in per_segment.items():
        _tier, variant = split_segment(segment)
        if variant is None:
            remainder += recipients
        else:
            variants[f"v{variant}"] = variants.get(f"v{variant}", 0) + recipients
    p = AB_TEST.test_share / 100 / AB_TEST.variant_count
    sigma = math.sqrt(candidates * p * (1 - p)) or 1.0
    return {
        "variants": dict(sorted(variants.items())),
        "remainder": remainder,
        "accounted": sum(variants.values()) + remainder == candidates,
        "expected_per_variant": round(candidates * p, 1),
        "largest_deviation_sigma": round(
            max((abs(count - candidates * p) / sigma for count in variants.values()), default=0),
            2,
        ),
    }


def _settings(url: str, concurrency: int) -> Settings:
    return load_settings(
        database={"url": url},
        log={"level": "warning", "format": "json"},
        bulk_email={"batch_creation_concurrency": concurrency},
    )


async def bench_prepare(url: str, members: int, concurrency: int) -> dict[str, Any]:
    configure_logging("warning", "json")  # stdout carries the figures only
    async with scratch_database(url) as scratch:
        settings = _settings(scratch, concurrency)
        async with running(settings, apply_migrations=True) as container:
            newsletter = await container.newsletters.create(
                NewsletterFields(
                    slug="bench",
                    name="Bench",
                    sender_name="Bench",
                    sender_address="bench@example.org",
                    tracking="aggregate",  # an A/B test needs a tracked newsletter (ENG-8)
                )
            )
            seeded = time.perf_counter()
            async with container.db.write() as conn:
                await seeding.seed_audience(
                    conn, newsletter_id=newsletter.id, count=members, now=container.sending.now()
                )
            seed_seconds = time.perf_counter() - seeded
            probe = Probe()
            probe.install(container)
            gc.collect()
            BASELINE["rss"] = _rss_bytes()
            reference = await _reference(container, probe, "")
            full_id = await _campaign(container, "")
            full = await _prepare(container, probe, full_id)
            async with container.db.write() as conn:
                await seeding.forget_preparation(conn, full_id)
            rebuild = await _prepare(container, probe, full_id)
            label = await _prepare(container, probe, await _campaign(container, "label:beta"))
            label_reference = await _reference(container, probe, "label:beta")
            ab_id = await _campaign(container, "", AB_TEST)
            ab = await _prepare(container, probe, ab_id)
            ab["split"] = await _ab_split(container, ab_id, ab["candidates"])
    return {
        "benchmark": "prepare",
        "database": {
            "dialect": container.db.dialect,
            "pool_size": settings.database.pool_size,
            "batch_size": settings.bulk_email.batch_size,
            "batch_creation_concurrency": concurrency,
        },
        "members": members,
        "baseline_rss_mb": round(BASELINE["rss"] / 2**20, 1),
        "seed_seconds": round(seed_seconds, 3),
        "reference_insert_select": reference,
        "full_audience": full,
        "ratio_full_to_reference": round(full["seconds"] / max(reference["seconds"], 1e-9), 2),
        "discard_and_rebuild": rebuild,
        "label_audience": label,
        "label_reference_insert_select": label_reference,
        "ratio_label_to_reference": round(
            label["seconds"] / max(label_reference["seconds"], 1e-9), 2
        ),
        "ab_test_audience": ab,
        "ratio_ab_to_full": round(ab["seconds"] / max(full["seconds"], 1e-9), 2),
        "ratio_ab_selection_to_full_selection": round(
            ab["phases"]["selection"] / max(full["phases"]["selection"], 1e-9), 2
        ),
    }
