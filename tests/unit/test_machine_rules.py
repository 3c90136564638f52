"""The machine rules shipped as data, and the behaviour rules beside them (ENG-4)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from tidings.domain.machine_rules import MachineRule, parse_address, parse_rules
from tidings.domain.tracking import HitKind, Verdict
from tidings.engagement.classify import IGNORED_FLOOD_FACTOR, Classifier, shipped_rules

RULES = shipped_rules()
SENT = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
LATER = SENT + timedelta(hours=2)
BROWSER = "Mozilla/5.0 (X11; Linux x86_64; rv:124.0) Gecko/20100101 Firefox/124.0"


def _named(rule: MachineRule) -> str:
    return rule.name


@pytest.mark.parametrize("rule", RULES.rules, ids=_named)
def test_each_shipped_rule_catches_its_example_and_leaves_a_person_alone(
    rule: MachineRule,
) -> None:
    """A rule that catches nothing, or catches people, would quietly skew every campaign's
    human counts: each rule proves both sides with the examples it ships with."""
    assert rule.catches, f"{rule.name}: needs a hit it catches"
    assert rule.leaves, f"{rule.name}: needs a person's hit it leaves alone"
    for example in rule.catches:
        found = RULES.classify_example(example)
        assert (found.verdict, found.reason, found.family) == (
            rule.verdict,
            rule.reason,
            rule.family,
        ), example
    for example in rule.leaves:
        address = parse_address(example.address)
        lowered = example.user_agent.lower()
        assert not rule.matches(example.user_agent, lowered, address, example.kind), example
        assert RULES.classify_example(example).verdict is Verdict.HUMAN, example


def test_gmail_image_proxy_opens_count_as_a_persons() -> None:
    """Gmail fetches through its proxy only when someone opens the message: those are real
    opens, and calling them machine would hide most Gmail readers."""
    agent = (
        "Mozilla/5.0 (Windows NT 5.1; rv:11.0) Gecko Firefox/11.0 (via ggpht.com GoogleImageProxy)"
    )
    found = RULES.classify(agent, parse_address("66.249.84.1"), HitKind.OPEN)
    assert (found.verdict, found.family) == (Verdict.HUMAN, "gmail_proxy")


def test_apple_privacy_proxy_needs_both_its_agent_and_its_ranges() -> None:
    """Apple's proxy is known by the bare agent from Apple's egress ranges; the same agent
    elsewhere is someone else, and a full iPhone agent from a relay address is a person."""
    apple = parse_address("17.58.0.1")
    assert RULES.classify("Mozilla/5.0", apple, HitKind.OPEN).reason == "privacy_proxy"
    assert RULES.classify("Mozilla/5.0", apple, HitKind.CLICK).verdict is Verdict.HUMAN
    assert RULES.classify("Mozilla/5.0", parse_address("192.0.2.1"), HitKind.OPEN).verdict is (
        Verdict.HUMAN
    )


def test_a_broken_rule_file_names_the_rule() -> None:
    """The rules are updated without code: a mistake must say where it is, not crash later."""
    with pytest.raises(ValueError, match="'Bad ranges'"):
        parse_rules(
            {"rule": [{"name": "Bad ranges", "family": "x", "reason": "y", "networks": ["nope"]}]}
        )


def _classifier(limit: int = 10) -> Classifier:
    return Classifier(RULES, machine_window_seconds=10, source_hits_per_minute=limit)


def _hit(classifier: Classifier, **changes: object) -> tuple[str, str] | None:
    hit: dict[str, object] = {
        "kind": HitKind.CLICK,
        "method": "GET",
        "user_agent": BROWSER,
        "address": parse_address("203.0.113.7"),
        "hidden": False,
        "sent_at": SENT,
        "now": LATER,
    }
    hit.update(changes)
    found = classifier.classify(**hit)  # type: ignore[arg-type]
    return None if found is None else (found.verdict.value, found.reason)


def test_behaviour_makes_a_browser_looking_hit_a_machines() -> None:
    """Scanners borrow browsers' agents; what they do gives them away: HEAD, the hidden link,
    a click seconds after hand-over. A person's ordinary click stays human."""
    assert _hit(_classifier()) == ("human", "browser")
    assert _hit(_classifier(), method="HEAD") == ("machine", "head")
    assert _hit(_classifier(), hidden=True) == ("machine", "hidden_link")
    assert _hit(_classifier(), now=SENT + timedelta(seconds=3)) == ("machine", "early")
    assert _hit(_classifier(), now=SENT + timedelta(seconds=11)) == ("human", "browser")


def test_a_flooding_source_never_hides_another_readers_hit() -> None:
    """One network hammering the links is counted as a machine, then not recorded at all
    past ten times its rate; a reader elsewhere is still a person throughout."""
    classifier = _classifier(limit=10)
    flood = [_hit(classifier, address=parse_address(f"198.51.100.{n % 200}")) for n in range(200)]
    assert flood[:10] == [("human", "browser")] * 10
    assert flood[10] == ("machine", "flood")
    assert flood[10 * IGNORED_FLOOD_FACTOR] is None
    assert _hit(classifier, address=parse_address("203.0.113.9")) == ("human", "browser")
    other_48 = parse_address("2001:db8:2::1")
    assert _hit(classifier, address=other_48) == ("human", "browser")
