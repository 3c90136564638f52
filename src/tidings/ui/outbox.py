"""The outbox of the capture provider: captured mail with its headers, the HTML part in a
sandboxed frame and the text part."""

from __future__ import annotations

from email import message_from_bytes, policy
from email.message import EmailMessage
from typing import Annotated

from fastapi import APIRouter, Path, Query, Request
from fastapi.responses import HTMLResponse, Response

from tidings.ui.campaigns import PREVIEW_HEADERS
from tidings.ui.guard import Session, container_of
from tidings.ui.templating import PAGE_SIZE, UiRoute, one_page, page

router = APIRouter(prefix="/outbox", route_class=UiRoute)
MessageId = Annotated[int, Path(ge=1, le=2**62)]


def _parsed(raw: bytes) -> EmailMessage:
    message = message_from_bytes(raw, policy=policy.default)
    assert isinstance(message, EmailMessage)
    return message


def _part(message: EmailMessage, subtype: str) -> str | None:
    body = message.get_body(preferencelist=(subtype,))
    return None if body is None else str(body.get_content())


@router.get("")
async def captured(
    request: Request,
    session: Session,
    before: Annotated[int | None, Query(ge=1, le=2**62)] = None,
) -> HTMLResponse:
    container = container_of(request)
    rows = await container.captured_mail.list(before_id=before, limit=PAGE_SIZE + 1)
    shown, next_before = one_page(rows, key=lambda message: message.id)
    return page(
        request,
        session,
        "outbox.html",
        messages=shown,
        next_before=next_before,
        provider=container.settings.email.provider,
    )


@router.get("/{message_id}")
async def message(request: Request, session: Session, message_id: MessageId) -> HTMLResponse:
    captured = await container_of(request).captured_mail.get(message_id)
    parsed = _parsed(captured.raw)
    return page(
        request,
        session,
        "outbox_message.html",
        captured=captured,
        headers=[(name, str(value)) for name, value in parsed.items()],
        has_html=_part(parsed, "html") is not None,
        text=_part(parsed, "plain"),
    )


@router.get("/{message_id}/html")
async def message_html(request: Request, session: Session, message_id: MessageId) -> Response:
    captured = await container_of(request).captured_mail.get(message_id)
    html = _part(_parsed(captured.raw), "html") or ""
    return Response(html, media_type="text/html; charset=utf-8", headers=PREVIEW_HEADERS)
