"""Operator passwords: the rules a new one must meet (length, not all whitespace, not common,
strong by zxcvbn's estimate), and argon2id hashing with a bound on how many run at once."""

from __future__ import annotations

import asyncio
import functools
import re
import secrets
from collections.abc import Iterable
from typing import TYPE_CHECKING

from tidings.domain.errors import InvalidInput

if TYPE_CHECKING:
    from argon2 import PasswordHasher

MIN_PASSWORD_LENGTH = 12
MAX_PASSWORD_LENGTH = 1024  # argon2 takes any length; this only bounds the work per attempt
# zxcvbn's score runs 0-4; 3 is "safely unguessable: moderate protection from offline attack".
MIN_STRENGTH_SCORE = 3


def check_password(password: str, *, related: Iterable[str] = ()) -> None:
    """InvalidInput (field `password`) unless `password` is 12-1024 characters, not all
    whitespace, not on zxcvbn's list of common passwords, and scores at least 3 out of 4 in
    its strength estimate. `related` words (the operator's email, the site name) count as
    guessable."""
    if not MIN_PASSWORD_LENGTH <= len(password) <= MAX_PASSWORD_LENGTH:
        raise InvalidInput(
            f"password must be {MIN_PASSWORD_LENGTH}-{MAX_PASSWORD_LENGTH} characters",
            field="password",
        )
    if not password.strip():
        raise InvalidInput("password must not be only whitespace", field="password")
    from zxcvbn import zxcvbn  # its dictionaries take a while to load: only when needed

    # zxcvbn's work grows with length; past 100 characters the rest adds only strength.
    # An address counts whole, by its local part and by each word in it.
    words = {
        part
        for word in related
        for part in (word, *word.split("@"), *re.split(r"[^\w]+", word))
        if part
    }
    estimate = zxcvbn(password[:100], user_inputs=sorted(words))
    sequence = estimate["sequence"]
    if len(sequence) == 1 and sequence[0].get("dictionary_name") == "passwords":
        raise InvalidInput("password is on the list of common passwords", field="password")
    if estimate["score"] < MIN_STRENGTH_SCORE:
        hint = estimate["feedback"].get("warning") or "it would be guessed quickly"
        raise InvalidInput(
            f"password is too weak ({hint.rstrip('.')}); a few unrelated words make a strong one",
            field="password",
        )


class PasswordHashing:
    """argon2id hashes computed off the event loop, at most `concurrency` at once: each one
    takes 64 MiB and a core for a moment, so a burst of sign-in attempts waits its turn
    instead of exhausting the server's memory."""

    def __init__(self, concurrency: int, hasher: PasswordHasher | None = None) -> None:
        self._slots = asyncio.Semaphore(concurrency)
        self._given_hasher = hasher
        self._decoy_hash: str | None = None

    @functools.cached_property
    def _hasher(self) -> PasswordHasher:
        if self._given_hasher is not None:
            return self._given_hasher
        # argon2 is loaded by the first password operation: a worker only prunes sessions.
        from argon2 import PasswordHasher

        return PasswordHasher()

    async def hash(self, password: str) -> str:
        async with self._slots:
            return await asyncio.to_thread(self._hasher.hash, password)

    async def verify(self, password_hash: str, password: str) -> bool:
        if len(password) > MAX_PASSWORD_LENGTH:
            return False
        async with self._slots:
            return await asyncio.to_thread(self._verifies, password_hash, password)

    async def spend_equal_time(self, password: str) -> None:
        """The work of a real check against no account, so timing does not reveal accounts."""
        if self._decoy_hash is None:
            self._decoy_hash = await self.hash(secrets.token_urlsafe(16))
        await self.verify(self._decoy_hash, password)

    def needs_rehash(self, password_hash: str) -> bool:
        return self._hasher.check_needs_rehash(password_hash)

    def _verifies(self, password_hash: str, password: str) -> bool:
        from argon2.exceptions import InvalidHashError, VerificationError

        try:
            return self._hasher.verify(password_hash, password)
        except (VerificationError, InvalidHashError):
            return False
