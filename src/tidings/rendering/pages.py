"""The public pages reached from a form or an email: subscribe, confirm, unsubscribe, preferences.

Each method returns a complete HTML document on the campaign design system (the one theme and
stylesheet, `templates/pages/`): mobile-friendly, nothing loaded from elsewhere, no JavaScript.
Every state change is a form POST, never a GET, because mail scanners open links (AUD-6,
AUD-7). Names, descriptions and messages are escaped by Jinja; URLs are checked here because
escaping cannot make a `javascript:` URL safe. Routes choose the status code, not this module.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from tidings.domain.errors import InvalidInput
from tidings.domain.tracking_consent import CONSENT_TEXT
from tidings.rendering.engine import TemplateEngine
from tidings.rendering.theme import DEFAULT_THEME, Theme

# A path on this site or an absolute http(s) URL; no quotes, spaces or angle brackets.
_URL = re.compile(r"(?:/(?!/)|https?://)[^\s\"'<>]*")

LinkProblem = Literal["expired", "invalid"]


@dataclass(frozen=True, slots=True)
class PreferenceItem:
    """One newsletter on the preferences page, ticked when the reader is subscribed or has
    asked to be and has yet to use the emailed link (`awaiting_confirmation`)."""

    newsletter_id: int
    name: str
    description: str
    subscribed: bool
    awaiting_confirmation: bool = False


@dataclass(frozen=True, slots=True)
class TrackingBox:
    """The unticked-by-default box asking for per-person open and click tracking (ENG-1)."""

    ticked: bool = False
    text: str = CONSENT_TEXT


class Pages:
    """Renders the public pages with one theme. Build once and share; rendering is read-only."""

    def __init__(self, theme: Theme = DEFAULT_THEME, *, engine: TemplateEngine):
        self.theme = theme
        # The design system's one Jinja environment: templates are compiled once per process.
        self._environment = engine.environment

    def subscribe_form(
        self,
        newsletters: Sequence[tuple[str, str, str]],
        *,
        action_url: str,
        error: str | None = None,
        email: str = "",
        name: str = "",
        chosen: Collection[str] = (),
        honeypot: bool = False,
        altcha: bool = False,
        tracking: TrackingBox | None = None,
    ) -> str:
        """The form: POSTs `email`, `name` and `newsletter` (one slug per ticked box) to
        `action_url`.

        `newsletters` are (slug, name, description); with one, it is chosen for the reader,
        with several each is a checkbox, ticked when its slug is in `chosen`. `email` and
        `name` fill the inputs again after an error, so nobody types twice. `honeypot` adds
        the `website` field that people never see and bots fill in; `altcha` the proof-of-work
        field and the script that solves it before the form posts. `tracking`: the per-person
        tracking box (`tracking=yes` when ticked), shown when a newsletter tracks per person.
        """
        return self._render(
            "subscribe.html",
            honeypot=honeypot,
            altcha=altcha,
            tracking=tracking,
            newsletters=[tuple(newsletter) for newsletter in newsletters],
            action_url=_url(action_url, "action_url"),
            error=error,
            typed_email=email,
            typed_name=name,
            chosen=frozenset(chosen),
        )

    def subscribe_embed(
        self,
        newsletter: tuple[str, str, str],
        *,
        action_url: str,
        error: str | None = None,
        email: str = "",
        name: str = "",
        done: bool = False,
        honeypot: bool = False,
        altcha: bool = False,
        tracking: TrackingBox | None = None,
    ) -> str:
        """The signup form for another site's iframe: one newsletter, no masthead, and the
        thank-you in place once `done` (the same words whatever the address's state)."""
        return self._render(
            "embed.html",
            tracking=tracking,
            newsletter=tuple(newsletter),
            action_url=_url(action_url, "action_url"),
            error=error,
            typed_email=email,
            typed_name=name,
            done=done,
            honeypot=honeypot,
            altcha=altcha,
        )

    def subscribe_thanks(self) -> str:
        """ "Check your inbox": identical for every address, whatever its state (AUD-5)."""
        return self._render("thanks.html")

    def confirm_prompt(self, *, newsletter_name: str, action_url: str) -> str:
        """The page a confirmation link opens: a button that POSTs to `action_url`."""
        return self._render(
            "confirm.html",
            kicker=newsletter_name,
            newsletter_name=newsletter_name,
            action_url=_url(action_url, "action_url"),
        )

    def confirmed(self, *, newsletter_name: str, preferences_url: str | None) -> str:
        return self._render(
            "confirmed.html",
            kicker=newsletter_name,
            newsletter_name=newsletter_name,
            preferences_url=_optional_url(preferences_url, "preferences_url"),
        )

    def unsubscribe_prompt(
        self, *, newsletter_name: str, action_url: str, preferences_url: str | None = None
    ) -> str:
        """A button that POSTs `List-Unsubscribe=One-Click` to `action_url` (RFC 8058 body)."""
        return self._render(
            "unsubscribe.html",
            kicker=newsletter_name,
            newsletter_name=newsletter_name,
            action_url=_url(action_url, "action_url"),
            preferences_url=_optional_url(preferences_url, "preferences_url"),
        )

    def unsubscribed(self, *, newsletter_name: str, preferences_url: str | None) -> str:
        return self._render(
            "unsubscribed.html",
            kicker=newsletter_name,
            newsletter_name=newsletter_name,
            preferences_url=_optional_url(preferences_url, "preferences_url"),
        )

    def keep_prompt(
        self,
        *,
        newsletter_name: str,
        action_url: str,
        outcome: str | None,
        subscribe_url: str | None = None,
    ) -> str:
        """The sunset email's page (ENG-7): a button that POSTs to `action_url` while the
        request is open (`outcome` None), else what became of it."""
        return self._render(
            "keep.html",
            kicker=newsletter_name,
            newsletter_name=newsletter_name,
            action_url=_url(action_url, "action_url"),
            outcome=outcome,
            subscribe_url=_optional_url(subscribe_url, "subscribe_url"),
        )

    def preferences(
        self,
        *,
        items: Sequence[PreferenceItem],
        action_url: str,
        saved: bool,
        tracking: TrackingBox | None = None,
    ) -> str:
        """Checkboxes `newsletter=<id>` for the ticked newsletters, POSTed to `action_url`.

        A form with every box cleared posts no `newsletter` field: the reader wants none.
        With `tracking`, the per-person tracking box too (`tracking=yes` when ticked, with
        `tracking_shown=yes` always, so an unticked box withdraws the consent).
        """
        return self._render(
            "preferences.html",
            tracking=tracking,
            items=tuple(items),
            action_url=_url(action_url, "action_url"),
            saved=saved,
        )

    def link_problem(self, *, reason: LinkProblem, subscribe_url: str | None = None) -> str:
        """An expired or invalid link, in plain words; never the token or the cause."""
        if reason not in ("expired", "invalid"):
            raise InvalidInput("reason must be 'expired' or 'invalid'", field="reason")
        return self._render(
            "link_problem.html",
            reason=reason,
            subscribe_url=_optional_url(subscribe_url, "subscribe_url"),
        )

    def not_found(self, *, message: str, subscribe_url: str | None = None) -> str:
        """A public page that does not exist, for people: what was missing and where to go."""
        return self._render(
            "not_found.html",
            message=message,
            subscribe_url=_optional_url(subscribe_url, "subscribe_url"),
        )

    def test_link(self, *, purpose: Literal["unsubscribe", "preferences"]) -> str:
        """What an unsubscribe or preferences link in a test send opens: "this was a test"."""
        if purpose not in ("unsubscribe", "preferences"):
            raise InvalidInput("purpose must be 'unsubscribe' or 'preferences'", field="purpose")
        return self._render("test_link.html", purpose=purpose)

    def _render(self, name: str, *, kicker: str | None = None, **context: Any) -> str:
        template = self._environment.get_template(f"pages/{name}")
        return template.render(theme=self.theme, kicker=kicker, **context) + "\n"


def _url(value: str, field: str) -> str:
    if not _URL.fullmatch(value):
        raise InvalidInput(f"{field} must be a path or an http(s) URL", field=field)
    return value


def _optional_url(value: str | None, field: str) -> str | None:
    return None if value is None else _url(value, field)
