"""Telling machines' hits from people's by who asks (ENG-4): rules as data, matched purely.

A rule names a coarse client family (what is stored: never the user agent, never the address),
a verdict and a reason, and what it matches: parts of the user agent, exact user agents,
published address ranges, the kinds of hit it applies to. All the conditions a rule gives must
hold; the first rule that matches decides. Each rule carries examples of a hit it catches and
a human hit it leaves alone, so the data tests itself (tests/unit/test_machine_rules.py).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tidings.domain.tracking import HitKind, Verdict

Network = ipaddress.IPv4Network | ipaddress.IPv6Network
Address = ipaddress.IPv4Address | ipaddress.IPv6Address


@dataclass(frozen=True, slots=True)
class Classification:
    """What is stored about who made a hit: the verdict, why, and a coarse client family."""

    verdict: Verdict
    reason: str
    family: str


@dataclass(frozen=True, slots=True)
class Example:
    """A hit as the rules see it, from the data file's `catches` and `leaves` lists."""

    user_agent: str
    address: str = "192.0.2.10"
    kind: HitKind = HitKind.CLICK


@dataclass(frozen=True, slots=True)
class MachineRule:
    name: str
    family: str
    verdict: Verdict
    reason: str
    user_agent_contains: tuple[str, ...] = ()  # lower case: matched against the lowered agent
    user_agent_equals: tuple[str, ...] = ()
    networks: tuple[Network, ...] = ()
    kinds: frozenset[HitKind] = frozenset(HitKind)
    catches: tuple[Example, ...] = ()
    leaves: tuple[Example, ...] = ()

    def matches(self, agent: str, lowered: str, address: Address | None, kind: HitKind) -> bool:
        """Whether the rule holds for a hit (`lowered`: the agent in lower case, once)."""
        if kind not in self.kinds:
            return False
        named = self.user_agent_contains or self.user_agent_equals
        if named and agent not in self.user_agent_equals and not _contains(lowered, self):
            return False
        if self.networks:
            return address is not None and any(address in network for network in self.networks)
        return True


def _contains(lowered: str, rule: MachineRule) -> bool:
    return any(part in lowered for part in rule.user_agent_contains)


def parse_address(text: str) -> Address | None:
    """The client's address, or None when it is missing or not an address."""
    try:
        return ipaddress.ip_address(text)
    except ValueError:
        return None


class MachineRules:
    """The ordered rules and what applies when none matches (a browser or an unknown client,
    taken as a person's)."""

    def __init__(self, rules: Sequence[MachineRule]) -> None:
        self.rules = tuple(rules)

    def classify(self, user_agent: str, address: Address | None, kind: HitKind) -> Classification:
        lowered = user_agent.lower()
        for rule in self.rules:
            if rule.matches(user_agent, lowered, address, kind):
                return Classification(rule.verdict, rule.reason, rule.family)
        family = "browser" if lowered.startswith("mozilla/") else "unknown"
        return Classification(Verdict.HUMAN, family, family)

    def classify_example(self, example: Example) -> Classification:
        return self.classify(example.user_agent, parse_address(example.address), example.kind)


def _examples(items: Sequence[Mapping[str, Any]]) -> tuple[Example, ...]:
    return tuple(
        Example(
            user_agent=str(item.get("user_agent", "")),
            address=str(item.get("address", "192.0.2.10")),
            kind=HitKind(item.get("kind", "click")),
        )
        for item in items
    )


def parse_rules(data: Mapping[str, Any]) -> MachineRules:
    """The rules of a parsed data file (`[[rule]]` tables); raises ValueError naming the rule
    whose field is wrong."""
    rules = []
    for index, item in enumerate(data.get("rule", [])):
        name = str(item.get("name", f"rule {index + 1}"))
        try:
            rules.append(
                MachineRule(
                    name=name,
                    family=str(item["family"]),
                    verdict=Verdict(item.get("verdict", "machine")),
                    reason=str(item["reason"]),
                    user_agent_contains=tuple(
                        str(part).lower() for part in item.get("user_agent_contains", [])
                    ),
                    user_agent_equals=tuple(str(a) for a in item.get("user_agent_equals", [])),
                    networks=tuple(
                        ipaddress.ip_network(str(n), strict=False) for n in item.get("networks", [])
                    ),
                    kinds=frozenset(HitKind(k) for k in item.get("kinds", list(HitKind))),
                    catches=_examples(item.get("catches", [])),
                    leaves=_examples(item.get("leaves", [])),
                )
            )
        except (KeyError, ValueError) as exc:
            raise ValueError(f"machine rule {name!r}: {exc}") from None
    return MachineRules(rules)
