"""Checks before sending (CMP-8): what tidings warns about on the editor page, in
`tidings campaign check` and on the send confirmation. Warnings, never refusals: where a rule
elsewhere refuses (real mail with the placeholder identity, SND-1), that rule still does. Pure:
no clock, no I/O."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any

# Gmail clips a message whose HTML is over about 102 KB: the rest, the unsubscribe link
# included, hides behind "View entire message". Warned a little before that.
CLIP_BYTES = 100 * 1024
# What most mail clients show of a subject (mobile shows less) and of a preheader after it.
SUBJECT_DISPLAY = 60
PREHEADER_DISPLAY = 100


class CheckCode(StrEnum):
    CLIPPED = "html_clipped"
    IMAGE_WITHOUT_ALT = "image_without_alt"
    INSECURE_LINK = "insecure_link"
    INSECURE_IMAGE = "insecure_image"
    NO_FALLBACK = "merge_tag_without_fallback"
    LONG_SUBJECT = "subject_long"
    LONG_PREHEADER = "preheader_long"
    NO_POSTAL_ADDRESS = "postal_address_missing"
    NO_UNSUBSCRIBE = "unsubscribe_link_missing"


@dataclass(frozen=True, slots=True)
class Finding:
    """One warning: what, where (the segments whose version it concerns; none: the whole
    campaign), and for a merge tag how many recipients it concerns."""

    code: CheckCode
    message: str
    segments: tuple[str, ...] = ()
    count: int | None = None

    def public(self) -> dict[str, Any]:
        return {
            "code": self.code.value,
            "message": self.message,
            "segments": list(self.segments),
            "count": self.count,
        }


def merged(findings: list[Finding]) -> list[Finding]:
    """One finding for the same warning about several segments (content they share), in the
    order first found, its segments in the order found."""
    order: dict[tuple[CheckCode, str, int | None], list[str]] = {}
    for finding in findings:
        order.setdefault((finding.code, finding.message, finding.count), []).extend(
            segment for segment in finding.segments
        )
    return [
        Finding(code, message, tuple(dict.fromkeys(segments)), count)
        for (code, message, count), segments in order.items()
    ]


@dataclass(frozen=True, slots=True)
class CheckReport:
    campaign_id: int
    findings: tuple[Finding, ...]

    def public(self) -> dict[str, Any]:
        """As `campaign check --json` and `GET /api/admin/campaigns/{id}/checks` show it."""
        return {
            "campaign_id": self.campaign_id,
            "warnings": [finding.public() for finding in self.findings],
        }


def header_findings(subject: str, preheader: str, *, variant: str | None = None) -> list[Finding]:
    """A subject or preheader longer than clients show (per A/B variant when `variant`)."""
    where = "" if variant is None else f" (variant {variant})"
    found = []
    if len(subject) > SUBJECT_DISPLAY:
        found.append(
            Finding(
                CheckCode.LONG_SUBJECT,
                f"The subject{where} is {len(subject)} characters: most inboxes show about "
                f"{SUBJECT_DISPLAY} (phones fewer), so the end will be cut off.",
            )
        )
    if len(preheader) > PREHEADER_DISPLAY:
        found.append(
            Finding(
                CheckCode.LONG_PREHEADER,
                f"The preheader{where} is {len(preheader)} characters: inboxes show about "
                f"{PREHEADER_DISPLAY} after the subject at most.",
            )
        )
    return found


def clip_warning(size: int) -> str | None:
    """The warning for HTML of `size` bytes, when Gmail would clip it (None otherwise)."""
    if size <= CLIP_BYTES:
        return None
    return (
        f"The HTML is {size / 1024:.0f} KB; Gmail clips messages over about 102 KB, hiding "
        "the rest of the message and its unsubscribe link."
    )


def size_finding(segment: str, size: int) -> Finding | None:
    warning = clip_warning(size)
    return None if warning is None else Finding(CheckCode.CLIPPED, warning, segments=(segment,))


def lacking_finding(segments: tuple[str, ...], tag: str, count: int) -> Finding | None:
    """A merge tag with no fallback, and how many recipients of the segments using it lack
    its value (they would see nothing in its place)."""
    if count == 0:
        return None
    people = "recipient" if count == 1 else "recipients"
    return Finding(
        CheckCode.NO_FALLBACK,
        f"{{{{ {tag} }}}} has no fallback and {count} {people} have no value for it: they "
        f'see nothing there. Add one, e.g. {{{{ {tag} | fallback: "reader" }}}}.',
        segments=segments,
        count=count,
    )
