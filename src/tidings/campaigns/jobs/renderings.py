"""The render cache of one worker's `send_batch` jobs (CMP-3): each campaign read once, each
segment rendered once, kept for the send."""

from __future__ import annotations

from collections import OrderedDict
from datetime import datetime

from tidings.campaigns.context import SendingContext
from tidings.campaigns.drafts import CampaignDraft
from tidings.rendering import SegmentRendering

RENDER_CACHE_SIZE = 16


class Renderings:
    """Each worker reads a campaign and renders each segment once, and keeps them for the send
    (CMP-3)."""

    def __init__(self, context: SendingContext) -> None:
        self._ctx = context
        self._cache: OrderedDict[tuple[int, datetime, str, str], SegmentRendering] = OrderedDict()
        self._drafts: dict[int, CampaignDraft] = {}

    async def draft(self, campaign_id: int) -> CampaignDraft:
        """The campaign as this worker first read it for the send: its content cannot change
        once sending started (only drafts are editable), so one read serves every batch."""
        found = self._drafts.get(campaign_id)
        if found is None:
            found = await self._ctx.drafts.get(campaign_id)
            if len(self._drafts) >= RENDER_CACHE_SIZE:
                self._drafts.clear()
            self._drafts[campaign_id] = found
        return found

    def get(self, draft: CampaignDraft, segment: str, domain: str) -> SegmentRendering:
        key = (draft.campaign.id, draft.campaign.updated_at, segment, domain)
        found = self._cache.get(key)
        if found is None:
            found = self._ctx.drafts.render_for_send(draft, segment, domain)
            self._cache[key] = found
            while len(self._cache) > RENDER_CACHE_SIZE:
                self._cache.popitem(last=False)
        self._cache.move_to_end(key)
        return found
