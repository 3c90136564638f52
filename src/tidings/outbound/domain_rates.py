"""Per-recipient-domain rates (SND-25), shared by every worker through the database: which
recipients of a chunk may go now, and a 421/451 naming a domain slowing it down.

Only the configured domains (`bulk_email.domain_rates`) are limited; anyone else goes at once.
A recipient whose domain has no permit left is *held*: it is not handed over, not marked in
flight and not failed — it stays `pending`, and the batch's job comes back for it once the
domain has room, while the rest of the chunk goes on (a held-back domain holds up nobody
else). One write per limited domain per chunk, never per message.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

import structlog

from tidings.domain.domain_rate import DEFERRAL_STATUSES, recipient_domain
from tidings.storage.database import Database
from tidings.storage.sending import domain_rates as rows

log = structlog.get_logger("tidings.send_rate")


@dataclass(frozen=True, slots=True)
class Admitted:
    """The split of a chunk: the addresses that may go now, those held back, and the seconds
    until the first held one's domain has room again (0 when none is held)."""

    now: tuple[str, ...]
    held: tuple[str, ...]
    wait_seconds: float


class DomainRates:
    """The configured domains' shared rates: `per_minute` by domain (lower case)."""

    def __init__(
        self, db: Database, per_minute: dict[str, float], *, cool_down_seconds: float
    ) -> None:
        self._db = db
        self._per_minute = dict(per_minute)
        self._cool_down = cool_down_seconds

    @property
    def limited(self) -> bool:
        return bool(self._per_minute)

    def limits(self, address: str) -> bool:
        return recipient_domain(address) in self._per_minute

    async def admit(self, addresses: Sequence[str]) -> Admitted:
        """Which of `addresses` may be handed over now (in their order); the others wait."""
        by_domain: dict[str, list[str]] = defaultdict(list)
        for address in addresses:
            domain = recipient_domain(address)
            if domain in self._per_minute:
                by_domain[domain].append(address)
        if not by_domain:
            return Admitted(tuple(addresses), (), 0.0)
        held: set[str] = set()
        waits: list[float] = []
        for domain, wanted in sorted(by_domain.items()):
            async with self._db.write() as conn:
                taken = await rows.take_permits(
                    conn,
                    domain,
                    per_minute=self._per_minute[domain],
                    cool_down=self._cool_down,
                    wanted=len(wanted),
                )
            if taken.permits < len(wanted):
                held.update(wanted[taken.permits :])
                waits.append(taken.wait_seconds)
        return Admitted(
            tuple(a for a in addresses if a not in held),
            tuple(a for a in addresses if a in held),
            min(waits, default=0.0),
        )

    async def deferred(self, address: str, status: int | None) -> bool:
        """A recipient's 421/451: slow its domain down (if it is a limited one). Returns
        whether it did."""
        domain = recipient_domain(address)
        if status not in DEFERRAL_STATUSES or domain not in self._per_minute:
            return False
        async with self._db.write() as conn:
            slower = await rows.slow_down(conn, domain, cool_down=self._cool_down)
        log.warning("domain_rate.slowed", domain=domain, halvings=slower.halvings)
        return True
