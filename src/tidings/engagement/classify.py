"""Human or machine, decided as a hit arrives (ENG-4): the shipped rules, then behaviour.

The rules (`machine_rules.toml`, data) look at the user agent and the address; behaviour adds
HEAD requests, a hit within `tracking.machine_window_seconds` of hand-over, the hidden link and
a source's flood. "Every link of a message at once" needs the message's other hits, so the
applier decides it (engagement/apply.py), whatever order they arrived in. Neither the address
nor the user agent leaves this module: only the verdict, its reason and a coarse family.
"""

from __future__ import annotations

import tomllib
from datetime import datetime
from importlib import resources

from tidings.domain.machine_rules import Address, Classification, MachineRules, parse_rules
from tidings.domain.tracking import HitKind, Verdict

RULES_FILE = "machine_rules.toml"
# A source this many times over its limit is not recorded at all (still answered): bounded work.
IGNORED_FLOOD_FACTOR = 10
# Sources remembered per minute; past it, new sources are not counted (memory stays bounded).
MAX_SOURCES = 200_000


def shipped_rules() -> MachineRules:
    """The rules shipped in the package (read once per process by the composition root)."""
    text = resources.files("tidings.engagement").joinpath(RULES_FILE).read_text("utf-8")
    return parse_rules(tomllib.loads(text))


class SourceCounter:
    """Hits per network source (an IPv4 /24, an IPv6 /48) in the current minute, in memory.
    Keyed by Python's per-process salted hash of the network, so no address is kept."""

    def __init__(self) -> None:
        self._minute = -1
        self._counts: dict[int, int] = {}

    def add(self, address: Address | None, now: float) -> int:
        """Count one hit from `address` at `now` (seconds); its source's hits this minute."""
        if address is None:
            return 0
        minute = int(now // 60)
        if minute != self._minute:
            self._minute, self._counts = minute, {}
        packed = address.packed
        key = hash(packed[:3] if len(packed) == 4 else packed[:6])
        count = self._counts.get(key, 0) + 1
        if count > 1 or len(self._counts) < MAX_SOURCES:
            self._counts[key] = count
        return count


class Classifier:
    """Classifies one hit; `None` means a source so far over its limit that the hit is not
    recorded (its answer still goes out)."""

    def __init__(
        self,
        rules: MachineRules,
        *,
        machine_window_seconds: float,
        source_hits_per_minute: int,
    ) -> None:
        self._rules = rules
        self._window = machine_window_seconds
        self._limit = source_hits_per_minute
        self._sources = SourceCounter()

    def classify(
        self,
        *,
        kind: HitKind,
        method: str,
        user_agent: str,
        address: Address | None,
        hidden: bool,
        sent_at: datetime,
        now: datetime,
    ) -> Classification | None:
        from_source = self._sources.add(address, now.timestamp())
        if from_source > self._limit * IGNORED_FLOOD_FACTOR:
            return None
        found = self._rules.classify(user_agent, address, kind)
        if found.verdict is Verdict.MACHINE:
            return found
        reason = _behaviour(method, hidden, (now - sent_at).total_seconds() < self._window)
        if reason is None and from_source > self._limit:
            reason = "flood"
        return found if reason is None else Classification(Verdict.MACHINE, reason, found.family)


def _behaviour(method: str, hidden: bool, early: bool) -> str | None:
    if method == "HEAD":
        return "head"
    if hidden:
        return "hidden_link"
    if early:
        return "early"
    return None
