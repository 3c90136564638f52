"""The render cache of one worker's `send_batch` jobs (CMP-3): each campaign read once, each
segment rendered once, kept for the send, and its tracked links stored once (ENG-2)."""

from __future__ import annotations

from collections import OrderedDict
from datetime import datetime

from sqlalchemy.ext.asyncio import AsyncConnection

from tidings.campaigns.context import SendingContext
from tidings.campaigns.drafts import CampaignDraft
from tidings.rendering import SegmentRendering
from tidings.rendering.tracking import tracking_signer
from tidings.storage import campaign_links

RENDER_CACHE_SIZE = 16
STORED_SEGMENTS = 1024  # (campaign, segment) pairs remembered as stored before forgetting


class Renderings:
    """Each worker reads a campaign and renders each segment once, and keeps them for the send
    (CMP-3)."""

    def __init__(self, context: SendingContext) -> None:
        self._ctx = context
        self._cache: OrderedDict[tuple[int, datetime, str, str], SegmentRendering] = OrderedDict()
        self._drafts: dict[int, CampaignDraft] = {}
        # Segments whose links this worker has stored (committed): a segment's links depend
        # on its content alone, which cannot change once sending started.
        self._stored: set[tuple[str, str]] = set()

    async def draft(self, campaign_id: int) -> CampaignDraft:
        """The campaign as this worker first read it for the send: its content cannot change
        once sending started (only drafts are editable), so one read serves every batch
        (until an A/B test's decision, which the remainder needs)."""
        found = self._drafts.get(campaign_id)
        if found is None or (found.ab is not None and not found.ab.decided):
            # An undecided A/B test is read again: the remainder's batches render the winner.
            found = await self._ctx.drafts.get(campaign_id)
            if len(self._drafts) >= RENDER_CACHE_SIZE:
                self._drafts.clear()
            self._drafts[campaign_id] = found
        return found

    def get(self, draft: CampaignDraft, segment: str, domain: str) -> SegmentRendering:
        key = (draft.campaign.id, draft.campaign.updated_at, segment, domain)
        found = self._cache.get(key)
        if found is None:
            signer = tracking_signer(self._ctx.secret())
            found = self._ctx.drafts.render_for_send(draft, segment, domain, signer)
            self._cache[key] = found
            while len(self._cache) > RENDER_CACHE_SIZE:
                self._cache.popitem(last=False)
        self._cache.move_to_end(key)
        return found

    async def store_links(self, conn: AsyncConnection, rendering: SegmentRendering) -> None:
        """Store a tracked segment's links in `conn`'s transaction, unless this worker already
        did. Storing is idempotent, so every worker may do it (and a rolled-back one again)."""
        if rendering.links and _key(rendering) not in self._stored:
            await campaign_links.store_links(
                conn,
                int(rendering.list_info.campaign_id),
                rendering.segment,
                rendering.links,
                self._ctx.now(),
            )

    def links_stored(self, rendering: SegmentRendering) -> None:
        """After the transaction of `store_links` committed: no need to store them again."""
        if rendering.links:
            if len(self._stored) >= STORED_SEGMENTS:
                self._stored.clear()
            self._stored.add(_key(rendering))


def _key(rendering: SegmentRendering) -> tuple[str, str]:
    return (rendering.list_info.campaign_id, rendering.segment)
