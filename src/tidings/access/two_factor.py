"""TOTP two-factor sign-in for operators (UI-2): enrolment with a QR code, codes checked once
each (a replayed code is refused), and ten one-time recovery codes stored as SHA-256 only."""

from __future__ import annotations

import hashlib
import hmac
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from tidings.access.audit import AuditLog
from tidings.domain.audit import Actor
from tidings.domain.errors import Conflict, InvalidInput
from tidings.storage import admins as queries
from tidings.storage.admins import AdminRow
from tidings.storage.database import Database

RECOVERY_CODE_COUNT = 10
_RECOVERY_ALPHABET = "abcdefghjkmnpqrstuvwxyz23456789"  # no 0/o, 1/l/i: read aloud, typed
# How long the step between the password and the code may take.
PENDING_LIFETIME = timedelta(minutes=5)


@dataclass(frozen=True, slots=True)
class Enrolment:
    secret: str
    provisioning_uri: str
    qr_svg: str  # inline SVG of the URI, for the authenticator app's camera


def recovery_hash(code: str) -> str:
    normalised = "".join(ch for ch in code.lower() if ch.isalnum())
    return hashlib.sha256(normalised.encode()).hexdigest()


def _new_recovery_code() -> str:
    raw = "".join(secrets.choice(_RECOVERY_ALPHABET) for _ in range(10))
    return f"{raw[:5]}-{raw[5:]}"


class TwoFactor:
    def __init__(
        self,
        db: Database,
        now: Callable[[], datetime],
        secret: Callable[[], str],
        audit: AuditLog,
        *,
        issuer: str,
    ) -> None:
        self._db = db
        self._now = now
        self._secret = secret
        self._audit = audit
        self._issuer = issuer

    async def start(self, admin: AdminRow) -> Enrolment:
        """A new secret, kept pending (not yet required at sign-in) until a code from it is
        confirmed. Conflict when two-factor is on already."""
        import pyotp
        import segno

        if admin.totp_enabled_at is not None:
            raise Conflict("two-factor sign-in is on already; turn it off first")
        secret = pyotp.random_base32()
        async with self._db.write() as conn:
            await queries.update_admin(conn, admin.id, totp_secret=secret, totp_last_step=None)
        uri = pyotp.TOTP(secret).provisioning_uri(name=admin.email, issuer_name=self._issuer)
        svg = segno.make(uri, error="m").svg_inline(scale=4, dark="#000", light="#fff")
        return Enrolment(secret=secret, provisioning_uri=uri, qr_svg=svg)

    async def confirm(self, admin: AdminRow, code: str, *, actor: Actor) -> list[str]:
        """Turn two-factor on with a code from the pending secret; returns the ten recovery
        codes, shown this once."""
        if admin.totp_secret is None or admin.totp_enabled_at is not None:
            raise Conflict("start setting up two-factor sign-in first")
        if not await self._totp_matches(admin, code):
            raise InvalidInput("the code is not right; check the app's clock", field="code")
        codes = [_new_recovery_code() for _ in range(RECOVERY_CODE_COUNT)]
        async with self._db.write() as conn:
            await queries.update_admin(conn, admin.id, totp_enabled_at=self._now())
            await queries.replace_recovery_codes(conn, admin.id, [recovery_hash(c) for c in codes])
        await self._audit.record(actor, "admin.two_factor.enabled", f"admin:{admin.id}")
        return codes

    async def turn_off(self, admin: AdminRow, *, actor: Actor) -> None:
        async with self._db.write() as conn:
            await queries.update_admin(
                conn, admin.id, totp_secret=None, totp_enabled_at=None, totp_last_step=None
            )
            await queries.replace_recovery_codes(conn, admin.id, [])
        await self._audit.record(actor, "admin.two_factor.disabled", f"admin:{admin.id}")

    async def verify(self, admin: AdminRow, code: str) -> bool:
        """A current code from the app (each accepted once) or an unused recovery code."""
        code = code.strip()[:32]
        if admin.totp_enabled_at is None or not code:
            return False
        if await self._totp_matches(admin, code):
            return True
        async with self._db.write() as conn:
            return await queries.use_recovery_code(
                conn, admin.id, recovery_hash(code), now=self._now()
            )

    async def recovery_codes_left(self, admin_id: int) -> int:
        async with self._db.read() as conn:
            return await queries.count_unused_recovery_codes(conn, admin_id)

    async def _totp_matches(self, admin: AdminRow, code: str) -> bool:
        import pyotp

        digits = code.replace(" ", "")
        if admin.totp_secret is None or len(digits) != 6 or not digits.isdigit():
            return False
        totp = pyotp.TOTP(admin.totp_secret)
        now = self._now()
        # The code of the current 30-second step, or of either neighbour (clock drift).
        for offset in (0, -1, 1):
            at = now + timedelta(seconds=30 * offset)
            if hmac.compare_digest(totp.at(at), digits):
                async with self._db.write() as conn:
                    return await queries.use_totp_step(conn, admin.id, totp.timecode(at))
        return False

    # The step between password and code: a signed, short-lived token in a cookie, so the
    # password is never posted twice nor kept anywhere. The signature also covers the browser
    # (its pre-session token), so the token is worth nothing carried to another browser.
    def pending_token(self, admin_id: int, *, browser: str) -> str:
        expires = int((self._now() + PENDING_LIFETIME).timestamp())
        body = f"{admin_id}.{expires}"
        return f"{body}.{self._sign(body, browser)}"

    def pending_admin(self, token: str | None, *, browser: str) -> int | None:
        """The operator whose password was right, if `token` is genuine, fresh and was issued
        to this `browser`."""
        if not token or len(token) > 200 or token.count(".") != 2 or not browser:
            return None
        admin_id, expires, signature = token.split(".")
        if not (admin_id.isdigit() and expires.isdigit()):
            return None
        if not hmac.compare_digest(signature, self._sign(f"{admin_id}.{expires}", browser)):
            return None
        if int(expires) < self._now().timestamp():
            return None
        return int(admin_id)

    def _sign(self, body: str, browser: str) -> str:
        key = self._secret().encode()
        bound = f"admin-second-factor:{body}:{hashlib.sha256(browser.encode()).hexdigest()}"
        return hmac.new(key, bound.encode(), hashlib.sha256).hexdigest()
