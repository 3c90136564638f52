"""An optional proof-of-work check on signups (API-5), with the ALTCHA library.

With `audience.altcha` on, a signup (the forms and `POST /api/subscribe`) must carry the
solution of a fresh challenge from `GET /api/altcha/challenge`: a browser spends a fraction
of a second finding it, a bot posting thousands of signups spends that each time. Challenges
are HMAC-signed with a key derived from the site secret and expire after a few minutes; a
solution is accepted once per process. The check does not depend on the address, so it keeps
the no-enumeration rule (AUD-5): a bad or missing solution gets the same refusal for everyone.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from tidings.domain.errors import InvalidInput

CHALLENGE_TTL = timedelta(minutes=10)
REFUSED = "The form's anti-bot check did not pass; reload the page and try again."


@dataclass
class BotCheck:
    """Issues and checks ALTCHA challenges; `enabled` False makes every check pass."""

    enabled: bool
    max_number: int
    secret: Callable[[], str]
    now: Callable[[], datetime]
    _spent: dict[str, datetime] = field(default_factory=dict)

    def _key(self) -> str:
        # Its own key: a solution's HMAC must never be usable as any other signature of ours.
        return hmac.new(self.secret().encode(), b"altcha-v1", hashlib.sha256).hexdigest()

    def challenge(self) -> dict[str, Any]:
        """A fresh challenge, in the JSON shape the ALTCHA widget and our form script read."""
        from altcha import v1 as altcha_v1  # only with audience.altcha on

        made = altcha_v1.create_challenge(
            altcha_v1.ChallengeOptions(
                hmac_key=self._key(),
                max_number=self.max_number,
                expires=self.now() + CHALLENGE_TTL,
            )
        )
        return {
            "algorithm": made.algorithm,
            "challenge": made.challenge,
            "maxnumber": made.max_number,
            "salt": made.salt,
            "signature": made.signature,
        }

    def verify(self, payload: str | None) -> None:
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
        now = self.now()
        self._spent = {key: until for key, until in self._spent.items() if until > now}
        if payload in self._spent:
            raise InvalidInput(REFUSED, field="altcha")
        self._spent[payload] = now + CHALLENGE_TTL
