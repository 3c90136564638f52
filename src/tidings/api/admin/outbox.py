"""Admin view of locally captured mail (the `capture` provider)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from fastapi import APIRouter, Path, Response
from pydantic import Field

from tidings.api.deps import ContainerDep
from tidings.api.pagination import Cursor, Limit, Page, int_cursor, page_of
from tidings.api.schemas import RecordView

router = APIRouter(prefix="/outbox", tags=["admin: captured mail"])
MessageId = Annotated[int, Path(ge=1, le=2**62)]


class CapturedPublic(RecordView):
    id: int
    message_id: str
    sender: str
    recipients: list[str]
    subject: str
    size_bytes: int
    captured_at: datetime


@router.get("", summary="List captured messages, newest first")
async def list_captured(
    container: ContainerDep, limit: Limit = 50, cursor: Cursor = None
) -> Page[CapturedPublic]:
    messages = await container.captured_mail.list(before_id=int_cursor(cursor), limit=limit)
    return page_of(messages, limit, CapturedPublic.of, key=lambda message: message.id)


class MessageOutcomePublic(RecordView):
    """What the provider or the mailbox reported about a transactional message (PRV-6)."""

    delivered_at: datetime | None
    bounced_at: datetime | None
    bounce_kind: str | None = Field(description="hard or soft")
    bounce_code: str | None = Field(description="e.g. 550 or 5.1.1")
    complained_at: datetime | None


class CapturedDetail(CapturedPublic):
    outcome: MessageOutcomePublic | None = Field(
        description="Delivered, bounced or complained, as reported back; null for mail that "
        "is no transactional message (a campaign's) or captured before outcomes were kept"
    )


@router.get("/{message_id}", summary="One captured message's metadata and reported outcome")
async def get_captured(container: ContainerDep, message_id: MessageId) -> CapturedDetail:
    message = await container.captured_mail.get(message_id)
    outcome = await container.message_outcomes.of_message(message.message_id)
    return CapturedDetail(
        **CapturedPublic.of(message).model_dump(),
        outcome=None if outcome is None else MessageOutcomePublic.of(outcome),
    )


@router.get(
    "/{message_id}/raw",
    summary="The captured message as sent (message/rfc822)",
    response_class=Response,
)
async def get_captured_raw(container: ContainerDep, message_id: MessageId) -> Response:
    message = await container.captured_mail.get(message_id)
    return Response(message.raw, media_type="message/rfc822")
