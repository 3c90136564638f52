"""Use cases for admin UI operators: accounts with argon2id passwords and roles, sign-in
limited so that no stranger can lock the owner out, and server-side sessions with idle and
absolute timeouts."""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy.ext.asyncio import AsyncConnection

from tidings.access.audit import AuditLog
from tidings.access.passwords import PasswordHashing, check_password
from tidings.access.sign_in_limits import SignInClient, SignInLimiter
from tidings.access.two_factor import Enrolment, TwoFactor
from tidings.domain.audience import normalise_email
from tidings.domain.audit import Actor
from tidings.domain.errors import Conflict, NotFound, RateLimited, Unauthenticated
from tidings.domain.roles import Role
from tidings.storage import admins as queries
from tidings.storage.admins import AdminRow
from tidings.storage.database import Database

# A session's last-seen time is written at most this often, not on every page view.
TOUCH_RESOLUTION = timedelta(minutes=1)
_REFUSED = "the email or password is not right"


@dataclass(frozen=True, slots=True)
class SessionPolicy:
    idle_timeout: timedelta
    absolute_timeout: timedelta


@dataclass(frozen=True, slots=True)
class AdminSession:
    """A live session: who, their role, and the token its forms must carry."""

    admin_id: int
    email: str
    csrf_token: str
    token_hash: str
    role: Role = Role.OWNER
    two_factor: bool = False  # signed in to an account with two-factor sign-in on


@dataclass(frozen=True, slots=True)
class SecondFactorNeeded:
    """The password was right; the code from the app comes next, with this token."""

    pending_token: str


@dataclass(frozen=True, slots=True)
class StartedSession:
    token: str  # for the cookie only; the database keeps its hash
    session: AdminSession
    known_client_token: str  # for the known-client cookie (sign_in_limits)


def _token_hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def _email_key(email: str) -> str:
    return email.strip().lower()[:320]


class AdminAccounts:
    def __init__(
        self,
        db: Database,
        now: Callable[[], datetime],
        *,
        policy: SessionPolicy,
        limiter: SignInLimiter,
        passwords: PasswordHashing,
        audit: AuditLog,
        two_factor: TwoFactor,
        site_name: str = "tidings",
        require_two_factor: bool = False,
    ) -> None:
        self._db = db
        self._now = now
        self._policy = policy
        self._limiter = limiter
        self._passwords = passwords
        self._audit = audit
        self.two_factor = two_factor
        self._site_name = site_name
        self.require_two_factor = require_two_factor

    async def create(
        self, email: str, password: str, *, role: Role = Role.OWNER, actor: Actor | None = None
    ) -> AdminRow:
        """A new operator. Conflict when the address has an account already."""
        address = normalise_email(email)
        check_password(password, related=self._related_words(address.key))
        password_hash = await self._passwords.hash(password)
        async with self._db.write() as conn:
            admin = await queries.insert_admin(
                conn, email=address.key, password_hash=password_hash, role=role, now=self._now()
            )
        if actor is not None:
            await self._audit.record(
                actor, "admin.created", f"admin:{admin.id}", {"role": str(role)}
            )
        return admin

    async def list(self) -> list[AdminRow]:
        async with self._db.read() as conn:
            return await queries.list_admins(conn)

    async def find(self, email: str) -> AdminRow:
        """The account signing in as `email`; NotFound (field `email`) when there is none."""
        async with self._db.read() as conn:
            admin = await queries.get_admin_by_email(conn, _email_key(email))
        if admin is None:
            raise NotFound("no admin account with this email", field="email")
        return admin

    async def get(self, admin_id: int) -> AdminRow:
        async with self._db.read() as conn:
            admin = await queries.get_admin(conn, admin_id)
        if admin is None:
            raise NotFound(f"no admin account with id {admin_id}")
        return admin

    async def sign_in(
        self, email: str, password: str, *, client: SignInClient, browser: str
    ) -> StartedSession | SecondFactorNeeded:
        """A new session for the right email and password, or, for an account with two-factor
        sign-in, the token that `complete_sign_in` takes with the code from the same `browser`
        (its pre-session token: the step is bound to the browser that passed the password,
        not to whoever holds the token). Failed attempts count
        against the limits of `sign_in_limits` (RateLimited past them); a wrong pair raises
        Unauthenticated without saying which half was wrong."""
        email_key = _email_key(email)
        actor = Actor.anonymous(client.ip)
        try:
            await self._limiter.admit(email_key, client)
        except RateLimited:
            await self._audit.record_repeated(
                actor, "admin.sign_in.throttled", await self._target(email_key)
            )
            raise
        async with self._db.read() as conn:
            admin = await queries.get_admin_by_email(conn, email_key)
        if admin is None:
            await self._passwords.spend_equal_time(password)
            verified = False
        else:
            verified = await self._passwords.verify(admin.password_hash, password)
        if admin is None or not verified or admin.disabled_at is not None:
            await self._limiter.record_failure(email_key, client)
            await self._audit.record_repeated(
                actor,
                "admin.sign_in.failed",
                f"admin:{admin.id}" if admin else self._limiter.account_hint(email_key),
                {"disabled": True} if admin is not None and verified else None,
            )
            raise Unauthenticated(_REFUSED)
        rehashed = None
        if self._passwords.needs_rehash(admin.password_hash):
            rehashed = await self._passwords.hash(password)
            async with self._db.write() as conn:
                await queries.rehash_password(conn, admin.id, rehashed)
        if admin.totp_enabled_at is not None:
            return SecondFactorNeeded(self.two_factor.pending_token(admin.id, browser=browser))
        started = await self._start_session(admin)
        await self._audit.record(
            Actor.operator(admin.id, client.ip), "admin.sign_in", f"admin:{admin.id}"
        )
        return started

    async def complete_sign_in(
        self, pending_token: str | None, code: str, *, client: SignInClient, browser: str
    ) -> StartedSession:
        """The second step: a code from the authenticator app, or a recovery code, from the
        browser that passed the password. A wrong code counts as a failed sign-in."""
        admin_id = self.two_factor.pending_admin(pending_token, browser=browser)
        admin = None
        if admin_id is not None:
            async with self._db.read() as conn:
                admin = await queries.get_admin(conn, admin_id)
        if admin is None or admin.disabled_at is not None:
            raise Unauthenticated("the sign-in took too long; enter your password again")
        await self._limiter.admit(admin.email, client)
        if not await self.two_factor.verify(admin, code):
            await self._limiter.record_failure(admin.email, client)
            await self._audit.record_repeated(
                Actor.anonymous(client.ip),
                "admin.sign_in.failed",
                f"admin:{admin.id}",
                {"stage": "code"},
            )
            raise Unauthenticated("the code is not right")
        started = await self._start_session(admin)
        await self._audit.record(
            Actor.operator(admin.id, client.ip),
            "admin.sign_in",
            f"admin:{admin.id}",
            {"two_factor": True},
        )
        return started

    async def _start_session(self, admin: AdminRow) -> StartedSession:
        token = secrets.token_urlsafe(32)
        csrf_token = secrets.token_urlsafe(32)
        now = self._now()
        async with self._db.write() as conn:
            await queries.record_sign_in(conn, admin.id, now=now, password_hash=None)
            await queries.insert_session(
                conn,
                token_hash=_token_hash(token),
                admin_id=admin.id,
                csrf_token=csrf_token,
                now=now,
            )
        session = AdminSession(
            admin.id,
            admin.email,
            csrf_token,
            _token_hash(token),
            Role(admin.role),
            admin.totp_enabled_at is not None,
        )
        return StartedSession(
            token=token,
            session=session,
            known_client_token=self._limiter.known_client_token(admin.email),
        )

    async def session(self, token: str) -> AdminSession | None:
        """The live session for a cookie's token, or None (unknown, idle too long, past its
        absolute lifetime, or its account disabled: an expired session is deleted)."""
        if not token or len(token) > 100:
            return None
        token_hash = _token_hash(token)
        now = self._now()
        async with self._db.read() as conn:
            row = await queries.get_session(conn, token_hash)
            admin = None if row is None else await queries.get_admin(conn, row.admin_id)
        if row is None or admin is None or admin.disabled_at is not None:
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
        return AdminSession(
            admin.id,
            admin.email,
            row.csrf_token,
            token_hash,
            Role(admin.role),
            admin.totp_enabled_at is not None,
        )

    async def sign_out(self, session: AdminSession) -> None:
        async with self._db.write() as conn:
            await queries.delete_session(conn, session.token_hash)

    async def sign_out_everywhere(self, admin_id: int) -> int:
        """End every session of the operator (a lost laptop); returns how many ended."""
        async with self._db.write() as conn:
            return await queries.delete_sessions_of(conn, admin_id)

    async def change_password(
        self, session: AdminSession, current: str, new: str, *, actor: Actor
    ) -> None:
        """The operator's own change: the current password first; every other session of
        theirs ends (whoever might have learnt the old one is signed out)."""
        admin = await self.get(session.admin_id)
        await self._check_current(admin, current)
        check_password(new, related=self._related_words(admin.email))
        password_hash = await self._passwords.hash(new)
        async with self._db.write() as conn:
            await queries.set_password(conn, admin.id, password_hash, now=self._now())
            await queries.delete_sessions_of(conn, admin.id, keep_token_hash=session.token_hash)
        await self._audit.record(actor, "admin.password_changed", f"admin:{admin.id}")

    async def turn_off_two_factor(
        self, admin_id: int, *, actor: Actor, password: str | None = None
    ) -> None:
        """The operator's own (with their password), or the command line's for one who lost
        their phone and their recovery codes (no password)."""
        admin = await self.get(admin_id)
        if password is not None:
            await self._check_current(admin, password)
        if password is not None and self.require_two_factor:
            raise Conflict("two-factor sign-in is required on this site")
        await self.two_factor.turn_off(admin, actor=actor)

    async def start_two_factor(self, admin_id: int, password: str) -> Enrolment:
        """The operator's own enrolment, with their current password: a stolen session alone
        cannot put the account under an authenticator app the thief holds."""
        admin = await self.get(admin_id)
        await self._check_current(admin, password)
        return await self.two_factor.start(admin)

    async def _check_current(self, admin: AdminRow, password: str) -> None:
        if not await self._passwords.verify(admin.password_hash, password):
            raise Unauthenticated("the current password is not right")

    async def set_password(self, admin_id: int, new: str, *, actor: Actor) -> None:
        """Another's password (the command line's reset): all of their sessions end."""
        admin = await self.get(admin_id)
        check_password(new, related=self._related_words(admin.email))
        password_hash = await self._passwords.hash(new)
        async with self._db.write() as conn:
            await queries.set_password(conn, admin.id, password_hash, now=self._now())
            await queries.delete_sessions_of(conn, admin.id)
        await self._limiter.unlock(admin.email)
        await self._audit.record(actor, "admin.password_reset", f"admin:{admin.id}")

    async def set_role(self, admin_id: int, role: Role, *, actor: Actor) -> None:
        async with self._db.write() as conn:
            admin = await self._changeable(conn, admin_id, demoting=role is not Role.OWNER)
            await queries.update_admin(conn, admin.id, role=str(role))
        await self._audit.record(actor, "admin.role_changed", f"admin:{admin_id}", {"role": role})

    async def disable(self, admin_id: int, *, actor: Actor) -> None:
        """The operator can no longer sign in; their sessions end at once."""
        async with self._db.write() as conn:
            admin = await self._changeable(conn, admin_id, demoting=True)
            await queries.update_admin(conn, admin.id, disabled_at=self._now())
            await queries.delete_sessions_of(conn, admin.id)
        await self._audit.record(actor, "admin.disabled", f"admin:{admin_id}")

    async def enable(self, admin_id: int, *, actor: Actor) -> None:
        async with self._db.write() as conn:
            if await queries.get_admin(conn, admin_id) is None:
                raise NotFound(f"no admin account with id {admin_id}")
            await queries.update_admin(conn, admin_id, disabled_at=None)
        await self._audit.record(actor, "admin.enabled", f"admin:{admin_id}")

    async def delete(self, admin_id: int, *, actor: Actor) -> None:
        async with self._db.write() as conn:
            admin = await self._changeable(conn, admin_id, demoting=True)
            await queries.delete_admin(conn, admin.id)
        await self._audit.record(actor, "admin.deleted", f"admin:{admin_id}")

    async def unlock(self, admin_id: int, *, actor: Actor) -> int:
        """Forget the account's failed sign-ins; returns how many counters were cleared."""
        admin = await self.get(admin_id)
        cleared = await self._limiter.unlock(admin.email)
        await self._audit.record(actor, "admin.unlocked", f"admin:{admin_id}")
        return cleared

    async def prune(self) -> int:
        """Delete expired sessions and forgotten sign-in failures (the worker's maintenance
        pass); returns the sessions deleted."""
        now = self._now()
        async with self._db.write() as conn:
            ended = await queries.delete_sessions_before(
                conn,
                seen_before=now - self._policy.idle_timeout,
                created_before=now - self._policy.absolute_timeout,
            )
        await self._limiter.prune()
        return ended

    async def _changeable(
        self, conn: AsyncConnection, admin_id: int, *, demoting: bool
    ) -> AdminRow:
        """The account, unless the change would leave no enabled owner (nobody could then
        manage operators or keys from the UI)."""
        admin = await queries.get_admin(conn, admin_id)
        if admin is None:
            raise NotFound(f"no admin account with id {admin_id}")
        last_owner = (
            demoting
            and admin.role == Role.OWNER
            and admin.disabled_at is None
            and await queries.count_active_owners(conn) <= 1
        )
        if last_owner:
            raise Conflict("this is the only enabled owner; make another owner first")
        return admin

    async def _target(self, email_key: str) -> str:
        """The audit target of an attempt: the account's id, or a keyed hint of the address."""
        async with self._db.read() as conn:
            admin = await queries.get_admin_by_email(conn, email_key)
        return f"admin:{admin.id}" if admin else self._limiter.account_hint(email_key)

    def _related_words(self, email_key: str) -> tuple[str, ...]:
        return (email_key, self._site_name, "tidings")
