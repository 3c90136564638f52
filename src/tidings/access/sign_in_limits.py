"""How many failed sign-ins an operator account takes before it slows down, such that no
stranger can lock its owner out (UI-2).

Only failures count, never successes. Three counters, each a fixed window in `rate_limits`:

- per (account, client): a client is the browser's known-client cookie when it has signed in
  to this account before, else its address. Past the limit that one client is refused.
- per client address, over every account: stops spraying many accounts from one address.
  Clients known to the account are exempt, so colleagues behind one proxy are not locked out.
- per account, from every client together, over a longer window: past it, clients that never
  signed in to the account are refused, and known ones are slowed down, never refused.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from tidings.domain.errors import RateLimited
from tidings.domain.ratelimit import retry_after_seconds, window_start
from tidings.storage import ratelimits
from tidings.storage.database import Database

ACCOUNT_PREFIX = "admin-login:"
ADDRESS_PREFIX = "admin-login-ip:"
_DEVICE_PURPOSE = "admin-known-client:"


@dataclass(frozen=True, slots=True)
class SignInLimits:
    per_client: int
    per_ip: int
    window_seconds: int
    per_account: int
    account_window_seconds: int
    slowdown_seconds: float


@dataclass(frozen=True, slots=True)
class SignInClient:
    """Where an attempt comes from: the address, and the known-client cookie if any."""

    ip: str | None
    known_client_token: str | None = None


@dataclass(frozen=True, slots=True)
class Admission:
    """An attempt may go ahead; `delay_seconds` first when the account is under attack."""

    delay_seconds: float
    known_client: bool


class SignInLimiter:
    def __init__(
        self,
        db: Database,
        now: Callable[[], datetime],
        secret: Callable[[], str],
        limits: SignInLimits,
    ) -> None:
        self._db = db
        self._now = now
        self._secret = secret
        self._limits = limits

    def known_client_token(self, email_key: str) -> str:
        """A new token for the known-client cookie: proof this browser signed in to the
        account (a random part and its keyed signature; nothing is stored)."""
        nonce = secrets.token_urlsafe(16)
        return f"{nonce}.{self._keyed(_DEVICE_PURPOSE + email_key + ':' + nonce)[:32]}"

    def _known_nonce(self, email_key: str, token: str | None) -> str | None:
        if not token or len(token) > 100 or "." not in token:
            return None
        nonce, signature = token.split(".", 1)
        expected = self._keyed(_DEVICE_PURPOSE + email_key + ":" + nonce)[:32]
        return nonce if hmac.compare_digest(signature.encode(), expected.encode()) else None

    async def admit(self, email_key: str, client: SignInClient) -> Admission:
        """Whether an attempt on `email_key` from `client` may be checked at all; raises
        RateLimited (with its Retry-After) when not."""
        now = self._now()
        limits = self._limits
        nonce = self._known_nonce(email_key, client.known_client_token)
        window = window_start(now, limits.window_seconds)
        account_window = window_start(now, limits.account_window_seconds)
        async with self._db.read() as conn:
            from_client = await ratelimits.hits(
                conn, self._client_bucket(email_key, nonce, client.ip), window
            )
            from_address = (
                await ratelimits.hits(conn, self._address_bucket(client.ip), window)
                if client.ip and nonce is None
                else 0
            )
            on_account = await ratelimits.hits(
                conn, self._account_bucket(email_key), account_window
            )
        retry_soon = retry_after_seconds(now, limits.window_seconds)
        if from_client >= limits.per_client or from_address >= limits.per_ip:
            raise RateLimited(
                "too many failed sign-in attempts; try again later", retry_after_seconds=retry_soon
            )
        if on_account >= limits.per_account:
            if nonce is None:
                raise RateLimited(
                    "too many failed sign-in attempts on this account; try again later",
                    retry_after_seconds=retry_after_seconds(now, limits.account_window_seconds),
                )
            return Admission(delay_seconds=limits.slowdown_seconds, known_client=True)
        return Admission(delay_seconds=0.0, known_client=nonce is not None)

    async def record_failure(self, email_key: str, client: SignInClient) -> None:
        now = self._now()
        limits = self._limits
        nonce = self._known_nonce(email_key, client.known_client_token)
        window = window_start(now, limits.window_seconds)
        async with self._db.write() as conn:
            await ratelimits.hit(conn, self._client_bucket(email_key, nonce, client.ip), window)
            await ratelimits.hit(
                conn,
                self._account_bucket(email_key),
                window_start(now, limits.account_window_seconds),
            )
            if client.ip:
                await ratelimits.hit(conn, self._address_bucket(client.ip), window)

    async def unlock(self, email_key: str) -> int:
        """Forget the account's failed attempts, from every client; returns counters cleared."""
        async with self._db.write() as conn:
            return await ratelimits.clear(conn, self._account_bucket(email_key))

    def account_hint(self, email_key: str) -> str:
        """An audit target for an attempt on an address with no account: a keyed hash, so
        the log never holds the address, nor a hash anyone could test guesses against."""
        return "unknown:" + self._keyed("admin-audit:" + email_key)[:16]

    def _keyed(self, value: str) -> str:
        return hmac.new(self._secret().encode(), value.encode(), hashlib.sha256).hexdigest()

    # Buckets hold keyed hashes: the table never stores an address or an IP in clear. An
    # account's own counters all start with its account bucket, so unlock finds them.
    def _account_bucket(self, email_key: str) -> str:
        return ACCOUNT_PREFIX + self._keyed(ACCOUNT_PREFIX + email_key)[:32]

    def _client_bucket(self, email_key: str, nonce: str | None, ip: str | None) -> str:
        client = f"known:{nonce}" if nonce is not None else f"ip:{ip or '-'}"
        return self._account_bucket(email_key) + ":" + self._keyed(client)[:32]

    def _address_bucket(self, ip: str | None) -> str:
        return ADDRESS_PREFIX + self._keyed(ADDRESS_PREFIX + (ip or "-"))[:40]
