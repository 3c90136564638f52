"""A/B tests of a campaign (SPEC ENG-8): the test's shape, who gets which variant, and the
two-proportion test that picks the winner. Pure: keys and counts in, decisions out.

Variant 1 is the campaign's own subject (or preheader, or sender name), the operator's
default; variants 2..4 are the alternatives. A test recipient's batches carry the segment
`<tier>-v<n>`, so every per-segment figure (sent, opens, clicks; in `aggregate` mode too) is
a per-variant figure; the remainder keeps the plain tier and goes out with the winner.
"""

from __future__ import annotations

import hashlib
import hmac
import math
import re
from dataclasses import dataclass
from datetime import timedelta
from enum import StrEnum
from statistics import NormalDist

from tidings.domain.errors import InvalidInput

MIN_VARIANTS, MAX_VARIANTS = 2, 4
MIN_SHARE, MAX_SHARE = 1, 90  # percent of the audience in the test
MAX_WAIT = timedelta(days=7)
# A prime just over a million: buckets fine enough for any share, small enough that every
# step of the assignment hash (below P squared) stays a 64-bit integer in SQL.
HASH_MODULUS = 1_000_003
HASH_DEGREE = 7
_SEGMENT = re.compile(r"(.+)-v([1-9])")
_DURATION = re.compile(r"\s*([0-9]+(?:\.[0-9]+)?)\s*([smhd]?)\s*")
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "": 3600}
LETTERS = "ABCD"


class AbField(StrEnum):
    SUBJECT = "subject"
    PREHEADER = "preheader"
    SENDER_NAME = "sender_name"


class AbMetric(StrEnum):
    CLICKS = "clicks"  # human unique clicks
    OPENS = "opens"  # human unique opens


@dataclass(frozen=True, slots=True)
class AbTest:
    """What the operator asked for: `alternatives` are variants 2.. of `field`."""

    field: AbField
    alternatives: tuple[str, ...]
    test_share: int  # percent of the audience
    wait: timedelta
    metric: AbMetric

    @property
    def variant_count(self) -> int:
        return 1 + len(self.alternatives)

    def value(self, variant: int, default: str | None) -> str | None:
        """The field's value in `variant` (1 is the campaign's own, `default`)."""
        return default if variant == 1 else self.alternatives[variant - 2]

    def check(self) -> None:
        """Raise InvalidInput naming the field that is out of bounds."""
        if not MIN_VARIANTS <= self.variant_count <= MAX_VARIANTS:
            raise InvalidInput(
                f"an A/B test has {MIN_VARIANTS} to {MAX_VARIANTS} variants: the campaign's "
                f"own {self.field} and 1 to {MAX_VARIANTS - 1} alternatives",
                field="variants",
            )
        if any(not value.strip() for value in self.alternatives):
            raise InvalidInput("a variant cannot be empty", field="variants")
        if not MIN_SHARE <= self.test_share <= MAX_SHARE:
            raise InvalidInput(
                f"test_share is a percentage from {MIN_SHARE} to {MAX_SHARE}", field="test_share"
            )
        if not timedelta(seconds=1) <= self.wait <= MAX_WAIT:
            raise InvalidInput("test_wait is from 1 second to 7 days", field="test_wait")


def parse_wait(text: str) -> timedelta:
    """`4h`, `90m`, `30s`, `1d` or a bare number of hours."""
    match = _DURATION.fullmatch(text)
    if match is None:
        raise InvalidInput(f"{text!r} is not a duration (e.g. 4h, 90m, 1d)", field="test_wait")
    return timedelta(seconds=float(match[1]) * _UNITS[match[2]])


def letter(variant: int) -> str:
    return LETTERS[variant - 1]


def parse_variant(text: str, count: int) -> int:
    """`B`, `b` or `2` -> 2, within the test's variants."""
    cleaned = text.strip().upper()
    number = LETTERS.index(cleaned) + 1 if len(cleaned) == 1 and cleaned in LETTERS else None
    if number is None and cleaned.isdigit():
        number = int(cleaned)
    if number is None or not 1 <= number <= count:
        raise InvalidInput(
            f"variant is one of {', '.join(LETTERS[:count])} (or 1 to {count})", field="variant"
        )
    return number


# -- segments ---------------------------------------------------------------------------


def variant_segment(tier: str, variant: int) -> str:
    return f"{tier}-v{variant}"


def split_segment(segment: str) -> tuple[str, int | None]:
    """A batch's segment as (tier, variant): variant None for the remainder (or no test)."""
    match = _SEGMENT.fullmatch(segment)
    if match is None:
        return segment, None
    return match[1], int(match[2])


def segment_order(tiers: tuple[str, ...], variant_count: int) -> tuple[str, ...]:
    """Every segment of a test, in candidate order: per tier its variants, then the rest."""
    return tuple(
        name
        for tier in tiers
        for name in (*(variant_segment(tier, n) for n in range(1, variant_count + 1)), tier)
    )


# -- assignment -------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class AssignmentKey:
    """A keyed hash of (campaign, subscriber): a polynomial of degree 7 in (id mod P) over
    the integers mod P, its coefficients from an HMAC of the campaign under the site secret.
    Such polynomials are an 8-wise independent family: subscriber ids in any pattern (a tier
    of every other id, a run of imports) split like independent draws, which a linear hash
    does not promise. Same key on every attempt (no reshuffle on a retry), and nobody
    outside can predict it. Horner's rule keeps every step below P squared (int64 in SQL)."""

    coefficients: tuple[int, ...]  # highest degree first

    def bucket(self, subscriber_id: int) -> int:
        x = subscriber_id % HASH_MODULUS
        value = 0
        for coefficient in self.coefficients:
            value = (value * x + coefficient) % HASH_MODULUS
        return value


def assignment_key(secret: str, campaign_id: int) -> AssignmentKey:
    digest = hmac.new(
        b"tidings-ab:" + secret.encode(), f"campaign:{campaign_id}".encode(), hashlib.sha512
    ).digest()
    return AssignmentKey(
        tuple(
            int.from_bytes(digest[at : at + 8]) % HASH_MODULUS
            for at in range(0, HASH_DEGREE * 8 + 8, 8)
        )
    )


def share_cutoff(test_share: int) -> int:
    """Buckets below this are in the test."""
    return HASH_MODULUS * test_share // 100


def variant_of(bucket: int, test_share: int, variant_count: int) -> int | None:
    """The variant (1..n) of a test recipient, None for the remainder. The SQL selection
    computes the same from the same bucket (`storage.ab_tests.variant_expression`)."""
    cutoff = share_cutoff(test_share)
    if bucket >= cutoff:
        return None
    return bucket * variant_count // cutoff + 1


# -- the decision -----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class VariantFigures:
    variant: int
    sent: int
    opens: int  # people's unique opens
    clicks: int  # people's unique clicks


@dataclass(frozen=True, slots=True)
class VariantResult:
    variant: int
    sent: int
    opens: int
    clicks: int
    rate: float  # the metric's successes / sent
    z: float | None  # against variant 1; None for variant 1 itself
    p: float | None


@dataclass(frozen=True, slots=True)
class Decision:
    winner: int
    significant: bool  # False: nothing cleared the confidence, the default won
    confidence: float
    metric: AbMetric
    results: tuple[VariantResult, ...]


def two_proportion(
    successes_a: int, trials_a: int, successes_b: int, trials_b: int
) -> tuple[float, float]:
    """(z, two-sided p) of b's rate against a's, pooled standard error. No trials, or no
    variance at all (both 0% or both 100%): z 0, p 1 — nothing is shown."""
    if trials_a <= 0 or trials_b <= 0:
        return 0.0, 1.0
    pooled = (successes_a + successes_b) / (trials_a + trials_b)
    error = math.sqrt(pooled * (1 - pooled) * (1 / trials_a + 1 / trials_b))
    if error == 0:
        return 0.0, 1.0
    z = (successes_b / trials_b - successes_a / trials_a) / error
    return z, 2 * (1 - NormalDist().cdf(abs(z)))


def decide(figures: list[VariantFigures], metric: AbMetric, confidence: float) -> Decision:
    """Each alternative against variant 1 by a two-proportion z-test. An alternative clears
    the bar when its rate is higher and p < (1 - confidence) / (alternatives): Bonferroni, so
    testing three alternatives is no likelier to crown a fluke than testing one. Of those
    that clear, the highest rate wins (the lower number on a tie); if none does, variant 1."""
    ordered = sorted(figures, key=lambda f: f.variant)
    if not ordered or ordered[0].variant != 1:
        raise ValueError("figures must include variant 1")

    def successes(f: VariantFigures) -> int:
        return f.clicks if metric is AbMetric.CLICKS else f.opens

    base = ordered[0]
    alpha = (1 - confidence) / max(1, len(ordered) - 1)
    results: list[VariantResult] = []
    cleared: list[VariantResult] = []
    for f in ordered:
        rate = successes(f) / f.sent if f.sent else 0.0
        z = p = None
        if f is not base:
            z, p = two_proportion(successes(base), base.sent, successes(f), f.sent)
        result = VariantResult(f.variant, f.sent, f.opens, f.clicks, round(rate, 6), z, p)
        results.append(result)
        if z is not None and p is not None and z > 0 and p < alpha:
            cleared.append(result)
    if cleared:
        best = max(cleared, key=lambda r: (r.rate, -r.variant))
        return Decision(best.variant, True, confidence, metric, tuple(results))
    return Decision(1, False, confidence, metric, tuple(results))


def build_test(
    variants: dict[str, list[str]],
    *,
    test_share: int,
    test_wait: str | timedelta,
    metric: str,
) -> AbTest | None:
    """The test the CLI, the API and the editor ask for: alternatives of one field (none
    given: no test), checked. `variants` maps a field name to its alternatives."""
    given = {name: values for name, values in variants.items() if values}
    if not given:
        return None
    if len(given) > 1:
        raise InvalidInput(
            "an A/B test varies one field: the subject, the preheader or the sender name",
            field="variants",
        )
    ((name, alternatives),) = given.items()
    try:
        field, chosen = AbField(name), AbMetric(metric)
    except ValueError:
        raise InvalidInput(
            f"test_metric is one of {', '.join(m.value for m in AbMetric)}", field="test_metric"
        ) from None
    wait = parse_wait(test_wait) if isinstance(test_wait, str) else test_wait
    test = AbTest(field, tuple(alternatives), test_share, wait, chosen)
    test.check()
    return test
