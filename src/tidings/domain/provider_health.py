"""A failing provider, named (SPEC SND-26): the reason a send's batch job records when the
provider cannot be reached, and the problem read back from that job for the campaign's status,
its page and the dashboard. Pure: one format, written and read here only.

The reason holds the provider, its endpoint (host:port of the relay; no credentials) and the
error's class or reply code — never a reply's text, which can echo addresses (PRI-5).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime

_UNREACHABLE = re.compile(r"^(?P<provider>\w+) (?P<endpoint>\S+) unreachable \((?P<error>[^)]*)\)$")


def unreachable_reason(provider: str, endpoint: str | None, error: str) -> str:
    """What a batch job records when a whole chunk found the provider unreachable."""
    return f"{provider} {endpoint or '-'} unreachable ({error})"


@dataclass(frozen=True, slots=True)
class ProviderProblem:
    """The provider a send is waiting on: who, what went wrong, and when it is tried next."""

    provider: str
    endpoint: str | None
    error: str  # the error's class, or the reply code
    attempts: int
    max_attempts: int
    next_try: datetime | None

    def summary(self) -> str:
        """One line for an operator: `SMTP 127.0.0.1:2599 unreachable — retrying, attempt 5
        of 12, next try 17:50`."""
        where = f" {self.endpoint}" if self.endpoint else ""
        next_try = f", next try {self.next_try:%H:%M:%S} UTC" if self.next_try else ""
        # An HTTP API that answers 5xx was reached: it is failing, not unreachable.
        trouble = "failing" if self.error.startswith("reply 5") else "unreachable"
        return (
            f"{self.provider.upper()}{where} {trouble} ({self.error}) — retrying, attempt "
            f"{self.attempts} of {self.max_attempts}{next_try}"
        )


def provider_problem(
    last_error: str | None, *, attempts: int, max_attempts: int, next_try: datetime | None
) -> ProviderProblem | None:
    """The problem a job's last error names, or None when it names no unreachable provider."""
    found = _UNREACHABLE.match(last_error or "")
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
    )
