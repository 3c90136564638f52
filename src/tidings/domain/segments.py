"""Campaign audience filters over tier and labels (AUD-11). Pure.

Grammar: clauses separated by `,` (any clause may match), terms inside a clause joined by `+`
(all must match), a term is `tier:NAME` or `label:NAME`, and `!` before a term negates it.
Examples: `tier:paid`, `label:beta`, `tier:free+label:beta`, `!label:press`,
`tier:paid,tier:comped`. An empty filter selects the whole newsletter.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from tidings.domain.audience import Tier
from tidings.domain.errors import InvalidInput

MAX_FILTER_LENGTH = 500
_TERM = re.compile(r"^(!?)(tier|label):([a-z0-9_-]{1,64})$")
TIERS = tuple(tier.value for tier in Tier)


@dataclass(frozen=True, slots=True)
class Term:
    kind: str  # "tier" or "label"
    value: str
    negated: bool = False


@dataclass(frozen=True, slots=True)
class AudienceFilter:
    clauses: tuple[tuple[Term, ...], ...]  # OR of ANDs; empty = everyone

    def matches(self, tier: str, labels: frozenset[str]) -> bool:
        """The filter applied to one subscriber (the same rule the SQL form expresses)."""
        if not self.clauses:
            return True
        return any(
            all(_term_matches(term, tier, labels) for term in clause) for clause in self.clauses
        )

    def tiers(self) -> tuple[str, ...]:
        """The tiers (segments) this filter can select, in canonical order. Labels are
        unknown here, so a label term is taken as satisfiable."""
        return tuple(tier for tier in TIERS if self._can_reach(tier))

    def _can_reach(self, tier: str) -> bool:
        if not self.clauses:
            return True
        return any(
            all(_term_matches(term, tier, None) for term in clause) for clause in self.clauses
        )

    def __str__(self) -> str:
        return ",".join(
            "+".join(f"{'!' if t.negated else ''}{t.kind}:{t.value}" for t in clause)
            for clause in self.clauses
        )


def _term_matches(term: Term, tier: str, labels: frozenset[str] | None) -> bool:
    if term.kind == "tier":
        hit = tier == term.value
    else:
        if labels is None:  # labels unknown: a label term could go either way
            return True
        hit = term.value in labels
    return hit != term.negated


def parse_filter(text: str | None, *, field: str = "audience_filter") -> AudienceFilter:
    """Parse and validate; a malformed filter is an `InvalidInput` naming the bad term."""
    text = (text or "").strip()
    if not text:
        return AudienceFilter(clauses=())
    if len(text) > MAX_FILTER_LENGTH:
        raise InvalidInput(f"{field} must be at most {MAX_FILTER_LENGTH} characters", field=field)
    clauses = []
    for raw_clause in text.split(","):
        terms = []
        for raw_term in raw_clause.split("+"):
            candidate = raw_term.strip().lower()
            match = _TERM.match(candidate)
            if match is None:
                raise InvalidInput(
                    f"{field}: {raw_term.strip()!r} is not a term like tier:paid, label:beta "
                    "or !label:beta (join with + for AND, , for OR)",
                    field=field,
                )
            negated, kind, value = match.groups()
            if kind == "tier" and value not in TIERS:
                raise InvalidInput(f"{field}: tier must be one of {', '.join(TIERS)}", field=field)
            terms.append(Term(kind=kind, value=value, negated=bool(negated)))
        clauses.append(tuple(terms))
    return AudienceFilter(clauses=tuple(clauses))
