"""Subscribe rate limits per client address and per target address, shared by every process
through the database (AUD-5): 429 with Retry-After when exceeded."""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from tidings.audience.context import AudienceContext
from tidings.domain.errors import RateLimited
from tidings.storage import ratelimits


@dataclass(frozen=True)
class SubscribeLimits:
    per_ip: int
    per_address: int
    window_seconds: int


class SubscribeRateLimiter:
    def __init__(self, context: AudienceContext, limits: SubscribeLimits) -> None:
        self._ctx = context
        self._limits = limits

    async def check(self, *, client_ip: str | None, email_key: str) -> None:
        now = self._ctx.now()
        window = self._limits.window_seconds
        start = datetime.fromtimestamp(math.floor(now.timestamp() / window) * window, tz=UTC)
        # Buckets hold keyed hashes: the table never stores an address or an IP in clear.
        buckets = [(f"sub-addr:{self._ctx.email_hash(email_key)[:40]}", self._limits.per_address)]
        if client_ip:
            buckets.append(
                (f"sub-ip:{self._ctx.email_hash('ip:' + client_ip)[:40]}", self._limits.per_ip)
            )
        async with self._ctx.db.write() as conn:
            over = [
                limit
                for bucket, limit in buckets
                if await ratelimits.hit(conn, bucket, start) > limit
            ]
        if over:
            retry_after = max(
                1, math.ceil((start + timedelta(seconds=window) - now).total_seconds())
            )
            raise RateLimited(
                "too many subscribe requests; try again later", retry_after_seconds=retry_after
            )

    async def prune(self) -> int:
        before = self._ctx.now() - timedelta(seconds=self._limits.window_seconds * 2)
        async with self._ctx.db.write() as conn:
            return await ratelimits.prune(conn, before=before)
