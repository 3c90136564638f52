"""Admin use cases for newsletters (AUD-1)."""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from typing import Any

from tidings.audience.context import AudienceContext
from tidings.domain.edits import UNSET, Unset
from tidings.domain.email_headers import check_address, check_header_values
from tidings.domain.errors import Conflict, InvalidInput, NotFound
from tidings.domain.tracking import TRACKING_MODES, TrackingMode
from tidings.storage import newsletters as queries
from tidings.storage.newsletters import NewsletterRow

SLUG = re.compile(r"^[a-z0-9][a-z0-9-]{0,62}$")
OPTIONAL_FIELDS = frozenset({"reply_to", "welcome_subject", "welcome_body"})
# Each tracking mode in one line, as the CLI and the newsletter page explain it (ENG-1).
TRACKING_MEANINGS = {
    TrackingMode.OFF.value: "no pixel and no rewritten link; nothing is counted",
    TrackingMode.AGGREGATE.value: "opens and clicks are counted; nothing ties a hit to a person",
    TrackingMode.PER_PERSON.value: "each person's opens and clicks, only for subscribers who "
    "ticked the consent box; everyone else is counted as in aggregate",
}


@dataclass(frozen=True, slots=True)
class NewsletterFields:
    """A new newsletter (AUD-1)."""

    slug: str
    name: str
    sender_name: str
    sender_address: str
    description: str = ""
    reply_to: str | None = None
    double_opt_in: bool = True
    welcome_subject: str | None = None
    welcome_body: str | None = None
    # A public web archive and feed of the sent issues (API-4); off until the owner opts in.
    archive: bool = False
    # Open and click tracking (ENG-1): off until the owner chooses a mode.
    tracking: str = TrackingMode.OFF.value


@dataclass(frozen=True, slots=True)
class NewsletterChanges:
    """Changes to a newsletter: an UNSET field keeps its value; None clears `reply_to` and the
    welcome email (the optional fields) and is refused for the others."""

    slug: str | Unset | None = UNSET
    name: str | Unset | None = UNSET
    sender_name: str | Unset | None = UNSET
    sender_address: str | Unset | None = UNSET
    description: str | Unset | None = UNSET
    reply_to: str | Unset | None = UNSET
    double_opt_in: bool | Unset | None = UNSET
    # None or "" clears the welcome email (both fields together).
    welcome_subject: str | Unset | None = UNSET
    welcome_body: str | Unset | None = UNSET
    archive: bool | Unset | None = UNSET
    tracking: str | Unset | None = UNSET

    def values(self) -> dict[str, Any]:
        """Only the fields the edit sets; InvalidInput for a required one set to None."""
        given = {key: value for key, value in asdict(self).items() if value is not UNSET}
        for key, value in given.items():
            if value is None and key not in OPTIONAL_FIELDS:
                raise InvalidInput(f"{key} cannot be null", field=key)
        return given


MAX_WELCOME_BODY = 20_000


def _validate(values: dict[str, Any]) -> dict[str, Any]:
    if "slug" in values and not SLUG.match(values["slug"]):
        raise InvalidInput(
            "slug must be lowercase letters, digits and dashes (max 63)", field="slug"
        )
    check_header_values({key: values.get(key) for key in ("name", "sender_name", "reply_to")})
    for key in ("sender_address", "reply_to"):
        if values.get(key) is not None:
            check_address(key, values[key])
    if "tracking" in values and values["tracking"] not in TRACKING_MODES:
        raise InvalidInput(f"tracking must be one of {', '.join(TRACKING_MODES)}", field="tracking")
    return _welcome(values)


def _welcome(values: dict[str, Any]) -> dict[str, Any]:
    """The welcome email's subject (one line) and body (paragraphs of plain text): both set,
    or both cleared with empty strings."""
    if "welcome_subject" not in values and "welcome_body" not in values:
        return values
    subject = (values.get("welcome_subject") or "").strip()
    body = (values.get("welcome_body") or "").strip()
    check_header_values({"welcome_subject": subject})
    if len(subject) > 200:
        raise InvalidInput(
            "welcome_subject must be at most 200 characters", field="welcome_subject"
        )
    if len(body) > MAX_WELCOME_BODY:
        raise InvalidInput(
            f"welcome_body must be at most {MAX_WELCOME_BODY} characters", field="welcome_body"
        )
    if bool(subject) != bool(body):
        missing = "welcome_body" if subject else "welcome_subject"
        raise InvalidInput(
            "a welcome email needs both welcome_subject and welcome_body", field=missing
        )
    return {**values, "welcome_subject": subject or None, "welcome_body": body or None}


class Newsletters:
    def __init__(self, context: AudienceContext) -> None:
        self._ctx = context

    async def create(self, fields: NewsletterFields) -> NewsletterRow:
        values = _validate(asdict(fields))
        now = self._ctx.now()
        async with self._ctx.db.write() as conn:
            return await queries.insert_newsletter(conn, **values, created_at=now, updated_at=now)

    async def list(self) -> list[NewsletterRow]:
        async with self._ctx.db.read() as conn:
            return await queries.list_newsletters(conn)

    async def get(self, slug: str) -> NewsletterRow:
        async with self._ctx.db.read() as conn:
            found = await queries.get_by_slug(conn, slug)
        if found is None:
            raise NotFound(f"no newsletter called {slug!r}")
        return found

    async def update(self, current_slug: str, edit: NewsletterChanges) -> NewsletterRow:
        given = edit.values()
        current = await self.get(current_slug)
        welcome = {key: given[key] for key in ("welcome_subject", "welcome_body") if key in given}
        if len(welcome) == 1:  # changing one half keeps the other; ""/None turns the email off
            ((given_key, value),) = welcome.items()
            other = "welcome_body" if given_key == "welcome_subject" else "welcome_subject"
            given[other] = getattr(current, other) if value else ""
        changes = _validate(given)
        async with self._ctx.db.write() as conn:
            updated = await queries.update_newsletter(
                conn, current.id, **changes, updated_at=self._ctx.now()
            )
        assert updated is not None
        return updated

    async def delete(self, slug: str) -> None:
        """Refused while anyone is subscribed: deleting would silently erase consent records."""
        current = await self.get(slug)
        async with self._ctx.db.write() as conn:
            if await queries.has_subscriptions(conn, current.id):
                raise Conflict("the newsletter has subscriptions; remove them first")
            await queries.delete_newsletter(conn, current.id)
