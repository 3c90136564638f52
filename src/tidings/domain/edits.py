"""The marker for a field an edit leaves alone, so None can mean "clear it" (PATCH semantics)."""

from __future__ import annotations

from enum import Enum


class Unset(Enum):
    """A field an edit leaves alone (None would clear it)."""

    UNSET = "unset"


UNSET = Unset.UNSET
