"""Send again (ENG-7): from a sent campaign, a new draft with its content and settings for
those who did not open, did not click, were not delivered, or all who got it; its audience
frozen at creation from the origin's recipients. From there it is an ordinary campaign."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import structlog

from tidings.campaigns.drafts import CLONED_FIELDS, CampaignContext, CampaignDraft, CampaignDrafts
from tidings.domain.send_again import (
    ResendAudience,
    ResendLink,
    check_origin,
    hits_may_be_purged,
)
from tidings.rendering import CampaignContent
from tidings.storage import campaigns as campaign_queries
from tidings.storage import resends as queries

log = structlog.get_logger("tidings.campaigns")


@dataclass(frozen=True, slots=True)
class SendAgainLinks:
    """A campaign's place in send again: what it was made from, and what was made from it."""

    origin: ResendLink | None = None
    resends: list[ResendLink] = field(default_factory=list)

    def public(self) -> dict[str, Any]:
        """As `campaign stats --json` and the API show it under `send_again`."""
        return {
            "origin": None if self.origin is None else link_json(self.origin),
            "resends": [link_json(link) for link in self.resends],
        }


def link_json(link: ResendLink) -> dict[str, Any]:
    return {
        "campaign_id": link.campaign_id,
        "origin_id": link.origin_id,
        "audience": link.audience.value,
        "audience_count": link.chosen_count,
        "left_out": dict(link.left_out),
        "left_out_count": link.left_out_count,
        "created_at": link.created_at.isoformat(),
    }


class SendAgain:
    def __init__(
        self, context: CampaignContext, drafts: CampaignDrafts, *, retention: timedelta
    ) -> None:
        self._ctx = context
        self._drafts = drafts
        self._retention = retention  # tracking.retention_days: older hits are deleted

    async def create(
        self, origin_id: int, audience: ResendAudience, *, subject: str | None = None
    ) -> tuple[CampaignDraft, ResendLink]:
        """The new draft and its link; refuses (SendAgainRefused) an origin not sent, or not
        tracked per person when opens or clicks are asked about. One transaction: a refusal
        leaves nothing behind."""
        source = await self._drafts.get(origin_id)  # NotFound for an unknown id
        original, newsletter = source.campaign, source.newsletter
        values = {key: getattr(original, key) for key in CLONED_FIELDS}
        if subject is not None:
            CampaignContent(subject=subject, preheader="", body="")  # checks it as a subject
            values["subject"] = subject
        # The origin is the issue in the archive; its second sending is not another issue.
        values["archive_public"] = False
        now = self._ctx.now()
        async with self._ctx.db.write() as conn:
            send = await queries.origin_send(conn, origin_id, original.status)
            check_origin(
                audience,
                campaign_id=origin_id,
                status=original.status,
                sent=send.sent,
                tracking=newsletter.tracking,
                tracked=send.tracked,
                sent_under=send.tracking,
            )
            purged = send.started_at is not None and hits_may_be_purged(
                send.started_at, now - self._retention
            )
            row = await campaign_queries.insert_campaign(
                conn,
                newsletter_id=newsletter.id,
                status="draft",
                created_at=now,
                updated_at=now,
                **values,
            )
            link = await queries.freeze(
                conn,
                campaign_id=row.id,
                origin_id=origin_id,
                newsletter_id=newsletter.id,
                audience=audience,
                send=send,
                hits_may_be_purged=purged and audience.needs_hits,
                now=now,
            )
        log.info(
            "campaign.send_again_created",
            campaign_id=row.id,
            origin_id=origin_id,
            audience=audience.value,
            chosen=link.chosen_count,
            left_out=link.left_out_count,
        )
        return await self._drafts.get(row.id), link

    async def links(self, campaign_id: int) -> SendAgainLinks:
        """Where the campaign came from and what was sent again from it (both may be empty)."""
        async with self._ctx.db.read() as conn:
            return SendAgainLinks(
                await queries.link_of(conn, campaign_id),
                await queries.resends_of(conn, campaign_id),
            )
