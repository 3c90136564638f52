"""The typed commands the draft use cases take (CMP-1): a new draft's fields, and edits."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from tidings.domain.ab_tests import AbTest
from tidings.domain.edits import UNSET, Unset


@dataclass(frozen=True, slots=True)
class DraftFields:
    """A new draft. Checked when saved, so nothing fails later at send time."""

    subject: str
    body: str
    preheader: str = ""
    body_format: Literal["markdown", "html"] = "markdown"
    audience_filter: str = ""
    sender_name: str | None = None
    reply_to: str | None = None
    scheduled_at: datetime | None = None
    # In the public archive (API-4); None: public only when the audience filter is empty.
    archive_public: bool | None = None
    ab: AbTest | None = None  # an A/B test of subject, preheader or sender name (ENG-8)

    def values(self) -> dict[str, Any]:
        """The campaign's own columns (the A/B test is stored beside them)."""
        return {
            field.name: getattr(self, field.name)
            for field in dataclasses.fields(self)
            if field.name != "ab"
        }


@dataclass(frozen=True, slots=True)
class DraftChanges:
    """Edits to a draft: an UNSET field keeps its value, None clears an optional one (and is
    refused for a required one)."""

    subject: str | Unset | None = UNSET
    body: str | Unset | None = UNSET
    preheader: str | Unset | None = UNSET
    body_format: Literal["markdown", "html"] | Unset | None = UNSET
    audience_filter: str | Unset | None = UNSET
    sender_name: str | Unset | None = UNSET
    reply_to: str | Unset | None = UNSET
    scheduled_at: datetime | Unset | None = UNSET
    # Editable in any state; left unset, a new audience filter decides it again.
    archive_public: bool | Unset | None = UNSET
    ab: AbTest | Unset | None = UNSET  # None removes the test

    def values(self) -> dict[str, Any]:
        """Only the fields the edit sets, of the campaign's own columns."""
        return {
            field.name: getattr(self, field.name)
            for field in dataclasses.fields(self)
            if getattr(self, field.name) is not UNSET and field.name != "ab"
        }
