"""A newsletter's feed-to-email digest (AUT-2) on its page: follow, stop, run now."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Form, Path, Request
from fastapi.responses import RedirectResponse, Response

from tidings.campaigns.feeds.service import FeedRunFailed
from tidings.domain.errors import Conflict, InvalidInput, NotFound
from tidings.ui.guard import OperatorActor, Session, container_of
from tidings.ui.newsletters import edit_page
from tidings.ui.templating import UiRoute

router = APIRouter(prefix="/newsletters", route_class=UiRoute)
Slug = Annotated[str, Path(max_length=64)]


@router.post("/{current}/feed")
async def follow_feed(
    request: Request,
    session: Session,
    actor: OperatorActor,
    current: Slug,
    url: Annotated[str, Form(max_length=2000)],
    every: Annotated[str, Form(max_length=100)],
    mode: Annotated[str, Form(max_length=8)],
) -> Response:
    """Follow (or change) the feed; refused input is shown with the form as it was typed."""
    container = container_of(request)
    try:
        await container.feeds.follow(current, url, every, mode)
    except InvalidInput as refused:
        typed = {"url": url, "every": every, "mode": mode}
        return await edit_page(
            request, session, current, feed_error=refused.detail, feed_form=typed
        )
    await container.audit.record(
        actor,
        "newsletter.feed",
        f"newsletter:{current}",
        {"url": url, "every": every, "mode": mode},
    )
    return RedirectResponse(f"/admin/newsletters/{current}#feed", status_code=303)


@router.post("/{current}/feed/off")
async def stop_feed(
    request: Request, session: Session, actor: OperatorActor, current: Slug
) -> Response:
    container = container_of(request)
    if await container.feeds.stop(current):
        await container.audit.record(actor, "newsletter.feed_off", f"newsletter:{current}", {})
    return RedirectResponse(f"/admin/newsletters/{current}#feed", status_code=303)


@router.post("/{current}/feed/run")
async def run_feed(request: Request, session: Session, current: Slug) -> Response:
    """Read the feed now; the page says what came of it (a digest, nothing new, an error)."""
    container = container_of(request)
    try:
        result = await container.feeds.run_now(current)
    except (FeedRunFailed, NotFound, Conflict) as failed:
        return await edit_page(request, session, current, feed_error=failed.detail)
    if result.campaign_id is None:
        notice = "Nothing new in the feed: no campaign was made."
    else:
        notice = (
            f"Digest campaign {result.campaign_id} made with {result.item_count} "
            f"item{'s' if result.item_count != 1 else ''}"
            + (", queued to send." if result.feed.mode == "send" else ", left as a draft.")
        )
    return await edit_page(request, session, current, feed_notice=notice)
