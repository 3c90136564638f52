"""How failed sign-ins slow an operator account down, such that no stranger can lock its owner
out (UI-2).

Only failures count, never successes, and a count is forgotten `window_seconds` after its last
failure. Three scopes, each a row in `sign_in_failures`:

- per account, from every new device together (a browser without the account's known-device
  cookie): past `per_account` failures, each further attempt waits a delay doubling from one
  second up to `max_delay_seconds`. Slowed, never locked out for longer than that.
- per client address, over every account: the same, past `per_ip`, against spraying many
  accounts from one address.
- per known device of the account (the signed cookie set by a full sign-in): its own failures
  only, past `per_client`. Strangers' failures never touch it, so the owner's browsers get in
  however hard the account is attacked, and they do not count toward the account's scope.

While a scope is slowed, one attempt at a time takes the turn its delay allows (a compare-and-
set on the row): a burst of parallel guesses gets one check, not one each.
"""

from __future__ import annotations

import hashlib
import hmac
import math
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from tidings.domain.errors import RateLimited
from tidings.storage import sign_in_failures
from tidings.storage.database import Database
from tidings.storage.sign_in_failures import RecentFailures

ACCOUNT_PREFIX = "admin-login:"
ADDRESS_PREFIX = "admin-login-ip:"
_DEVICE_PURPOSE = "admin-known-client:"
TOO_MANY = "too many failed sign-in attempts; try again in a moment"


@dataclass(frozen=True, slots=True)
class SignInLimits:
    per_client: int  # failures from one known device before it is slowed
    per_ip: int  # failures from one address, over every account, before it is slowed
    per_account: int  # failures on one account from new devices before they are slowed
    window_seconds: int  # a scope's failures are forgotten this long after its last one
    max_delay_seconds: int


@dataclass(frozen=True, slots=True)
class SignInClient:
    """Where an attempt comes from: the address, and the known-client cookie if any."""

    ip: str | None
    known_client_token: str | None = None


def delay_after(failures: int, free: int, cap: float) -> float:
    """Seconds the next attempt waits after `failures` recent failures when `free` of them cost
    nothing: none before, then 1 s, doubling with each further failure, at most `cap`."""
    if failures < free:
        return 0.0
    return float(min(cap, 2.0 ** min(failures - free, 30)))


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

    async def admit(self, email_key: str, client: SignInClient) -> None:
        """Whether an attempt on `email_key` from `client` may be checked now; raises
        RateLimited (with the seconds left of the delay as its Retry-After) when not."""
        now = self._now()
        scopes = self._scopes(email_key, client)
        since = now - timedelta(seconds=self._limits.window_seconds)
        async with self._db.write() as conn:
            seen = await sign_in_failures.recent(conn, scopes, since=since)
            for bucket, free in scopes.items():
                found = seen.get(bucket)
                if found is None or found.failures < free:
                    continue
                wait = self._wait(found, free, now)
                if wait > 0 or not await sign_in_failures.take_turn(conn, bucket, found, now=now):
                    raise RateLimited(TOO_MANY, retry_after_seconds=max(1, math.ceil(wait)))

    async def record_failure(self, email_key: str, client: SignInClient) -> None:
        now = self._now()
        forget_before = now - timedelta(seconds=self._limits.window_seconds)
        async with self._db.write() as conn:
            for bucket in self._scopes(email_key, client):
                await sign_in_failures.record(conn, bucket, now=now, forget_before=forget_before)

    async def unlock(self, email_key: str) -> int:
        """Forget the account's failed attempts, from every client; returns counters cleared."""
        async with self._db.write() as conn:
            return await sign_in_failures.clear(conn, self._account_bucket(email_key))

    async def prune(self) -> int:
        """Forget the scopes whose last failure is older than the window."""
        before = self._now() - timedelta(seconds=self._limits.window_seconds)
        async with self._db.write() as conn:
            return await sign_in_failures.prune(conn, before=before)

    def _wait(self, found: RecentFailures, free: int, now: datetime) -> float:
        delay = delay_after(found.failures, free, self._limits.max_delay_seconds)
        return (found.last_failed_at + timedelta(seconds=delay) - now).total_seconds()

    def _scopes(self, email_key: str, client: SignInClient) -> dict[str, int]:
        """The buckets an attempt counts in, each with the failures it allows before slowing."""
        limits = self._limits
        nonce = self._known_nonce(email_key, client.known_client_token)
        if nonce is not None:
            return {self._device_bucket(email_key, nonce): limits.per_client}
        scopes = {self._account_bucket(email_key): limits.per_account}
        if client.ip:
            scopes[self._address_bucket(client.ip)] = limits.per_ip
        return scopes

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

    def _device_bucket(self, email_key: str, nonce: str) -> str:
        return self._account_bucket(email_key) + ":" + self._keyed(f"known:{nonce}")[:32]

    def _address_bucket(self, ip: str | None) -> str:
        return ADDRESS_PREFIX + self._keyed(ADDRESS_PREFIX + (ip or "-"))[:40]
