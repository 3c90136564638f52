"""Shared schema pieces: the bases of request bodies and record views, and the field types
every route uses for header-bound text, addresses and times, so one rule
(domain.email_headers) guards them all."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Self

from pydantic import AfterValidator, BaseModel, ConfigDict, Field
from pydantic_core import PydanticCustomError

from tidings.domain.clock import NEEDS_TIMEZONE, is_naive
from tidings.domain.email_headers import (
    HEADER_TEXT_PATTERN,
    MAX_ADDRESS_LENGTH,
    address_problem,
    header_text_problem,
)


class RequestBody(BaseModel):
    """The base of every admin request body: a field it does not know is a 422 naming it
    (`body.sheduled_at`: Extra inputs are not permitted), not quietly ignored, so a typo or
    a client written against another version never looks like it worked."""

    model_config = ConfigDict(extra="forbid")


class RecordView(BaseModel):
    """A response schema whose fields are read by name from a use case's record (a row), so
    routes need not know the storage types behind it."""

    @classmethod
    def of(cls, record: object) -> Self:
        return cls(**{name: getattr(record, name) for name in cls.model_fields})


def _header_text(value: str) -> str:
    problem = header_text_problem(value)
    if problem is not None:
        raise PydanticCustomError("header_text", problem)
    return value


def _email_address(value: str) -> str:
    # Surrounding blanks are trimmed (as normalise_email does), line ends are refused first:
    # `str.strip` would quietly drop a U+2028 or NEL.
    problem = header_text_problem(value) or address_problem(value.strip())
    if problem is not None:
        raise PydanticCustomError("email_address", problem)
    return value.strip()


def _aware(value: datetime) -> datetime:
    if is_naive(value):
        raise PydanticCustomError("timezone_required", NEEDS_TIMEZONE)
    return value


HeaderText = Annotated[
    str,
    AfterValidator(_header_text),
    Field(
        json_schema_extra={"pattern": HEADER_TEXT_PATTERN},
        description="One line: no control characters, line separators or encoded-words.",
    ),
]
"""Text that ends up in an email header (subject, display names)."""

EmailAddress = Annotated[
    str,
    AfterValidator(_email_address),
    Field(max_length=320, json_schema_extra={"format": "email", "maxLength": MAX_ADDRESS_LENGTH}),
]
"""Exactly one plain addr-spec (`name@example.org`): no display name, no second address."""

AwareDateTime = Annotated[
    datetime,
    AfterValidator(_aware),
    Field(description="ISO 8601 with a timezone, e.g. `2026-12-01T09:00:00Z`."),
]
"""A point in time; a naive one is refused (whose 9 o'clock would it be?)."""
