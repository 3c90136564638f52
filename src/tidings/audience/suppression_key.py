"""Adopting the suppression key kept outside the database (privacy.suppression_key).

Addresses are stored as keyed hashes (AUD-8). Without the setting the key is the site secret,
which lives in the database, so a leaked dump lets anyone test guessed addresses against the
suppression list. With it, each hash is keyed again with a key the dump does not hold. The
first start with the key re-keys the stored hashes from the hashes themselves (no address is
needed, so deleted people's suppressions move too); a fingerprint of the key, stored beside
the site secret, tells later starts which key the hashes are made with.
"""

from __future__ import annotations

import structlog

from tidings.domain import tokens
from tidings.domain.clock import Clock
from tidings.domain.errors import TidingsError
from tidings.storage import site_secrets
from tidings.storage import suppressions as queries
from tidings.storage.database import Database

FINGERPRINT = "suppression_key_fingerprint"
log = structlog.get_logger("tidings.audience")


class SuppressionKeyMismatch(TidingsError):
    """The stored hashes were made with another suppression key (or with one, now unset)."""


async def adopt_suppression_key(db: Database, key: str | None, *, now: Clock) -> int:
    """Check the stored hashes are made with `key` (None: the site secret alone), re-keying
    them the first time a key is given. Returns how many rows were re-keyed."""
    async with db.write() as conn:
        stored = await site_secrets.get_secret(conn, FINGERPRINT)
        if key is None:
            if stored is not None:
                raise SuppressionKeyMismatch(
                    "the stored address hashes are keyed with privacy.suppression_key, which "
                    "is not set: configure the same key again"
                )
            return 0
        fingerprint = tokens.key_fingerprint(key)
        if stored == fingerprint:
            return 0
        if stored is None and await site_secrets.add_secret(
            conn, FINGERPRINT, fingerprint, now=now()
        ):  # this process re-keys; one starting beside it waits, then finds the fingerprint
            changed = await queries.rekey_email_hashes(
                conn, lambda old: tokens.rekeyed_email_hash(key, old)
            )
        elif await site_secrets.get_secret(conn, FINGERPRINT) == fingerprint:
            return 0
        else:
            raise SuppressionKeyMismatch(
                "privacy.suppression_key differs from the key the stored address hashes were "
                "made with; it cannot be changed once set: configure the original key"
            )
    log.info("suppression_key.adopted", rows_rekeyed=changed)
    return changed
