"""Campaign audience filters over tier, labels and custom fields (AUD-11, AUD-12). Pure.

Grammar: clauses separated by `,` (any clause may match), terms inside a clause joined by `+`
(all must match), a term is `tier:NAME`, `label:NAME` or `attr:KEY=VALUE`, and `!` before a
term negates it. Examples: `tier:paid`, `label:beta`, `tier:free+label:beta`, `!label:press`,
`tier:paid,tier:comped`, `attr:city=Paris`. An empty filter selects the whole newsletter.

`engaged:DAYS` and `unengaged:DAYS` (ENG-7) judge a person by their own human opens and clicks
of this newsletter's campaigns (machine hits never count) within the last DAYS days. Only a
person tracked per person can be judged, so `unengaged:DAYS` matches only someone who was sent
at least one campaign tracked per person (after their consent) within the window and has no
human hit in it; a person whose engagement is unknown matches neither, and so matches both
negations. DAYS is a whole number from 1 to the hits' retention (`tracking.retention_days`).

`attr:KEY=VALUE` compares the text of the subscriber's attribute KEY with VALUE, exactly
(case matters, as in the data); a number matches its decimal text (`attr:age=42`). A person
without the attribute does not match, so `!attr:city=Paris` includes them.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from tidings.domain.audience import Tier
from tidings.domain.errors import InvalidInput

MAX_FILTER_LENGTH = 500
_TERM = re.compile(r"^(!?)(tier|label):([a-z0-9_-]{1,64})$")
# Attribute keys as the import writes them; values are anything but the grammar's , and +.
_ATTRIBUTE_TERM = re.compile(r"^(!?)attr:([A-Za-z0-9_.-]{1,64})=([^,+]{1,200})$", re.IGNORECASE)
_ENGAGEMENT_TERM = re.compile(r"^(!?)(engaged|unengaged):(.*)$")
ENGAGEMENT_KINDS = ("engaged", "unengaged")
MAX_ENGAGEMENT_DAYS = 3650  # the most `tracking.retention_days` allows
TIERS = tuple(tier.value for tier in Tier)


@dataclass(frozen=True, slots=True)
class Term:
    kind: str  # "tier", "label", "attr", "engaged" or "unengaged"
    value: str
    negated: bool = False
    key: str = ""  # the attribute's name, for "attr"

    def __str__(self) -> str:
        subject = (
            f"attr:{self.key}={self.value}" if self.kind == "attr" else f"{self.kind}:{self.value}"
        )
        return ("!" if self.negated else "") + subject

    @property
    def days(self) -> int:
        """The window of an `engaged`/`unengaged` term, in days."""
        return int(self.value)


@dataclass(frozen=True, slots=True)
class Engagement:
    """What is known of one person's engagement with the newsletter, for `matches`: the times
    of their human hits, and of the campaigns tracked per person sent to them after their
    consent (the sends that could have recorded a hit)."""

    now: datetime
    human_hits: Sequence[datetime] = ()
    tracked_sends: Sequence[datetime] = ()

    def engaged(self, days: int) -> bool:
        since = self.now - timedelta(days=days)
        return any(at >= since for at in self.human_hits)

    def unengaged(self, days: int) -> bool:
        since = self.now - timedelta(days=days)
        return any(at >= since for at in self.tracked_sends) and not self.engaged(days)


@dataclass(frozen=True, slots=True)
class AudienceFilter:
    clauses: tuple[tuple[Term, ...], ...]  # OR of ANDs; empty = everyone

    def matches(
        self,
        tier: str,
        labels: frozenset[str],
        attributes: Mapping[str, object] | None = None,
        engagement: Engagement | None = None,
    ) -> bool:
        """The filter applied to one subscriber (the same rule the SQL form expresses);
        without `engagement`, nothing is known of them: an `engaged`/`unengaged` term fails."""
        if not self.clauses:
            return True
        known = engagement or Engagement(now=datetime.max.replace(tzinfo=UTC))
        return any(
            all(_term_matches(term, tier, labels, attributes or {}, known) for term in clause)
            for clause in self.clauses
        )

    def judges_engagement(self) -> bool:
        """Whether any term asks about engagement (its SQL then needs a time and a
        newsletter)."""
        return any(term.kind in ENGAGEMENT_KINDS for clause in self.clauses for term in clause)

    def tiers(self) -> tuple[str, ...]:
        """The tiers (segments) this filter can select, in canonical order. Labels are
        unknown here, so a label term is taken as satisfiable."""
        return tuple(tier for tier in TIERS if self._can_reach(tier))

    def _can_reach(self, tier: str) -> bool:
        if not self.clauses:
            return True
        return any(
            all(_term_matches(term, tier, None, None, None) for term in clause)
            for clause in self.clauses
        )

    def __str__(self) -> str:
        return ",".join("+".join(str(term) for term in clause) for clause in self.clauses)


def attribute_text(value: object) -> str | None:
    """An attribute's value as a filter compares it: strings as they are, numbers in decimal;
    anything else (true/false, lists, objects, null) matches no `attr:` term."""
    if isinstance(value, bool) or value is None:
        return None
    return str(value) if isinstance(value, str | int | float) else None


def _term_matches(
    term: Term,
    tier: str,
    labels: frozenset[str] | None,
    attributes: Mapping[str, object] | None,
    engagement: Engagement | None,
) -> bool:
    if term.kind == "tier":
        hit = tier == term.value
    elif term.kind in ENGAGEMENT_KINDS:
        if engagement is None:  # unknown here: the term could go either way
            return True
        if term.kind == "engaged":
            hit = engagement.engaged(term.days)
        else:
            hit = engagement.unengaged(term.days)
    elif term.kind == "attr":
        if attributes is None:  # unknown here: the term could go either way
            return True
        hit = attribute_text(attributes.get(term.key)) == term.value
    else:
        if labels is None:  # labels unknown: a label term could go either way
            return True
        hit = term.value in labels
    return hit != term.negated


def parse_filter(
    text: str | None,
    *,
    field: str = "audience_filter",
    max_engagement_days: int = MAX_ENGAGEMENT_DAYS,
) -> AudienceFilter:
    """Parse and validate; a malformed filter is an `InvalidInput` naming the bad term.
    `max_engagement_days` bounds DAYS in `engaged:DAYS`: hits older are deleted, so a longer
    window would promise what the data cannot say."""
    text = (text or "").strip()
    if not text:
        return AudienceFilter(clauses=())
    if len(text) > MAX_FILTER_LENGTH:
        raise InvalidInput(f"{field} must be at most {MAX_FILTER_LENGTH} characters", field=field)
    clauses = []
    for raw_clause in text.split(","):
        terms = []
        for raw_term in raw_clause.split("+"):
            attribute = _ATTRIBUTE_TERM.match(raw_term.strip())
            if attribute is not None:
                negated, key, value = attribute.groups()
                terms.append(Term("attr", value.strip(), bool(negated), key=key))
                continue
            candidate = raw_term.strip().lower()
            engagement = _ENGAGEMENT_TERM.match(candidate)
            if engagement is not None:
                negated, kind, days = engagement.groups()
                terms.append(
                    Term(kind, str(_days(kind, days, field, max_engagement_days)), bool(negated))
                )
                continue
            match = _TERM.match(candidate)
            if match is None:
                raise InvalidInput(
                    f"{field}: {raw_term.strip()!r} is not a term like tier:paid, label:beta, "
                    "attr:city=Paris, engaged:90, unengaged:180 or !label:beta "
                    "(join with + for AND, , for OR)",
                    field=field,
                )
            negated, kind, value = match.groups()
            if kind == "tier" and value not in TIERS:
                raise InvalidInput(f"{field}: tier must be one of {', '.join(TIERS)}", field=field)
            terms.append(Term(kind=kind, value=value, negated=bool(negated)))
        clauses.append(tuple(terms))
    return AudienceFilter(clauses=tuple(clauses))


def _days(kind: str, text: str, field: str, most: int) -> int:
    """DAYS of an engagement term: a whole number from 1 to `most`."""
    if not re.fullmatch(r"[0-9]{1,5}", text) or not 1 <= int(text) <= most:
        raise InvalidInput(
            f"{field}: in {kind}:DAYS, DAYS must be a whole number of days from 1 to {most} "
            f"(opens and clicks are kept {most} days), not {text!r}",
            field=field,
        )
    return int(text)
