"""Admin suppression list: suppress, lift (recorded with who and why), check, list (AUD-8)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from fastapi import APIRouter, Query, status
from pydantic import BaseModel, Field

from tidings.api.deps import AdminKeyId, ContainerDep
from tidings.api.pagination import Cursor, Limit, Page, decode_cursor, page_of
from tidings.api.schemas import RecordView, RequestBody

router = APIRouter(prefix="/suppressions", tags=["admin: suppressions"])


class SuppressionCreate(RequestBody):
    email: str = Field(max_length=320)
    reason: str = Field(
        default="admin",
        max_length=32,
        description="hard_bounce, complaint, admin or unsubscribe_all",
    )
    note: str | None = Field(default=None, max_length=500)


class SuppressionLift(RequestBody):
    email: str = Field(max_length=320)
    note: str = Field(min_length=1, max_length=500, description="Why it is lifted (recorded).")


class SuppressionPublic(RecordView):
    """Entries are keyed hashes: the list cannot be read back as addresses."""

    email_hash: str
    reason: str
    note: str | None
    created_by: str
    created_at: datetime


class SuppressionStatus(BaseModel):
    suppressed: bool


@router.post("", status_code=status.HTTP_201_CREATED, summary="Suppress an address site-wide")
async def suppress(
    container: ContainerDep, key_id: AdminKeyId, body: SuppressionCreate
) -> SuppressionStatus:
    await container.suppressions.suppress(
        body.email, reason=body.reason, note=body.note, actor=f"admin:{key_id}"
    )
    return SuppressionStatus(suppressed=True)


@router.post("/lift", summary="Lift a suppression (recorded with who and why)")
async def lift(
    container: ContainerDep, key_id: AdminKeyId, body: SuppressionLift
) -> SuppressionStatus:
    await container.suppressions.lift(body.email, note=body.note, actor=f"admin:{key_id}")
    return SuppressionStatus(suppressed=False)


@router.get("/check", summary="Is this address suppressed?")
async def check(
    container: ContainerDep, email: Annotated[str, Query(max_length=320)]
) -> SuppressionStatus:
    return SuppressionStatus(suppressed=await container.suppressions.is_suppressed(email))


@router.get("", summary="List suppressions")
async def list_suppressions(
    container: ContainerDep, limit: Limit = 100, cursor: Cursor = None
) -> Page[SuppressionPublic]:
    after = decode_cursor(cursor)
    rows = await container.suppressions.list(after_hash=str(after) if after else None, limit=limit)
    return page_of(rows, limit, SuppressionPublic.of, key=lambda row: row.email_hash)
