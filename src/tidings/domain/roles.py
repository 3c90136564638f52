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


SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
# Route families by their path below /admin or /api/admin: (reads, changes). The first prefix
# that matches wins; anything not listed reads as a viewer and changes as an owner only.
_POLICY: tuple[tuple[str, Role, Role], ...] = (
    # Every operator manages their own session, password and two-factor sign-in.
    ("/sign-out", Role.VIEWER, Role.VIEWER),
    ("/account", Role.VIEWER, Role.VIEWER),
    # Operators, API keys and the audit log: the owner's alone.
    ("/operators", Role.OWNER, Role.OWNER),
    ("/keys", Role.OWNER, Role.OWNER),
    ("/audit", Role.OWNER, Role.OWNER),
    # The effective configuration and the go-live checklist (issue 25).
    ("/settings", Role.OWNER, Role.OWNER),
    # The audience and campaigns, sending included: editors.
    ("/newsletters", Role.VIEWER, Role.EDITOR),
    ("/subscribers", Role.VIEWER, Role.EDITOR),
    ("/suppressions", Role.VIEWER, Role.EDITOR),
    ("/campaigns", Role.VIEWER, Role.EDITOR),
    # The media library: images for campaigns, uploaded and deleted by whoever writes them.
    ("/media", Role.VIEWER, Role.EDITOR),
    # Checking the email provider's connection changes nothing: whoever sends may.
    ("/provider", Role.VIEWER, Role.EDITOR),
    # Bounce and complaint events from a bridge (the generic form): they act on the audience.
    ("/events", Role.VIEWER, Role.EDITOR),
)
_ADMIN_ROOTS = ("/api/admin", "/admin")


def required_role(method: str, route_path: str) -> Role:
    """The least role that may call `method` on the route `route_path` (its template, as
    `/api/admin/campaigns/{campaign_id}/send` or `/admin/subscribers`). The one policy for
    the admin API and the admin UI (UI-2)."""
    path = route_path
    for root in _ADMIN_ROOTS:
        if path == root or path.startswith(root + "/"):
            path = path[len(root) :]
            break
    reading = method.upper() in SAFE_METHODS
    for prefix, reads, changes in _POLICY:
        if path == prefix or path.startswith(prefix + "/") or path.startswith(prefix + "-"):
            return reads if reading else changes
    return Role.VIEWER if reading else Role.OWNER
