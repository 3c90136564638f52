"""A failing provider, named (SPEC SND-26): the reason a send's batch job records when the
provider cannot be reached, or the reason a send pauses itself when the provider refuses the
sender, and the problem read back from either for the campaign's status, its page and the
dashboard. Pure: one format each, written and read here only.

The reason holds the provider, its endpoint (host:port of the relay; no credentials) and the
cause — the error's class, what was refused, reply codes — never a reply's text, which can
echo addresses (PRI-5).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime

_REASON = re.compile(
    r"^(?P<provider>\w+) (?P<endpoint>\S+) (?P<kind>unreachable|refuses the sender) "
    r"\((?P<error>.*)\)$"
)
UNREACHABLE = "unreachable"
REFUSES = "refuses the sender"
# Who paused a send whose provider refused the sender, as its intervention row records it.
PROVIDER_PAUSE_ACTOR = "system:provider"


def unreachable_reason(provider: str, endpoint: str | None, error: str) -> str:
    """What a batch job records when a whole chunk found the provider unreachable."""
    return f"{provider} {endpoint or '-'} {UNREACHABLE} ({error})"


def refusal_reason(provider: str, endpoint: str | None, cause: str) -> str:
    """Why a send paused itself: the provider refused the sender (relaying denied, a login or
    a certificate refused), which no retry mends until its settings change."""
    return f"{provider} {endpoint or '-'} {REFUSES} ({cause})"


@dataclass(frozen=True, slots=True)
class ProviderProblem:
    """The provider a send is waiting on: who, what went wrong, and when it is tried next —
    or, `paused`, that the send paused itself until an operator fixes the settings."""

    provider: str
    endpoint: str | None
    error: str  # the error's class, or what was refused, with reply codes
    attempts: int
    max_attempts: int
    next_try: datetime | None
    paused: bool = False  # the provider refused the sender: the send waits for an operator

    def summary(self) -> str:
        """One line for an operator: `SMTP 127.0.0.1:2599 unreachable (connection refused) —
        retrying, attempt 5 of 12, next try 17:50:00 UTC`."""
        where = f" {self.endpoint}" if self.endpoint else ""
        if self.paused:
            return (
                f"{self.provider.upper()}{where} {REFUSES} ({self.error}) — the send paused "
                "itself and nobody failed: fix the provider's settings (`tidings smtp check`), "
                "then resume it"
            )
        next_try = f", next try {self.next_try:%H:%M:%S} UTC" if self.next_try else ""
        # An HTTP API that answers 5xx was reached: it is failing, not unreachable.
        trouble = "failing" if self.error.startswith("reply 5") else UNREACHABLE
        return (
            f"{self.provider.upper()}{where} {trouble} ({self.error}) — retrying, attempt "
            f"{self.attempts} of {self.max_attempts}{next_try}"
        )


def provider_problem(
    last_error: str | None, *, attempts: int, max_attempts: int, next_try: datetime | None
) -> ProviderProblem | None:
    """The problem a job's last error (or a pause's reason) names, or None when it names no
    provider problem."""
    found = _REASON.match(last_error or "")
    if found is None:
        return None
    endpoint = found["endpoint"]
    return ProviderProblem(
        provider=found["provider"],
        endpoint=None if endpoint == "-" else endpoint,
        error=found["error"],
        attempts=attempts,
        max_attempts=max_attempts,
        next_try=next_try,
        paused=found["kind"] == REFUSES,
    )
