"""Send again (ENG-7): who a campaign made from a sent one's recipients is for, why people
were left out, and when an origin cannot answer the question asked. Pure: no clock, no I/O."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any

from tidings.domain.errors import Conflict, InvalidInput
from tidings.domain.tracking import TrackingMode


class ResendAudience(StrEnum):
    """Which of the origin's recipients the new campaign is for."""

    NOT_OPENED = "not_opened"  # got it, tracked per person, no human open (nor click)
    NOT_CLICKED = "not_clicked"  # got it, tracked per person, no human click
    NOT_DELIVERED = "not_delivered"  # failed, cancelled, bounced, or not reported delivered
    ALL = "all"  # everyone who got it (handed over, not bounced)

    @property
    def needs_hits(self) -> bool:
        """Whether the answer depends on a person's own opens or clicks (per_person data)."""
        return self in (ResendAudience.NOT_OPENED, ResendAudience.NOT_CLICKED)

    @property
    def label(self) -> str:
        return {
            ResendAudience.NOT_OPENED: "those who did not open",
            ResendAudience.NOT_CLICKED: "those who did not click",
            ResendAudience.NOT_DELIVERED: "those it was not delivered to",
            ResendAudience.ALL: "all who got it",
        }[self]


class LeftOut(StrEnum):
    """Why a recipient the rule would have chosen is not in the new audience."""

    NOT_MAILABLE = "not_mailable"  # unsubscribed, suppressed, or deleted since (AUD-4)
    NOT_TRACKED = "not_tracked"  # no tracking consent when it was sent: their opens are unknown
    HITS_PURGED = "hits_purged"  # sent before tracking.retention_days: hits may be gone
    OUTCOME_UNKNOWN = "outcome_unknown"  # handed over with no answer (uncertain)


LEFT_OUT_TEXT = {
    LeftOut.NOT_MAILABLE: "no longer mailable (unsubscribed, suppressed or deleted)",
    LeftOut.NOT_TRACKED: "not tracked per person when it was sent, so whether they opened is "
    "unknown",
    LeftOut.HITS_PURGED: "their opens and clicks may have been deleted by tracking.retention_days",
    LeftOut.OUTCOME_UNKNOWN: "handed over with no answer from the provider (uncertain)",
}


class SendAgainRefused(Conflict):
    """The origin cannot be sent again this way (not sent, or no per-person data)."""

    code = "send_again_refused"
    title = "This campaign cannot be sent again this way"


def parse_audience(value: str) -> ResendAudience:
    """`not_opened`, `not-opened` and the like as a ResendAudience; InvalidInput otherwise."""
    try:
        return ResendAudience(value.strip().lower().replace("-", "_"))
    except ValueError:
        names = ", ".join(member.value for member in ResendAudience)
        raise InvalidInput(f"audience must be one of {names}", field="audience") from None


def check_origin(
    audience: ResendAudience,
    *,
    campaign_id: int,
    status: str,
    sent: bool,
    tracking: str,
    tracked: bool = True,
    sent_under: str | None = None,
) -> None:
    """Refuse, naming why, an origin that was never sent, or — when opens or clicks are asked
    about — one not sent under per-person tracking (`sent_under`, the mode frozen with its
    snapshot; None for a send prepared before it was recorded), one that went out untracked,
    or one whose newsletter no longer tracks per person (`tracking`, now: hits are recorded
    per person only while it does). Aggregate counts say how many opened, never who, and
    guessing would mail people who did open."""
    if not sent:
        raise SendAgainRefused(
            f"campaign {campaign_id} is {status}: only a campaign that was sent can be sent "
            "again to its recipients"
        )
    if audience.needs_hits and sent_under is not None and sent_under != TrackingMode.PER_PERSON:
        raise SendAgainRefused(
            f"sending again to {audience.label} needs each person's opens and clicks, and "
            f"campaign {campaign_id} was sent while its newsletter tracked {sent_under!r}: its "
            "messages named nobody, so who opened it is unknown, whatever the newsletter tracks "
            "now (use --not-delivered or --all instead)"
        )
    if audience.needs_hits and tracking != TrackingMode.PER_PERSON:
        raise SendAgainRefused(
            f"sending again to {audience.label} needs each person's opens and clicks, and "
            f"campaign {campaign_id}'s newsletter tracks {tracking!r}: only a newsletter that "
            "tracks per_person knows who opened (use --not-delivered or --all instead)"
        )
    if audience.needs_hits and not tracked:
        raise SendAgainRefused(
            f"campaign {campaign_id} was sent without tracking (no open pixel, no tracked "
            f"link), so nobody's opens or clicks of it are known: {audience.label} cannot be "
            "told apart (use --not-delivered or --all instead)"
        )


def hits_may_be_purged(sent_at: datetime, retention_cutoff: datetime) -> bool:
    """Whether the retention purge (hits older than the cutoff) can have reached this send's
    hits: every hit of a send comes after it began."""
    return sent_at < retention_cutoff


@dataclass(frozen=True, slots=True)
class ResendLink:
    """A campaign made by send again, and what it was made from."""

    campaign_id: int
    origin_id: int
    audience: ResendAudience
    chosen_count: int
    left_out: dict[str, int]
    created_at: datetime

    def audit(self) -> tuple[str, str, dict[str, Any]]:
        """The audit log's action, target and detail for making it (API, UI and CLI alike)."""
        detail = {
            "origin": self.origin_id,
            "audience": self.audience.value,
            "audience_count": self.chosen_count,
            "left_out": dict(self.left_out),
        }
        return "campaign.send_again", f"campaign:{self.campaign_id}", detail

    @property
    def left_out_count(self) -> int:
        return sum(self.left_out.values())

    def left_out_lines(self) -> list[str]:
        """One line per reason, e.g. `3 not tracked per person when it was sent, ...`."""
        return [
            f"{count} {LEFT_OUT_TEXT[LeftOut(reason)]}"
            for reason, count in sorted(self.left_out.items())
            if count
        ]
