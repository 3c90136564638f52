"""Admin API for a newsletter's feed-to-email digest (AUT-2): show, follow, stop, run now."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal

from fastapi import APIRouter, Path, status
from pydantic import Field

from tidings.api.deps import ContainerDep, KeyActor
from tidings.api.schemas import RecordView, RequestBody
from tidings.domain.errors import NotFound

router = APIRouter(prefix="/newsletters", tags=["admin: newsletters"])
Slug = Annotated[str, Path(max_length=64)]
EVERY_HELP = (
    'Days and a time in the site\'s time zone (site.timezone): "mon 09:00", "mon,thu 07:30", '
    '"weekdays 08:00", "daily 18:00".'
)


class FeedFollow(RequestBody):
    url: str = Field(min_length=1, max_length=2000, description="The RSS or Atom feed's URL.")
    every: str = Field(default="mon 09:00", max_length=100, description=EVERY_HELP)
    mode: Literal["draft", "send"] = Field(
        default="draft",
        description="draft: each digest waits as a draft to review; send: sent at once.",
    )


class FeedTakenItem(RecordView):
    title: str
    link: str | None
    campaign_id: int | None
    recorded_at: datetime


class FeedPublic(RecordView):
    url: str
    every: str = Field(description=EVERY_HELP)
    mode: str
    followed_at: datetime = Field(description="Items dated before this are not sent.")
    next_run_at: datetime = Field(description="The next read: the schedule, or the next try.")
    last_run_at: datetime | None
    last_success_at: datetime | None
    last_error: str | None = Field(description="Why the last read failed; null once one works.")
    failures: int = Field(description="Failed reads in a row.")
    last_campaign_id: int | None
    recent_items: list[FeedTakenItem]


class FeedRun(RecordView):
    campaign_id: int | None = Field(description="The digest made; null when nothing was new.")
    item_count: int
    not_modified: bool = Field(description="The server answered 304: the feed is unchanged.")
    feed: FeedPublic


async def _feed(container: ContainerDep, slug: str) -> FeedPublic:
    view = await container.feeds.get(slug)
    if view is None:
        raise NotFound(f"newsletter {slug!r} follows no feed", field="feed")
    row = view.feed
    return FeedPublic(
        url=row.url,
        every=row.schedule,
        mode=row.mode,
        followed_at=row.followed_at,
        next_run_at=row.next_run_at,
        last_run_at=row.last_run_at,
        last_success_at=row.last_success_at,
        last_error=row.last_error,
        failures=row.failures,
        last_campaign_id=row.last_campaign_id,
        recent_items=[FeedTakenItem.of(item) for item in view.recent],
    )


@router.get("/{slug}/feed", summary="The newsletter's feed, its last success or error")
async def get_feed(container: ContainerDep, slug: Slug) -> FeedPublic:
    return await _feed(container, slug)


@router.put("/{slug}/feed", summary="Follow a feed (read once now to check it)")
async def put_feed(
    container: ContainerDep, actor: KeyActor, slug: Slug, body: FeedFollow
) -> FeedPublic:
    await container.feeds.follow(slug, body.url, body.every, body.mode)
    await container.audit.record(actor, "newsletter.feed", f"newsletter:{slug}", body.model_dump())
    return await _feed(container, slug)


@router.delete(
    "/{slug}/feed", status_code=status.HTTP_204_NO_CONTENT, summary="Stop following the feed"
)
async def delete_feed(container: ContainerDep, actor: KeyActor, slug: Slug) -> None:
    if not await container.feeds.stop(slug):
        raise NotFound(f"newsletter {slug!r} follows no feed", field="feed")
    await container.audit.record(actor, "newsletter.feed_off", f"newsletter:{slug}", {})


@router.post("/{slug}/feed/run", summary="Read the feed now and make a digest of what is new")
async def run_feed(container: ContainerDep, slug: Slug) -> FeedRun:
    result = await container.feeds.run_now(slug)
    return FeedRun(
        campaign_id=result.campaign_id,
        item_count=result.item_count,
        not_modified=result.not_modified,
        feed=await _feed(container, slug),
    )
