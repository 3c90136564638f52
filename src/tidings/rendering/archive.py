"""The public archive's pages (API-4): an index of sent issues and a page per issue.

An issue is rendered for the free segment, as a reader who gave no name would see it: name
tags show their fallback, the address shows nothing, and links to unsubscribe or manage
preferences become the signup form, so no page carries a token or anyone's data. The pages
use the public pages' layout (the design system) and may be indexed by search engines.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from markupsafe import Markup

from tidings.rendering.content import CampaignContent
from tidings.rendering.engine import TemplateEngine
from tidings.rendering.render import segment_blocks
from tidings.rendering.slots import RecipientValues, SlotTable
from tidings.rendering.theme import DEFAULT_THEME, Theme

ARCHIVE_PATH = "/archive/"
ARCHIVE_SEGMENT = "free"
# Nobody in particular: names fall back, the address and every id or token is empty.
ARCHIVE_READER = RecipientValues(
    address="",
    name=None,
    unsubscribe_token="",
    preferences_token="",
    subscriber_id="",
    recipient_id="",
)


def issue_url(public_url: str, slug: str, campaign_id: int) -> str:
    """The issue's page: linked from the mail ("view in your browser") and the feeds."""
    return f"{public_url.rstrip('/')}{ARCHIVE_PATH}{slug}/{campaign_id}"


@dataclass(frozen=True, slots=True)
class IndexEntry:
    url: str
    subject: str
    preheader: str
    sent_at: datetime


class ArchivePages:
    """Renders the archive with one theme. Build once and share; rendering is read-only."""

    def __init__(self, theme: Theme = DEFAULT_THEME, *, engine: TemplateEngine):
        self.theme = theme
        self._environment = engine.environment

    def issue_body(self, content: CampaignContent, *, base_url: str, subscribe_url: str) -> str:
        """The issue's content as HTML for a browser or a feed, neutral for everyone."""
        slots = SlotTable(base_url=base_url.rstrip("/"))
        blocks = segment_blocks(content, ARCHIVE_SEGMENT, slots)
        macro = self._environment.get_template("components.html").module.blocks  # type: ignore[attr-defined]
        html = str(macro(blocks))
        # Longest first: the URL holds the token that would otherwise be filled in.
        for personal_url in (slots.unsubscribe_url, slots.preferences_url):
            html = html.replace(personal_url, subscribe_url)
        return slots.substitute(html, ARCHIVE_READER, escape=True).strip()

    def issue(
        self,
        content: CampaignContent,
        *,
        newsletter_name: str,
        sent_at: datetime,
        base_url: str,
        index_url: str,
        subscribe_url: str,
        atom_url: str,
    ) -> str:
        body = self.issue_body(content, base_url=base_url, subscribe_url=subscribe_url)
        return self._render(
            "archive_issue.html",
            kicker=newsletter_name,
            subject=content.subject,
            sent_at=sent_at,
            body=Markup(body),  # noqa: S704 - sanitised content rendered by our templates
            index_url=index_url,
            subscribe_url=subscribe_url,
            atom_url=atom_url,
            newsletter_name=newsletter_name,
        )

    def index(
        self,
        *,
        newsletter_name: str,
        description: str,
        entries: Sequence[IndexEntry],
        subscribe_url: str,
        atom_url: str,
        rss_url: str,
    ) -> str:
        return self._render(
            "archive_index.html",
            kicker=None,
            newsletter_name=newsletter_name,
            description=description,
            entries=tuple(entries),
            subscribe_url=subscribe_url,
            atom_url=atom_url,
            rss_url=rss_url,
        )

    def _render(self, name: str, *, kicker: str | None, **context: Any) -> str:
        template = self._environment.get_template(f"pages/{name}")
        return template.render(theme=self.theme, kicker=kicker, **context) + "\n"
