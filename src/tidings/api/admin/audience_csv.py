"""Admin CSV import and export of subscribers (AUD-9)."""

from __future__ import annotations

import dataclasses
import io
from typing import Annotated

from fastapi import APIRouter, Query, Request, Response
from pydantic import BaseModel, Field

from tidings.access.audit import export_entry
from tidings.api.deps import AdminKeyId, ContainerDep, KeyActor
from tidings.audience.import_header import parse_column_map
from tidings.domain.consent import SubscriptionState
from tidings.domain.errors import InvalidInput

router = APIRouter(prefix="/subscribers", tags=["admin: subscribers"])


class RowErrorPublic(BaseModel):
    line: int
    field: str
    message: str
    column: str | None = Field(description="The column as the file names it.")
    value: str | None = Field(description="The cell as the file has it (up to 200 characters).")


class LabelChangePublic(BaseModel):
    written: str = Field(description="The label as the file writes it.")
    kept: str = Field(description="The label as tidings keeps it.")
    rows: int


class ImportResult(BaseModel):
    total_rows: int
    created: int
    updated: int
    unchanged: int
    suppressed: int
    skipped: int
    failed_rows: int
    warned_rows: int
    kept_unsubscribed: int
    mailable: int
    awaiting_confirmation: int
    ignored_columns: list[str]
    attribute_columns: list[str] = Field(
        description="Columns read into custom fields (listmonk's `attributes` JSON included)."
    )
    errors: list[RowErrorPublic] = Field(description="Rows not imported: why, where, what.")
    warnings: list[RowErrorPublic] = Field(
        description="Values skipped in rows that were imported (a bad tier, an unusable label)."
    )
    label_changes: list[LabelChangePublic] = Field(
        description="Labels normalised to tidings' rule, e.g. 'Press Contact' → 'press-contact'."
    )


@router.post(
    "/import",
    summary="Import subscribers from CSV (text/csv body); per-row errors with line numbers",
    openapi_extra={"requestBody": {"content": {"text/csv": {"schema": {"type": "string"}}}}},
)
async def import_subscribers(
    container: ContainerDep,
    key_id: AdminKeyId,
    request: Request,
    newsletter: Annotated[str, Query(max_length=64, description="Default newsletter slug.")],
    column_map: Annotated[
        list[str] | None,
        Query(
            alias="map",
            max_length=50,
            description="COLUMN=FIELD: read the file's COLUMN as FIELD; COLUMN= ignores it. "
            "Repeat for several.",
        ),
    ] = None,
    assert_consent: Annotated[
        bool,
        Query(
            description="You have every person's consent: rows without a status (or another "
            "tool's subscribed/active/enabled) import confirmed, with you as the evidence."
        ),
    ] = False,
) -> ImportResult:
    """The delimiter (`,`, `;`, tab) is detected; common exports' column names are read as
    ours; a one-column file of addresses needs no header."""
    mapping = parse_column_map(entry[:200] for entry in column_map or [])
    raw = await request.body()  # size-capped by http.max_body_bytes
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise InvalidInput("the CSV must be UTF-8", field="body") from None
    report = await container.importer.import_csv(
        io.StringIO(text, newline=""),
        newsletter_slug=newsletter,
        actor=f"admin:{key_id}",
        column_map=mapping,
        assert_consent=assert_consent,
    )
    return ImportResult.model_validate(dataclasses.asdict(report))


@router.get("/export", summary="Export a filtered audience as CSV", response_class=Response)
async def export_subscribers(
    container: ContainerDep,
    actor: KeyActor,
    newsletter: Annotated[str | None, Query(max_length=64)] = None,
    state: SubscriptionState | None = None,
    tier: Annotated[str | None, Query(max_length=16)] = None,
    label: Annotated[str | None, Query(max_length=64)] = None,
) -> Response:
    out = io.StringIO()
    filters = {
        "newsletter": newsletter,
        "state": state.value if state else None,
        "tier": tier,
        "label": label,
    }
    rows = await container.importer.export_csv(out, **filters)
    await container.audit.record_entry(actor, export_entry(rows, **filters))
    return Response(
        out.getvalue(),
        media_type="text/csv; charset=utf-8",
        headers={"Content-Disposition": 'attachment; filename="subscribers.csv"'},
    )
