"""The public archive of sent issues (API-4): an index, a page per issue, Atom and RSS feeds.

Only newsletters whose owner turned `archive` on have one; for the others, and for issues
that did not go out, every address answers "not found", the same as an unknown slug. An
issue's URL (`/archive/{slug}/{campaign id}`) never changes once mail links to it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from tidings.campaigns.drafts import CampaignContext
from tidings.domain.errors import NotFound
from tidings.rendering.archive import ARCHIVE_PATH, ArchivePages, IndexEntry, issue_url
from tidings.rendering.content import CampaignContent
from tidings.rendering.feeds import Feed, FeedEntry, atom, rss
from tidings.storage import campaigns as queries
from tidings.storage import newsletters as newsletter_queries
from tidings.storage.campaigns import SentIssue
from tidings.storage.newsletters import NewsletterRow

INDEX_LIMIT = 500  # issues on the index page
FEED_LIMIT = 20  # issues in a feed, newest first
NO_ARCHIVE = "There is no archive at this address."
NO_ISSUE = "There is no issue at this address."
_SLUG = re.compile(r"[a-z0-9][a-z0-9-]{0,63}")  # anything else names no newsletter


def _content(issue: SentIssue) -> CampaignContent:
    campaign = issue.campaign
    body_format: Literal["markdown", "html"] = (
        "html" if campaign.body_format == "html" else "markdown"
    )
    return CampaignContent(
        subject=campaign.subject,
        preheader=campaign.preheader,
        body=campaign.body,
        body_format=body_format,
    )


@dataclass(frozen=True, slots=True)
class ArchiveDocument:
    """A rendered archive page or feed and when what it shows last changed (for caching)."""

    body: bytes
    last_modified: datetime


class PublicArchive:
    """Reads sent issues and renders them for the public; changes nothing."""

    def __init__(self, context: CampaignContext) -> None:
        self._ctx = context
        self._pages = ArchivePages(context.theme, engine=context.templates)
        self._base = context.public_url.rstrip("/")

    async def _newsletter(self, slug: str) -> NewsletterRow:
        if not _SLUG.fullmatch(slug):
            raise NotFound(NO_ARCHIVE)
        async with self._ctx.db.read() as conn:
            newsletter = await newsletter_queries.get_by_slug(conn, slug)
        if newsletter is None or not newsletter.archive:
            raise NotFound(NO_ARCHIVE)
        return newsletter

    async def _issues(self, slug: str, limit: int) -> tuple[NewsletterRow, list[SentIssue]]:
        newsletter = await self._newsletter(slug)
        async with self._ctx.db.read() as conn:
            issues = await queries.sent_issues(conn, newsletter.id, limit=limit)
        return newsletter, issues

    def _urls(self, slug: str) -> tuple[str, str, str, str]:
        index = f"{self._base}{ARCHIVE_PATH}{slug}"
        return index, f"{index}/feed.atom", f"{index}/feed.rss", f"{self._base}/subscribe/{slug}"

    async def index(self, slug: str) -> ArchiveDocument:
        newsletter, issues = await self._issues(slug, INDEX_LIMIT)
        _, atom_url, rss_url, subscribe_url = self._urls(slug)
        entries = [
            IndexEntry(
                url=issue_url(self._base, slug, issue.campaign.id),
                subject=issue.campaign.subject,
                preheader=issue.campaign.preheader,
                sent_at=issue.sent_at,
            )
            for issue in issues
        ]
        page = self._pages.index(
            newsletter_name=newsletter.name,
            description=newsletter.description,
            entries=entries,
            subscribe_url=subscribe_url,
            atom_url=atom_url,
            rss_url=rss_url,
        )
        return ArchiveDocument(page.encode(), _latest(issues, newsletter))

    async def issue(self, slug: str, campaign_id: int) -> ArchiveDocument:
        newsletter = await self._newsletter(slug)
        async with self._ctx.db.read() as conn:
            issue = await queries.sent_issue(conn, newsletter.id, campaign_id)
        if issue is None:
            raise NotFound(NO_ISSUE)
        index_url, atom_url, _, subscribe_url = self._urls(slug)
        page = self._pages.issue(
            _content(issue),
            newsletter_name=newsletter.name,
            sent_at=issue.sent_at,
            base_url=self._base,
            index_url=index_url,
            subscribe_url=subscribe_url,
            atom_url=atom_url,
        )
        return ArchiveDocument(page.encode(), max(_changed(issue), newsletter.updated_at))

    async def feed(self, slug: str, kind: Literal["atom", "rss"]) -> ArchiveDocument:
        newsletter, issues = await self._issues(slug, FEED_LIMIT)
        index_url, atom_url, rss_url, subscribe_url = self._urls(slug)
        entries = [
            FeedEntry(
                url=issue_url(self._base, slug, issue.campaign.id),
                title=issue.campaign.subject,
                summary=issue.campaign.preheader,
                html=self._pages.issue_body(
                    _content(issue), base_url=self._base, subscribe_url=subscribe_url
                ),
                published=issue.sent_at,
            )
            for issue in issues
        ]
        updated = _latest(issues, newsletter)
        feed = Feed(
            title=newsletter.name,
            description=newsletter.description,
            page_url=index_url,
            atom_url=atom_url,
            rss_url=rss_url,
            author=self._ctx.theme.site_name,
            language=self._ctx.theme.language,
            entries=entries,
            updated=updated,
        )
        return ArchiveDocument(atom(feed) if kind == "atom" else rss(feed), updated)


def _changed(issue: SentIssue) -> datetime:
    # Publishing an issue sent earlier changes what the archive shows from that moment.
    return max(issue.sent_at, issue.campaign.updated_at)


def _latest(issues: list[SentIssue], newsletter: NewsletterRow) -> datetime:
    return max([newsletter.updated_at, *(_changed(issue) for issue in issues)])
