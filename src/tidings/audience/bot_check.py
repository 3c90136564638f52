"""An optional proof-of-work check on signups (API-5), with the ALTCHA library.

With `audience.altcha` on, a signup (the forms and `POST /api/subscribe`) must carry the
solution of a fresh challenge from `GET /api/altcha/challenge`: a browser spends a fraction
of a second finding it, a bot posting thousands of signups spends that each time. Challenges
are HMAC-signed with a key derived from the site secret and expire after a few minutes; a
challenge is accepted once, by any process: its canonical content (the algorithm and the
challenge hash the signature covers, not the payload's bytes, which JSON whitespace, key order,
extra fields or base64 padding could vary) is spent in the database's rate-limit table (a
bucket that allows one hit, kept until the challenge has expired). The check does
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
        spent = _spent_content(payload)
        if spent is None:
            raise InvalidInput(REFUSED, field="altcha")
        canonical, expires = spent
        # One bucket per challenge, its window the challenge's expiry: every process counts the
        # same row, and the prune keeps it until the challenge is dead anyway.
        bucket = "altcha:" + hashlib.sha256(canonical.encode()).hexdigest()
        async with self.context.db.write() as conn:
            uses = await ratelimits.hit(conn, bucket, expires)
        if uses > 1:
            raise InvalidInput(REFUSED, field="altcha")


def _spent_content(payload: str) -> tuple[str, datetime] | None:
    """What a verified payload is spent by, and until when: the challenge hash our signature
    covers (one per issued challenge, its salt random; any encoding of its solution names the
    same one), and the expiry our challenge put in the salt (`...?expires=<unix seconds>`)."""
    try:
        fields = json.loads(base64.b64decode(payload))
        canonical = f"{fields['algorithm']}:{str(fields['challenge']).lower()}"
        found = parse_qs(str(fields["salt"]).partition("?")[2]).get("expires")
        expires = datetime.fromtimestamp(int(found[0]), tz=UTC) if found else None
    except (ValueError, TypeError, KeyError, AttributeError):
        return None
    return None if expires is None else (canonical, expires)
