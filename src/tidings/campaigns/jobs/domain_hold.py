"""Recipients held back by their domain's rate (SND-25), for the `send_batch` job: each chunk
goes with only the recipients whose domain has a permit now; the others wait, `pending` — not
marked in flight, not failed — while the rest of the batch goes on. Once everyone else went, a
short wait for their domains is spent inside the batch; a longer one gives the batch back
(`Defer`, no attempt spent) and the job comes back for them when their domain has room.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from tidings.campaigns.submit.strategy import Recipient
from tidings.outbound.domain_rates import DomainRates

# Waited inside the batch for a held-back domain: each wait at most this, all of them at most
# the total; past either, the batch is given back until the domain has room.
MAX_HOLD_SECONDS = 2.0
MAX_HOLD_TOTAL_SECONDS = 30.0


class DomainHold:
    """One batch's held-back recipients. With no domain rates (or a batch call, which the
    provider paces per domain itself) it holds nobody and costs nothing."""

    def __init__(self, domains: DomainRates | None) -> None:
        self._domains = domains if domains is not None and domains.limited else None
        self.held: list[Recipient] = []
        self.wait_seconds = 0.0
        self._until = asyncio.get_running_loop().time() + MAX_HOLD_TOTAL_SECONDS

    async def admit(self, chunk: Sequence[Recipient]) -> Sequence[Recipient]:
        """The part of `chunk` that may go now; the rest is held."""
        if self._domains is None or not chunk:
            return chunk
        admitted = await self._domains.admit([recipient.values.address for recipient in chunk])
        if not admitted.held:
            return chunk
        held = set(admitted.held)
        self.held.extend(r for r in chunk if r.values.address in held)
        self.wait_seconds = admitted.wait_seconds
        return [r for r in chunk if r.values.address not in held]

    async def again(self) -> list[Recipient] | None:
        """After a pass over the batch: the held recipients to try again after a short wait,
        or None (nobody held, or their wait is too long to spend holding the batch)."""
        loop = asyncio.get_running_loop()
        if not self.held or self.wait_seconds > MAX_HOLD_SECONDS:
            return None
        if loop.time() + self.wait_seconds > self._until:
            return None
        await asyncio.sleep(self.wait_seconds)
        again, self.held = self.held, []
        return again

    @property
    def reason(self) -> str:
        return f"{len(self.held)} recipient(s) wait for their domain's rate"
