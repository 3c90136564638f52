"""Newsletters: the list, a form to create one and the same form to edit it."""

from __future__ import annotations

import html
from typing import Annotated

from fastapi import APIRouter, Depends, Form, Path, Query, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from tidings.access.audit import newsletter_entries
from tidings.audience.newsletters import TRACKING_MEANINGS, NewsletterChanges, NewsletterFields
from tidings.domain.errors import Conflict, InvalidInput
from tidings.ui.guard import OperatorActor, Session, container_of
from tidings.ui.templating import UiRoute, page

router = APIRouter(prefix="/newsletters", route_class=UiRoute)
Slug = Annotated[str, Path(max_length=64)]


class NewsletterForm:
    """The posted fields, as the form names them (an unticked checkbox posts nothing)."""

    def __init__(
        self,
        slug: Annotated[str, Form(max_length=64)],
        name: Annotated[str, Form(max_length=200)],
        sender_name: Annotated[str, Form(max_length=200)],
        sender_address: Annotated[str, Form(max_length=320)],
        description: Annotated[str, Form(max_length=2000)] = "",
        reply_to: Annotated[str, Form(max_length=320)] = "",
        double_opt_in: Annotated[str | None, Form(max_length=8)] = None,
        archive: Annotated[str | None, Form(max_length=8)] = None,
        tracking: Annotated[str | None, Form(max_length=16)] = None,
    ) -> None:
        self.slug = slug.strip()
        self.name = name.strip()
        self.sender_name = sender_name.strip()
        self.sender_address = sender_address.strip()
        self.description = description.strip()
        self.reply_to = reply_to.strip() or None
        self.double_opt_in = double_opt_in is not None
        self.archive = archive is not None
        if tracking is not None:  # a post without it (a script's) keeps the mode as it is
            self.tracking = tracking


@router.get("")
async def list_newsletters(request: Request, session: Session) -> HTMLResponse:
    newsletters = await container_of(request).newsletters.list()
    return page(request, session, "newsletters.html", newsletters=newsletters)


@router.get("/new")
async def new_newsletter(request: Request, session: Session) -> HTMLResponse:
    return page(
        request,
        session,
        "newsletter_form.html",
        newsletter=None,
        error=None,
        tracking_meanings=TRACKING_MEANINGS,
    )


@router.post("/new")
async def create_newsletter(
    request: Request,
    session: Session,
    actor: OperatorActor,
    form: Annotated[NewsletterForm, Depends()],
) -> Response:
    container = container_of(request)
    try:
        row = await container.newsletters.create(NewsletterFields(**vars(form)))
    except (InvalidInput, Conflict) as refused:
        return page(
            request,
            session,
            "newsletter_form.html",
            tracking_meanings=TRACKING_MEANINGS,
            status_code=422,
            newsletter=form,
            error=refused.detail,
        )
    await container.audit.record_entries(actor, newsletter_entries(row))
    return RedirectResponse("/admin/newsletters", status_code=303)


def embed_snippet(public_url: str, slug: str, name: str) -> str:
    """The HTML another site pastes to show this newsletter's signup form (API-5)."""
    src = f"{public_url.rstrip('/')}/subscribe/{slug}/embed"
    title = html.escape(f"Subscribe to {name}")
    return (
        f'<iframe src="{src}" title="{title}" width="100%" height="420" loading="lazy" '
        'style="border:0;max-width:480px"></iframe>'
    )


@router.get("/{current}")
async def edit_newsletter(
    request: Request,
    session: Session,
    current: Slug,
    sunset_preview: Annotated[bool, Query()] = False,
) -> HTMLResponse:
    return await edit_page(request, session, current, sunset_preview=sunset_preview)


async def edit_page(
    request: Request,
    session: Session,
    current: str,
    *,
    sunset_preview: bool = False,
    sunset_error: str | None = None,
    feed_error: str | None = None,
    feed_notice: str | None = None,
    feed_form: dict[str, str] | None = None,
) -> HTMLResponse:
    container = container_of(request)
    newsletter = await container.newsletters.get(current)
    public_url = container.audience.public_url.rstrip("/")
    # The dry run reads the whole list: only when asked for, not on every visit.
    preview = await container.sunset.dry_run(current) if sunset_preview else None
    return page(
        request,
        session,
        "newsletter_form.html",
        status_code=422 if sunset_error or feed_error else 200,
        tracking_meanings=TRACKING_MEANINGS,
        newsletter=newsletter,
        editing=current,
        error=None,
        embed_snippet=embed_snippet(public_url, newsletter.slug, newsletter.name),
        archive_url=f"{public_url}/archive/{newsletter.slug}",
        sunset_preview=preview,
        sunset_error=sunset_error,
        feed=await container.feeds.get(current),
        feed_error=feed_error,
        feed_notice=feed_notice,
        feed_form=feed_form or {},
    )


@router.post("/{current}/sunset")
async def set_sunset(
    request: Request,
    session: Session,
    actor: OperatorActor,
    current: Slug,
    after_days: Annotated[int, Form()],
    min_sends: Annotated[int, Form()],
    grace_days: Annotated[int, Form()],
    enabled: Annotated[str | None, Form(max_length=8)] = None,
) -> Response:
    """The sunset policy's settings (ENG-7), from the newsletter's page; audited."""
    container = container_of(request)
    changes = {
        "enabled": enabled is not None,
        "after_days": after_days,
        "min_sends": min_sends,
        "grace_days": grace_days,
    }
    try:
        row = await container.newsletters.get(current)
        await container.sunset.configure(current, **changes)
    except InvalidInput as refused:
        return await edit_page(request, session, current, sunset_error=refused.detail)
    await container.audit.record(actor, "newsletter.sunset", f"newsletter:{row.id}", changes)
    return RedirectResponse(f"/admin/newsletters/{current}", status_code=303)


@router.post("/{current}")
async def update_newsletter(
    request: Request,
    session: Session,
    actor: OperatorActor,
    current: Slug,
    form: Annotated[NewsletterForm, Depends()],
) -> Response:
    changes = NewsletterChanges(**vars(form))
    container = container_of(request)
    try:
        before = await container.newsletters.get(current)
        row = await container.newsletters.update(current, changes)
    except (InvalidInput, Conflict) as refused:
        return page(
            request,
            session,
            "newsletter_form.html",
            tracking_meanings=TRACKING_MEANINGS,
            status_code=422,
            newsletter=form,
            editing=current,
            error=refused.detail,
        )
    await container.audit.record_entries(actor, newsletter_entries(row, before))
    return RedirectResponse("/admin/newsletters", status_code=303)
