"""Admin API keys: list, create (the key is shown once), revoke."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal

from fastapi import APIRouter, Path, status
from pydantic import Field

from tidings.api.deps import CallingKey, ContainerDep, KeyActor
from tidings.api.pagination import Cursor, Limit, Page, decode_cursor, page_of
from tidings.api.schemas import RecordView, RequestBody
from tidings.domain.roles import Role

router = APIRouter(prefix="/keys", tags=["admin: keys"])
KeyId = Annotated[str, Path(pattern=r"^[a-z0-9]{10}$", description="The key's id part.")]


class ApiKeyCreate(RequestBody):
    name: str = Field(min_length=1, max_length=200, description="What the key is for.")
    role: Literal["owner", "editor", "viewer"] | None = Field(
        default=None,
        description="What the key may do; at most the calling key's role, which is the default.",
    )


class ApiKeyPublic(RecordView):
    id: str
    name: str
    role: str
    parent_id: str | None = Field(description="The key that created this one, if any.")
    created_at: datetime
    last_used_at: datetime | None
    revoked_at: datetime | None


class ApiKeyCreated(ApiKeyPublic):
    key: str = Field(description="The whole key. It is shown only this once.")


@router.get("", summary="List API keys")
async def list_keys(
    container: ContainerDep, limit: Limit = 100, cursor: Cursor = None
) -> Page[ApiKeyPublic]:
    after = decode_cursor(cursor)
    rows = await container.api_keys.list(after_id=str(after) if after else None, limit=limit)
    return page_of(rows, limit, ApiKeyPublic.of, key=lambda row: row.id)


@router.post("", status_code=status.HTTP_201_CREATED, summary="Create an API key")
async def create_key(
    container: ContainerDep, body: ApiKeyCreate, caller: CallingKey, actor: KeyActor
) -> ApiKeyCreated:
    """A key is revoked with the key that created it, and never has more rights than it."""
    created = await container.api_keys.create(
        body.name, role=Role(body.role or caller.role), minted_by=caller, actor=actor
    )
    return ApiKeyCreated(**ApiKeyPublic.of(created.key).model_dump(), key=created.token)


@router.delete("/{key_id}", status_code=status.HTTP_204_NO_CONTENT, summary="Revoke an API key")
async def revoke_key(container: ContainerDep, key_id: KeyId, actor: KeyActor) -> None:
    """Revokes the key and every key created with it, at any depth."""
    await container.api_keys.revoke(key_id, actor=actor)
