"""`tidings bench subscribe`: the public subscribe endpoint's time per request for an address
that is new, pending, confirmed, unsubscribed or suppressed (AUD-5: no enumeration by timing,
medians within 20% of each other), on a scratch database of the configured kind.

Every case gets its own addresses, prepared through the real use cases, and requests go
through the real ASGI app in rounds of one request per case, shuffled within each round, so
drift (a warming cache, a growing table, a busy machine) and position fall on every case alike.
"""

from __future__ import annotations

import random
import statistics
import time
from typing import Any

import httpx

from tidings.api.app import create_app
from tidings.audience.newsletters import NewsletterFields
from tidings.bench.scratch import scratch_database
from tidings.bootstrap import Container, build, start
from tidings.config import load_settings

CASES = ("new", "pending", "confirmed", "unsubscribed", "suppressed")
NEWSLETTER = "bench"
TARGET_RATIO = 1.2
WARM_UP = 5


def _address(case: str, number: int) -> str:
    return f"{case}.{number}@bench.example.org"


async def _prepare(container: Container, requests: int) -> None:
    """A newsletter and, for each case but `new`, `requests` + warm-up addresses in it."""
    await container.newsletters.create(
        NewsletterFields(
            slug=NEWSLETTER, name="Bench", sender_name="Bench", sender_address="bench@example.org"
        )
    )
    for number in range(requests + WARM_UP):
        for case in ("pending", "confirmed", "unsubscribed", "suppressed"):
            view = await container.subscribers.create(
                email=_address(case, number),
                name=None,
                tier="free",
                labels=[],
                attributes={},
                subscribe_to=[(NEWSLETTER, case != "pending")],  # pending: asked to confirm
                actor="bench",
            )
            if case == "unsubscribed":
                await container.subscribers.unsubscribe(view.subscriber.id, NEWSLETTER)
            if case == "suppressed":  # a subscriber whose mail bounced, say
                await container.suppressions.suppress(
                    _address(case, number), reason="admin", note=None, actor="bench"
                )


async def _timed(client: httpx.AsyncClient, email: str) -> float:
    started = time.perf_counter()
    response = await client.post(
        "/api/subscribe", json={"email": email, "newsletter": NEWSLETTER, "name": "Bench Reader"}
    )
    elapsed = time.perf_counter() - started
    if response.status_code != 202:
        raise RuntimeError(f"subscribe answered {response.status_code}")
    return elapsed


async def bench_subscribe(configured_url: str, *, requests: int) -> dict[str, Any]:
    """Median milliseconds per subscribe request for each address state, and the ratio of
    the slowest median to the fastest (the same-run reference)."""
    async with scratch_database(configured_url) as url:
        limit = 10 * (requests + WARM_UP) * len(CASES)
        settings = load_settings(
            database={"url": url},
            audience={"subscribe_limit_per_ip": limit, "subscribe_limit_per_address": limit},
        )
        container = build(settings)
        try:
            await start(container, apply_migrations=True)
            await _prepare(container, requests)
            app = create_app(settings, apply_migrations=False, container=container)
            transport = httpx.ASGITransport(app=app)
            timings: dict[str, list[float]] = {case: [] for case in CASES}
            async with httpx.AsyncClient(transport=transport, base_url="http://bench") as client:
                order = random.Random(7)
                for number in range(requests + WARM_UP):
                    for case in order.sample(CASES, len(CASES)):
                        elapsed = await _timed(client, _address(case, number))
                        if number >= WARM_UP:
                            timings[case].append(elapsed)
        finally:
            await container.close()
    medians = {case: statistics.median(values) * 1000 for case, values in timings.items()}
    ratio = round(max(medians.values()) / min(medians.values()), 3)
    return {
        "benchmark": "subscribe",
        "database": container.db.dialect,
        "requests_per_case": requests,
        "median_ms": {case: round(value, 3) for case, value in medians.items()},
        "slowest_to_fastest_ratio": ratio,
        "target_ratio": TARGET_RATIO,
        "within_target": ratio < TARGET_RATIO,
    }
