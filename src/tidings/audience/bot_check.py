"""An optional proof-of-work check on signups (API-5), with the ALTCHA library.

With `audience.altcha` on, a signup (the forms and `POST /api/subscribe`) must carry the
solution of a fresh challenge from `GET /api/altcha/challenge`: a browser spends a fraction
of a second finding it, a bot posting thousands of signups spends that each time. Challenges
are HMAC-signed with a key derived from the site secret and expire after a few minutes; a
solution is accepted once, by any process: its hash is spent in the database's rate-limit
table (a bucket that allows one hit, kept until the challenge has expired). The check does
not depend on the address, so it keeps the no-enumeration rule (AUD-5): a bad or missing
solution gets the same refusal for everyone.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import parse_qs

from tidings.audience.context import AudienceContext
from tidings.domain.errors import InvalidInput
from tidings.storage import ratelimits

CHALLENGE_TTL = timedelta(minutes=10)
REFUSED = "The form's anti-bot check did not pass; reload the page and try again."


@dataclass
class BotCheck:
    """Issues and checks ALTCHA challenges; `enabled` False makes every check pass."""

    enabled: bool
    max_number: int
    context: AudienceContext

    def _key(self) -> str:
        # Its own key: a solution's HMAC must never be usable as any other signature of ours.
        return hmac.new(self.context.secret().encode(), b"altcha-v1", hashlib.sha256).hexdigest()

    def challenge(self) -> dict[str, Any]:
        """A fresh challenge, in the JSON shape the ALTCHA widget and our form script read."""
        from altcha import v1 as altcha_v1  # only with audience.altcha on

        made = altcha_v1.create_challenge(
            altcha_v1.ChallengeOptions(
                hmac_key=self._key(),
                max_number=self.max_number,
                expires=self.context.now() + CHALLENGE_TTL,
            )
        )
        return {
            "algorithm": made.algorithm,
            "challenge": made.challenge,
            "maxnumber": made.max_number,
            "salt": made.salt,
            "signature": made.signature,
        }

    async def verify(self, payload: str | None) -> None:
        """InvalidInput (field `altcha`) unless `payload` solves a live challenge not yet used."""
        if not self.enabled:
            return
        if not payload or len(payload) > 4096:
            raise InvalidInput(REFUSED, field="altcha")
        try:
            from altcha import v1 as altcha_v1

            ok, _ = altcha_v1.verify_solution(payload, self._key(), check_expires=True)
        except (ValueError, TypeError, KeyError):
            ok = False
        if not ok:
            raise InvalidInput(REFUSED, field="altcha")
        expires = _expiry(payload)
        if expires is None:
            raise InvalidInput(REFUSED, field="altcha")
        # One bucket per solution, its window the challenge's expiry: every process counts the
        # same row, and the prune keeps it until the challenge is dead anyway.
        bucket = "altcha:" + hashlib.sha256(payload.encode()).hexdigest()
        async with self.context.db.write() as conn:
            uses = await ratelimits.hit(conn, bucket, expires)
        if uses > 1:
            raise InvalidInput(REFUSED, field="altcha")


def _expiry(payload: str) -> datetime | None:
    """The expiry our challenge put in the salt (`...?expires=<unix seconds>`), verified
    already by the signature check."""
    try:
        salt = json.loads(base64.b64decode(payload))["salt"]
        found = parse_qs(str(salt).partition("?")[2]).get("expires")
        return datetime.fromtimestamp(int(found[0]), tz=UTC) if found else None
    except (ValueError, TypeError, KeyError):
        return None
