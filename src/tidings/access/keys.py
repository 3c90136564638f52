"""Use cases for admin API keys: create (shown once), list, revoke, authenticate."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from tidings.access.audit import AuditLog
from tidings.domain.apikeys import generate_key, hashes_match, parse_key
from tidings.domain.audit import Actor
from tidings.domain.errors import InvalidInput, NotFound, Unauthenticated
from tidings.domain.roles import Forbidden, Role
from tidings.storage import apikeys as queries
from tidings.storage.apikeys import ApiKeyRow

__all__ = ["ApiKeyRow", "ApiKeys", "CreatedKey"]
from tidings.storage.database import Database

LAST_USE_RESOLUTION = timedelta(minutes=1)
MAX_NAME_LENGTH = 200


@dataclass(frozen=True, slots=True)
class CreatedKey:
    key: ApiKeyRow
    token: str  # the only time the whole key exists outside the caller's hands


class ApiKeys:
    def __init__(
        self, db: Database, now: Callable[[], datetime], audit: AuditLog | None = None
    ) -> None:
        self._db = db
        self._now = now
        self._audit = audit

    async def create(
        self,
        name: str,
        *,
        role: Role = Role.OWNER,
        minted_by: ApiKeyRow | None = None,
        actor: Actor | None = None,
    ) -> CreatedKey:
        """A new key with `role`. A key minted by another key (`minted_by`) cannot have more
        rights than it, and is revoked with it."""
        if minted_by is not None and not Role(minted_by.role).allows(role):
            raise Forbidden(f"a {minted_by.role} key cannot create an {role} key")
        name = name.strip()
        if not name or len(name) > MAX_NAME_LENGTH or not name.isprintable():
            raise InvalidInput(
                f"name must be 1-{MAX_NAME_LENGTH} printable characters", field="name"
            )
        generated = generate_key()
        async with self._db.write() as conn:
            await queries.insert_key(
                conn,
                key_id=generated.key_id,
                name=name,
                secret_hash=generated.secret_hash,
                role=str(role),
                parent_id=minted_by.id if minted_by is not None else None,
                now=self._now(),
            )
            row = await queries.get_key(conn, generated.key_id)
        assert row is not None
        if actor is not None and self._audit is not None:
            await self._audit.record(actor, "key.created", f"key:{row.id}", {"role": role})
        return CreatedKey(key=row, token=generated.token)

    async def list(self, *, after_id: str | None = None, limit: int = 100) -> list[ApiKeyRow]:
        async with self._db.read() as conn:
            return await queries.list_keys(conn, after_id=after_id, limit=limit)

    async def revoke(self, key_id: str, *, actor: Actor | None = None) -> int:
        """Revoke the key and the keys minted from it; returns how many were live."""
        async with self._db.write() as conn:
            if await queries.get_key(conn, key_id) is None:
                raise NotFound(f"no API key with id {key_id!r}")
            revoked = await queries.revoke_key(conn, key_id, now=self._now())
        if actor is not None and self._audit is not None:
            await self._audit.record(actor, "key.revoked", f"key:{key_id}", {"revoked": revoked})
        return revoked

    async def authenticate(self, token: str) -> ApiKeyRow:
        """The key's row if `token` is a live key; records the use. Raises Unauthenticated."""
        presented = parse_key(token)
        if presented is None:
            raise Unauthenticated("the API key is malformed")
        async with self._db.read() as conn:
            row = await queries.get_key(conn, presented.key_id)
        if row is None or not hashes_match(row.secret_hash, presented):
            raise Unauthenticated("the API key is not valid")
        if row.revoked_at is not None:
            raise Unauthenticated("the API key has been revoked")
        now = self._now()
        if row.last_used_at is None or row.last_used_at < now - LAST_USE_RESOLUTION:
            async with self._db.write() as conn:
                await queries.touch_key(conn, row.id, now=now, resolution=LAST_USE_RESOLUTION)
        return row
