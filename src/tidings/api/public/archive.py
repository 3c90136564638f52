"""The public archive of a newsletter's sent issues and its feeds (API-4).

Pages and feeds hold no personal data, so unlike the pages reached from an email they may be
cached by browsers and proxies: each answer carries `Cache-Control`, `Last-Modified` and an
`ETag`, and a matching `If-None-Match` gets a bodiless 304.
"""

from __future__ import annotations

import hashlib
import re
from email.utils import format_datetime
from typing import Annotated

from fastapi import APIRouter, Path, Request
from fastapi.responses import HTMLResponse, Response

from tidings.api.deps import ContainerDep
from tidings.bootstrap import Container
from tidings.campaigns.archive import NO_ISSUE, ArchiveDocument
from tidings.domain.errors import NotFound

router = APIRouter(tags=["public archive"])
# Read as text and checked by the archive: a reader who follows a mangled link gets the
# not-found page, not a JSON validation error.
Slug = Annotated[str, Path(description="A newsletter's slug.")]
CampaignId = Annotated[str, Path(description="The sent campaign's id.")]
_CAMPAIGN_ID = re.compile(r"[1-9][0-9]{0,17}")
# Short enough that a new issue shows up soon after it is sent.
CACHE_CONTROL = "public, max-age=300"
ATOM = "application/atom+xml; charset=utf-8"
RSS = "application/rss+xml; charset=utf-8"
HTML = "text/html; charset=utf-8"


def _cached(request: Request, document: ArchiveDocument, media_type: str) -> Response:
    etag = '"' + hashlib.sha256(document.body).hexdigest()[:32] + '"'
    headers = {
        "Cache-Control": CACHE_CONTROL,
        "ETag": etag,
        "Last-Modified": format_datetime(document.last_modified, usegmt=True),
    }
    if etag in request.headers.get("if-none-match", ""):
        return Response(status_code=304, headers=headers)
    return Response(document.body, media_type=media_type, headers=headers)


def _not_found(container: Container, missing: NotFound) -> HTMLResponse:
    # People reach these addresses from a link or a feed reader's "open in browser": a page.
    page = container.pages.not_found(message=missing.detail, subscribe_url="/subscribe")
    return HTMLResponse(page, status_code=404)


@router.get("/archive/{slug}", response_class=HTMLResponse, summary="Archive index")
async def archive_index(container: ContainerDep, request: Request, slug: Slug) -> Response:
    try:
        return _cached(request, await container.archive.index(slug), HTML)
    except NotFound as missing:
        return _not_found(container, missing)


@router.get("/archive/{slug}/feed.atom", response_class=Response, summary="Atom feed")
async def archive_atom(container: ContainerDep, request: Request, slug: Slug) -> Response:
    return _cached(request, await container.archive.feed(slug, "atom"), ATOM)


@router.get("/archive/{slug}/feed.rss", response_class=Response, summary="RSS 2.0 feed")
async def archive_rss(container: ContainerDep, request: Request, slug: Slug) -> Response:
    return _cached(request, await container.archive.feed(slug, "rss"), RSS)


@router.get("/archive/{slug}/{campaign_id}", response_class=HTMLResponse, summary="A sent issue")
async def archive_issue(
    container: ContainerDep, request: Request, slug: Slug, campaign_id: CampaignId
) -> Response:
    try:
        if not _CAMPAIGN_ID.fullmatch(campaign_id):
            raise NotFound(NO_ISSUE)
        return _cached(request, await container.archive.issue(slug, int(campaign_id)), HTML)
    except NotFound as missing:
        return _not_found(container, missing)
