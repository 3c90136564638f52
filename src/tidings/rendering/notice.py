"""Transactional notices (the confirmation email) on the campaign design system (AUD-5, AUD-6).

A notice is one message to one person about one action: a title, a few paragraphs, a button,
the same link as text for clients that hide buttons, and the publisher in the footer. It is
not list mail, so there is no unsubscribe footer. The layout is `templates/notice/`; the HTML
is escaped by Jinja and inlined like a campaign, the text part comes from the same render.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence
from dataclasses import dataclass

from tidings.domain.errors import InvalidInput
from tidings.rendering.engine import TemplateEngine
from tidings.rendering.theme import DEFAULT_THEME, Theme

_BUTTON_URL = re.compile(r"https?://[^\s\"'<>]+")


@dataclass(frozen=True, slots=True)
class Notice:
    """A rendered notice: a one-line subject, the plain-text part and the inlined HTML part."""

    subject: str
    text: str
    html: str


def render_notice(
    *,
    subject: str,
    title: str,
    paragraphs: Sequence[str],
    button_label: str,
    button_url: str,
    notes: Sequence[str] = (),
    newsletter_name: str | None = None,
    engine: TemplateEngine,
    theme: Theme = DEFAULT_THEME,
) -> Notice:
    """Render a notice: `paragraphs` before the button, `notes` (smaller, muted) after it."""
    if not _BUTTON_URL.fullmatch(button_url):
        raise InvalidInput("button_url must be an absolute http(s) URL", field="button_url")
    template = engine.environment.get_template("notice/notice.html")
    module = template.make_module(
        {
            "theme": theme,
            # The subject becomes a header: a line break in a name must not start a new one.
            "subject": _one_line(subject),
            "title": title,
            "paragraphs": tuple(paragraphs),
            "button_label": button_label,
            "button_url": button_url,
            "notes": tuple(notes),
            "kicker": newsletter_name or theme.site_name,
        }
    )
    return Notice(
        subject=_one_line(subject),
        text=str(vars(module)["text_part"]).strip() + "\n",
        html=engine.inline(str(module)),
    )


def render_confirmation_email(
    *,
    site_name: str,
    newsletter_name: str,
    confirm_url: str,
    expires_hours: int,
    engine: TemplateEngine,
    theme: Theme = DEFAULT_THEME,
) -> Notice:
    """The double opt-in email: one button that leads to the confirm page (AUD-6)."""
    if expires_hours < 1:
        raise InvalidInput("expires_hours must be at least 1", field="expires_hours")
    if not _BUTTON_URL.fullmatch(confirm_url):
        raise InvalidInput("confirm_url must be an absolute http(s) URL", field="confirm_url")
    if site_name != theme.site_name:
        theme = dataclasses.replace(theme, site_name=site_name)
    hours = "1 hour" if expires_hours == 1 else f"{expires_hours} hours"
    return render_notice(
        subject=f"Confirm your subscription to {newsletter_name}",
        title="Confirm your subscription",
        paragraphs=[
            f"Someone, hopefully you, asked to subscribe this address to {newsletter_name}. "
            "Press the button to confirm and start receiving it."
        ],
        button_label="Confirm subscription",
        button_url=confirm_url,
        notes=[
            f"This link expires in {hours}.",
            "If you did not ask for this, ignore this email — you will not be subscribed.",
        ],
        newsletter_name=newsletter_name,
        engine=engine,
        theme=theme,
    )


def _one_line(value: str) -> str:
    return " ".join(value.split())
