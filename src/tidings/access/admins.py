"""Use cases for admin UI operators: accounts with argon2id passwords, sign-in rate-limited per
account and per client address, and server-side sessions with idle and absolute timeouts."""

from __future__ import annotations

import asyncio
import functools
import hashlib
import hmac
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from tidings.domain.audience import normalise_email
from tidings.domain.errors import InvalidInput, RateLimited, Unauthenticated
from tidings.domain.ratelimit import retry_after_seconds, window_start
from tidings.storage import admins as queries
from tidings.storage import ratelimits
from tidings.storage.admins import AdminRow
from tidings.storage.database import Database

if TYPE_CHECKING:
    from argon2 import PasswordHasher

MIN_PASSWORD_LENGTH = 12
MAX_PASSWORD_LENGTH = 1024  # argon2 takes any length; this only bounds the work per attempt
# A session's last-seen time is written at most this often, not on every page view.
TOUCH_RESOLUTION = timedelta(minutes=1)


@dataclass(frozen=True, slots=True)
class SessionPolicy:
    idle_timeout: timedelta
    absolute_timeout: timedelta


@dataclass(frozen=True, slots=True)
class SignInLimits:
    per_account: int
    per_ip: int
    window_seconds: int


@dataclass(frozen=True, slots=True)
class AdminSession:
    """A live session: who, and the token its forms must carry."""

    admin_id: int
    email: str
    csrf_token: str
    token_hash: str


@dataclass(frozen=True, slots=True)
class StartedSession:
    token: str  # for the cookie only; the database keeps its hash
    session: AdminSession


def _token_hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


class AdminAccounts:
    def __init__(
        self,
        db: Database,
        now: Callable[[], datetime],
        secret: Callable[[], str],
        *,
        policy: SessionPolicy,
        limits: SignInLimits,
    ) -> None:
        self._db = db
        self._now = now
        self._secret = secret
        self._policy = policy
        self._limits = limits
        self._decoy_hash: str | None = None

    @functools.cached_property
    def _hasher(self) -> PasswordHasher:
        # argon2 is loaded by the first password operation: a worker only prunes sessions.
        from argon2 import PasswordHasher

        return PasswordHasher()

    async def create(self, email: str, password: str) -> AdminRow:
        """A new operator. Conflict when the address has an account already."""
        address = normalise_email(email)
        _check_password(password)
        password_hash = await asyncio.to_thread(self._hasher.hash, password)
        async with self._db.write() as conn:
            return await queries.insert_admin(
                conn, email=address.key, password_hash=password_hash, now=self._now()
            )

    async def list(self) -> list[AdminRow]:
        async with self._db.read() as conn:
            return await queries.list_admins(conn)

    async def sign_in(self, email: str, password: str, *, client_ip: str | None) -> StartedSession:
        """A new session for the right email and password. Every attempt counts against the
        account's and the address's limits (RateLimited past them); a wrong pair raises
        Unauthenticated without saying which half was wrong."""
        email_key = email.strip().lower()[:320]
        await self._count_attempt(email_key, client_ip)
        async with self._db.read() as conn:
            admin = await queries.get_admin_by_email(conn, email_key)
        if admin is None:
            # Spend the same work as a real check, so timing does not reveal accounts.
            await asyncio.to_thread(self._verifies, await self._decoy(), password)
            raise Unauthenticated("the email or password is not right")
        if len(password) > MAX_PASSWORD_LENGTH or not await asyncio.to_thread(
            self._verifies, admin.password_hash, password
        ):
            raise Unauthenticated("the email or password is not right")
        rehashed = None
        if self._hasher.check_needs_rehash(admin.password_hash):
            rehashed = await asyncio.to_thread(self._hasher.hash, password)
        token = secrets.token_urlsafe(32)
        csrf_token = secrets.token_urlsafe(32)
        now = self._now()
        async with self._db.write() as conn:
            await queries.record_sign_in(conn, admin.id, now=now, password_hash=rehashed)
            await queries.insert_session(
                conn,
                token_hash=_token_hash(token),
                admin_id=admin.id,
                csrf_token=csrf_token,
                now=now,
            )
        session = AdminSession(admin.id, admin.email, csrf_token, _token_hash(token))
        return StartedSession(token=token, session=session)

    async def session(self, token: str) -> AdminSession | None:
        """The live session for a cookie's token, or None (unknown, idle too long, or past its
        absolute lifetime: an expired session is deleted)."""
        if not token or len(token) > 100:
            return None
        token_hash = _token_hash(token)
        now = self._now()
        async with self._db.read() as conn:
            row = await queries.get_session(conn, token_hash)
            admin = None if row is None else await queries.get_admin(conn, row.admin_id)
        if row is None or admin is None:
            return None
        if (
            now - row.last_seen_at > self._policy.idle_timeout
            or now - row.created_at > self._policy.absolute_timeout
        ):
            async with self._db.write() as conn:
                await queries.delete_session(conn, token_hash)
            return None
        if now - row.last_seen_at >= TOUCH_RESOLUTION:
            async with self._db.write() as conn:
                await queries.touch_session(conn, token_hash, now=now)
        return AdminSession(admin.id, admin.email, row.csrf_token, token_hash)

    async def sign_out(self, session: AdminSession) -> None:
        async with self._db.write() as conn:
            await queries.delete_session(conn, session.token_hash)

    async def sign_out_everywhere(self, admin_id: int) -> int:
        """End every session of the operator (a lost laptop); returns how many ended."""
        async with self._db.write() as conn:
            return await queries.delete_sessions_of(conn, admin_id)

    async def prune(self) -> int:
        """Delete expired sessions (the worker's maintenance pass)."""
        now = self._now()
        async with self._db.write() as conn:
            return await queries.delete_sessions_before(
                conn,
                seen_before=now - self._policy.idle_timeout,
                created_before=now - self._policy.absolute_timeout,
            )

    async def _count_attempt(self, email_key: str, client_ip: str | None) -> None:
        now = self._now()
        window = self._limits.window_seconds
        start = window_start(now, window)
        secret = self._secret().encode()
        # Buckets hold keyed hashes: the table never stores an address or an IP in clear.
        buckets = [(_bucket(secret, "admin-login:", email_key), self._limits.per_account)]
        if client_ip:
            buckets.append((_bucket(secret, "admin-login-ip:", client_ip), self._limits.per_ip))
        async with self._db.write() as conn:
            over = [
                limit
                for bucket, limit in buckets
                if await ratelimits.hit(conn, bucket, start) > limit
            ]
        if over:
            raise RateLimited(
                "too many sign-in attempts; try again later",
                retry_after_seconds=retry_after_seconds(now, window),
            )

    def _verifies(self, password_hash: str, password: str) -> bool:
        from argon2.exceptions import InvalidHashError, VerificationError

        try:
            return self._hasher.verify(password_hash, password)
        except (VerificationError, InvalidHashError):
            return False

    async def _decoy(self) -> str:
        if self._decoy_hash is None:
            self._decoy_hash = await asyncio.to_thread(self._hasher.hash, secrets.token_urlsafe(16))
        return self._decoy_hash


def _bucket(secret: bytes, prefix: str, value: str) -> str:
    digest = hmac.new(secret, (prefix + value).encode(), hashlib.sha256).hexdigest()
    return prefix + digest[:40]


def _check_password(password: str) -> None:
    if not MIN_PASSWORD_LENGTH <= len(password) <= MAX_PASSWORD_LENGTH:
        raise InvalidInput(
            f"password must be {MIN_PASSWORD_LENGTH}-{MAX_PASSWORD_LENGTH} characters",
            field="password",
        )
