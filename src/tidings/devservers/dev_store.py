"""What the batch-provider dev server accepted: one record per request, one per recipient.

Recipient variables are substituted the way Mailgun does it (`%recipient.NAME%`, in the
subject, bodies and `h:` headers), but only the subject and the Message-ID are rendered when a
request is accepted; headers are rendered when someone asks for them and bodies on demand, so
storing a 1,000-recipient batch costs a few milliseconds. With a directory, every accepted
request is appended to `batches.jsonl` and its recipients to `recipients.jsonl` before the
answer goes out (one write per request, no fsync: this is a test double, not a mail queue).
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

PLACEHOLDER = re.compile(r"%recipient\.([A-Za-z0-9_.-]+)%")


class Template:
    """A string split once at its `%recipient.NAME%` placeholders, rendered per recipient.

    Unknown names are left in place, so a missing variable shows up in what was stored.
    """

    __slots__ = ("_parts", "source")

    def __init__(self, source: str) -> None:
        self.source = source
        # Even positions are literal text, odd positions variable names.
        self._parts = PLACEHOLDER.split(source)

    def render(self, variables: Mapping[str, str]) -> str:
        parts = self._parts
        if len(parts) == 1:
            return self.source
        out = list(parts)
        for index in range(1, len(parts), 2):
            value = variables.get(parts[index])
            out[index] = f"%recipient.{parts[index]}%" if value is None else str(value)
        return "".join(out)


@dataclass(frozen=True, slots=True)
class AcceptedBatch:
    """One accepted request: the message as submitted, before per-recipient substitution."""

    batch_id: str
    domain: str
    sender: str
    subject: Template
    html: Template
    text: Template
    headers: Mapping[str, Template]
    options: Mapping[str, Sequence[str]]
    user_variables: Mapping[str, str]
    accepted_at: datetime
    recipient_count: int

    def to_json(self) -> dict[str, Any]:
        return {
            "batch_id": self.batch_id,
            "domain": self.domain,
            "from": self.sender,
            "subject": self.subject.source,
            "html": self.html.source,
            "text": self.text.source,
            "headers": {name: value.source for name, value in self.headers.items()},
            "options": {name: list(values) for name, values in self.options.items()},
            "user_variables": dict(self.user_variables),
            "accepted_at": self.accepted_at.isoformat(),
            "recipient_count": self.recipient_count,
        }


@dataclass(frozen=True, slots=True)
class AcceptedRecipient:
    """One recipient of an accepted request, with its own Message-ID and subject."""

    address: str
    message_id: str
    subject: str
    variables: Mapping[str, str]
    batch: AcceptedBatch

    @property
    def domain(self) -> str:
        return self.batch.domain

    def headers(self) -> dict[str, str]:
        return {name: value.render(self.variables) for name, value in self.batch.headers.items()}

    def html(self) -> str:
        return self.batch.html.render(self.variables)

    def text(self) -> str:
        return self.batch.text.render(self.variables)

    def to_json(self) -> dict[str, Any]:
        return {
            "address": self.address,
            "message_id": self.message_id,
            "subject": self.subject,
            "domain": self.batch.domain,
            "batch_id": self.batch.batch_id,
            "accepted_at": self.batch.accepted_at.isoformat(),
            "variables": dict(self.variables),
            "headers": self.headers(),
        }


class DevStore:
    """Accepted batches and recipients in memory, optionally mirrored to JSON lines on disk."""

    def __init__(self, directory: Path | None = None) -> None:
        self.directory = directory
        self.batches: list[AcceptedBatch] = []
        self.recipients: list[AcceptedRecipient] = []

    async def add(self, batch: AcceptedBatch, recipients: Sequence[AcceptedRecipient]) -> None:
        if self.directory is not None:
            await asyncio.to_thread(_append_lines, self.directory, batch, recipients)
        self.batches.append(batch)
        self.recipients.extend(recipients)

    def find(
        self,
        *,
        domain: str | None = None,
        message_id: str | None = None,
        address: str | None = None,
        batch_id: str | None = None,
    ) -> list[AcceptedRecipient]:
        return [
            recipient
            for recipient in self.recipients
            if (domain is None or recipient.batch.domain == domain)
            and (message_id is None or recipient.message_id == message_id)
            and (address is None or recipient.address == address)
            and (batch_id is None or recipient.batch.batch_id == batch_id)
        ]

    def clear(self) -> None:
        self.batches.clear()
        self.recipients.clear()


def _append_lines(
    directory: Path, batch: AcceptedBatch, recipients: Sequence[AcceptedRecipient]
) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    with (directory / "batches.jsonl").open("a", encoding="utf-8") as batches:
        batches.write(json.dumps(batch.to_json()) + "\n")
    lines = "".join(json.dumps(recipient.to_json()) + "\n" for recipient in recipients)
    with (directory / "recipients.jsonl").open("a", encoding="utf-8") as out:
        out.write(lines)
