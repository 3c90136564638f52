"""Named queries for admin UI accounts and their server-side sessions."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import delete, func, insert, select, update
from sqlalchemy.ext.asyncio import AsyncConnection

from tidings.domain.errors import Conflict
from tidings.storage.errors import constraint_errors
from tidings.storage.tables import admin_accounts, admin_recovery_codes, admin_sessions


@dataclass(frozen=True, slots=True)
class AdminRow:
    id: int
    email: str
    password_hash: str
    created_at: datetime
    last_sign_in_at: datetime | None
    role: str
    disabled_at: datetime | None
    password_changed_at: datetime | None
    totp_secret: str | None
    totp_enabled_at: datetime | None
    totp_last_step: int | None


@dataclass(frozen=True, slots=True)
class SessionRow:
    token_hash: str
    admin_id: int
    csrf_token: str
    created_at: datetime
    last_seen_at: datetime


async def insert_admin(
    conn: AsyncConnection, *, email: str, password_hash: str, role: str, now: datetime
) -> AdminRow:
    """Conflict (field `email`) when an account with the address exists."""
    taken = {
        "uq_admin_accounts_email": lambda: Conflict(
            "an admin account with this email exists", field="email"
        )
    }
    with constraint_errors(taken):
        result = await conn.execute(
            insert(admin_accounts)
            .values(email=email, password_hash=password_hash, role=role, created_at=now)
            .returning(admin_accounts)
        )
    return AdminRow(**result.one()._mapping)


async def get_admin_by_email(conn: AsyncConnection, email: str) -> AdminRow | None:
    found = (
        await conn.execute(select(admin_accounts).where(admin_accounts.c.email == email))
    ).first()
    return None if found is None else AdminRow(**found._mapping)


async def get_admin(conn: AsyncConnection, admin_id: int) -> AdminRow | None:
    found = (
        await conn.execute(select(admin_accounts).where(admin_accounts.c.id == admin_id))
    ).first()
    return None if found is None else AdminRow(**found._mapping)


async def list_admins(conn: AsyncConnection) -> list[AdminRow]:
    rows = await conn.execute(select(admin_accounts).order_by(admin_accounts.c.id))
    return [AdminRow(**row._mapping) for row in rows]


async def record_sign_in(
    conn: AsyncConnection, admin_id: int, *, now: datetime, password_hash: str | None
) -> None:
    """Stamp the sign-in; `password_hash` replaces the stored one when its parameters aged."""
    values: dict[str, object] = {"last_sign_in_at": now}
    if password_hash is not None:
        values["password_hash"] = password_hash
    await conn.execute(
        update(admin_accounts).where(admin_accounts.c.id == admin_id).values(**values)
    )


async def set_password(
    conn: AsyncConnection, admin_id: int, password_hash: str, *, now: datetime
) -> None:
    await conn.execute(
        update(admin_accounts)
        .where(admin_accounts.c.id == admin_id)
        .values(password_hash=password_hash, password_changed_at=now)
    )


async def rehash_password(conn: AsyncConnection, admin_id: int, password_hash: str) -> None:
    """The same password under newer hashing parameters (not a password change)."""
    await conn.execute(
        update(admin_accounts)
        .where(admin_accounts.c.id == admin_id)
        .values(password_hash=password_hash)
    )


async def update_admin(conn: AsyncConnection, admin_id: int, **values: object) -> None:
    """Set `role`, `disabled_at`, `totp_secret` or `totp_enabled_at` of one account."""
    allowed = {"role", "disabled_at", "totp_secret", "totp_enabled_at", "totp_last_step"}
    assert set(values) <= allowed, set(values) - allowed
    await conn.execute(
        update(admin_accounts).where(admin_accounts.c.id == admin_id).values(**values)
    )


async def delete_admin(conn: AsyncConnection, admin_id: int) -> None:
    """The account and, by cascade, its sessions and recovery codes."""
    await conn.execute(delete(admin_accounts).where(admin_accounts.c.id == admin_id))


async def count_active_owners(conn: AsyncConnection) -> int:
    found = await conn.execute(
        select(func.count())
        .select_from(admin_accounts)
        .where((admin_accounts.c.role == "owner") & admin_accounts.c.disabled_at.is_(None))
    )
    return int(found.scalar_one())


async def insert_session(
    conn: AsyncConnection, *, token_hash: str, admin_id: int, csrf_token: str, now: datetime
) -> None:
    await conn.execute(
        insert(admin_sessions).values(
            token_hash=token_hash,
            admin_id=admin_id,
            csrf_token=csrf_token,
            created_at=now,
            last_seen_at=now,
        )
    )


async def get_session(conn: AsyncConnection, token_hash: str) -> SessionRow | None:
    found = (
        await conn.execute(select(admin_sessions).where(admin_sessions.c.token_hash == token_hash))
    ).first()
    return None if found is None else SessionRow(**found._mapping)


async def touch_session(conn: AsyncConnection, token_hash: str, *, now: datetime) -> None:
    await conn.execute(
        update(admin_sessions)
        .where(admin_sessions.c.token_hash == token_hash)
        .values(last_seen_at=now)
    )


async def delete_session(conn: AsyncConnection, token_hash: str) -> None:
    await conn.execute(delete(admin_sessions).where(admin_sessions.c.token_hash == token_hash))


async def delete_sessions_of(
    conn: AsyncConnection, admin_id: int, *, keep_token_hash: str | None = None
) -> int:
    """End the operator's sessions, all of them or all but `keep_token_hash`."""
    condition = admin_sessions.c.admin_id == admin_id
    if keep_token_hash is not None:
        condition &= admin_sessions.c.token_hash != keep_token_hash
    result = await conn.execute(delete(admin_sessions).where(condition))
    return int(result.rowcount)


async def delete_sessions_before(
    conn: AsyncConnection, *, seen_before: datetime, created_before: datetime
) -> int:
    """Expired sessions: idle since `seen_before`, or begun before `created_before`."""
    result = await conn.execute(
        delete(admin_sessions).where(
            (admin_sessions.c.last_seen_at < seen_before)
            | (admin_sessions.c.created_at < created_before)
        )
    )
    return int(result.rowcount)


async def use_totp_step(conn: AsyncConnection, admin_id: int, step: int) -> bool:
    """Record `step` as used; False when it, or a later one, was used already (a replay)."""
    result = await conn.execute(
        update(admin_accounts)
        .where(
            (admin_accounts.c.id == admin_id)
            & (admin_accounts.c.totp_last_step.is_(None) | (admin_accounts.c.totp_last_step < step))
        )
        .values(totp_last_step=step)
    )
    return int(result.rowcount) == 1


async def replace_recovery_codes(
    conn: AsyncConnection, admin_id: int, code_hashes: list[str]
) -> None:
    await conn.execute(
        delete(admin_recovery_codes).where(admin_recovery_codes.c.admin_id == admin_id)
    )
    if code_hashes:
        await conn.execute(
            insert(admin_recovery_codes),
            [{"admin_id": admin_id, "code_hash": code_hash} for code_hash in code_hashes],
        )


async def use_recovery_code(
    conn: AsyncConnection, admin_id: int, code_hash: str, *, now: datetime
) -> bool:
    """Spend one unused recovery code; False when there is no such unused code."""
    result = await conn.execute(
        update(admin_recovery_codes)
        .where(
            (admin_recovery_codes.c.admin_id == admin_id)
            & (admin_recovery_codes.c.code_hash == code_hash)
            & admin_recovery_codes.c.used_at.is_(None)
        )
        .values(used_at=now)
    )
    return int(result.rowcount) == 1


async def count_unused_recovery_codes(conn: AsyncConnection, admin_id: int) -> int:
    found = await conn.execute(
        select(func.count())
        .select_from(admin_recovery_codes)
        .where(
            (admin_recovery_codes.c.admin_id == admin_id) & admin_recovery_codes.c.used_at.is_(None)
        )
    )
    return int(found.scalar_one())
