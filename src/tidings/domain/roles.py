"""Operator roles (UI-2): what an account or an API key may do. Each role can do everything
the one below it can: a viewer reads, an editor also changes the audience and campaigns
(sends included), an owner also manages operators and API keys."""

from __future__ import annotations

from enum import StrEnum

from tidings.domain.errors import InvalidInput, TidingsError


class Role(StrEnum):
    VIEWER = "viewer"
    EDITOR = "editor"
    OWNER = "owner"

    @property
    def rank(self) -> int:
        return _RANKS[self]

    def allows(self, required: Role) -> bool:
        """True when this role can do what `required` can."""
        return self.rank >= required.rank


_RANKS = {Role.VIEWER: 0, Role.EDITOR: 1, Role.OWNER: 2}


class Forbidden(TidingsError):
    """Signed in, but the role does not allow this (403; nothing changed)."""

    code = "forbidden"
    title = "Your role does not allow this"


def parse_role(value: str) -> Role:
    try:
        return Role(value.strip().lower())
    except ValueError:
        raise InvalidInput("role must be owner, editor or viewer", field="role") from None
