"""Cursor pagination: opaque cursors that encode the last key of the previous page."""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Callable, Sequence
from typing import Annotated, Generic, TypeVar

from fastapi import Query
from pydantic import BaseModel

from tidings.domain.errors import InvalidInput

ItemT = TypeVar("ItemT")
RowT = TypeVar("RowT")


class Page(BaseModel, Generic[ItemT]):
    items: list[ItemT]
    next_cursor: str | None = None


def page_of(
    rows: Sequence[RowT],
    limit: int,
    to_item: Callable[[RowT], ItemT],
    key: Callable[[RowT], str | int],
) -> Page[ItemT]:
    """A page of `rows`; a full page gets a cursor that continues after its last row."""
    next_cursor = encode_cursor(key(rows[-1])) if rows and len(rows) == limit else None
    return Page(items=[to_item(row) for row in rows], next_cursor=next_cursor)


def int_cursor(cursor: str | None) -> int | None:
    """Decode a cursor whose key is an integer id."""
    after = decode_cursor(cursor)
    if after is None:
        return None
    if not isinstance(after, int) or not 0 <= after < 2**62:
        raise InvalidInput("the cursor is not one this API returned", field="cursor")
    return after


def encode_cursor(after: str | int) -> str:
    return base64.urlsafe_b64encode(json.dumps({"after": after}).encode()).decode().rstrip("=")


def decode_cursor(cursor: str | None) -> str | int | None:
    if cursor is None:
        return None
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        after = json.loads(base64.urlsafe_b64decode(padded.encode()))["after"]
    except (binascii.Error, ValueError, KeyError, TypeError):
        raise InvalidInput("the cursor is not one this API returned", field="cursor") from None
    if not isinstance(after, str | int):
        raise InvalidInput("the cursor is not one this API returned", field="cursor")
    return after


Limit = Annotated[int, Query(ge=1, le=500, description="Items per page.")]
Cursor = Annotated[
    str | None, Query(max_length=200, description="`next_cursor` of the previous page.")
]
