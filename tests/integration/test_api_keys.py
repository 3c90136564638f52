"""Admin API keys: shown once, stored hashed, revocable, last use recorded (API-2)."""

from datetime import timedelta

import pytest
from sqlalchemy import select

from tests.support.clock import Clock
from tidings.access.keys import ApiKeys
from tidings.domain.errors import InvalidInput, NotFound, Unauthenticated
from tidings.storage.database import Database
from tidings.storage.tables import api_keys


async def test_key_is_stored_only_as_a_hash(db: Database) -> None:
    """A copy of the database must not contain a usable key."""
    created = await ApiKeys(db, Clock()).create("deploy")
    async with db.read() as conn:
        rows = (await conn.execute(select(api_keys))).mappings().all()
    assert len(rows) == 1
    assert all(created.token not in str(value) for value in rows[0].values())
    assert created.token.split("_")[2] not in str(dict(rows[0]))


async def test_authenticate_accepts_live_key_and_records_last_use(db: Database) -> None:
    """Operators spot unused keys by their last use, so authentication records it."""
    clock = Clock()
    keys = ApiKeys(db, clock)
    created = await keys.create("deploy")
    clock.now += timedelta(minutes=5)
    row = await keys.authenticate(created.token)
    assert row.id == created.key.id
    assert (await keys.list())[0].last_used_at == clock.now


async def test_revoked_key_is_refused(db: Database) -> None:
    """A leaked key stops working the moment it is revoked."""
    keys = ApiKeys(db, Clock())
    created = await keys.create("old")
    await keys.revoke(created.key.id)
    with pytest.raises(Unauthenticated, match="revoked"):
        await keys.authenticate(created.token)


async def test_key_with_right_id_but_wrong_secret_is_refused(db: Database) -> None:
    """The id part is public (it appears in lists); it must not be enough to authenticate."""
    from tidings.domain.apikeys import _checksum

    keys = ApiKeys(db, Clock())
    created = await keys.create("x")
    body = f"tdk_{created.key.id}_{'A' * 32}"
    with pytest.raises(Unauthenticated, match="not valid"):
        await keys.authenticate(body + _checksum(body))


async def test_bad_names_and_unknown_ids_are_clear_errors(db: Database) -> None:
    """Mistakes at the CLI get a clear error, not a stack trace."""
    keys = ApiKeys(db, Clock())
    with pytest.raises(InvalidInput):
        await keys.create("   ")
    with pytest.raises(InvalidInput):
        await keys.create("line\nbreak")
    with pytest.raises(NotFound):
        await keys.revoke("0123456789")
    assert await keys.list() == []
