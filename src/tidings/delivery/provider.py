"""The email provider interface, shared by per-recipient providers (SMTP, local capture) and
batch providers (a Mailgun-compatible HTTP API, one call per batch).

Providers classify failures at the boundary (HOUSE rule 8): a whole-message failure raises
`TemporaryFailure` (retry later: 4xx, dropped connection, timeout) or `PermanentFailure`
(do not retry: 5xx), and a batch provider raises `UncertainDelivery` when the request went
out but its answer was lost (do not resend automatically). A refusal about the sender rather
than the recipient — relaying denied, authentication required or refused, a certificate not
trusted, a key refused — raises `SenderRefused`: no recipient's failure, but the provider's
problem, which waits for the operator (the send pauses itself, SND-26). Rejections of single
recipients are reported per recipient in `SendResult.rejected`, so one bad address never
fails the others. Callers decide by type, never by parsing messages. Failure details never carry
addresses or provider text into logs: `detail` is for storage next to the recipient, `code`
is safe to log.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import NamedTuple, Protocol, runtime_checkable

from tidings.domain.errors import TidingsError


class DeliveryFailure(TidingsError):
    """A provider could not take a message. `smtp_code`/`status` is safe to log; `detail` is not."""

    code = "delivery_failed"
    title = "The provider did not accept the message"

    def __init__(self, detail: str | None = None, *, status: int | None = None) -> None:
        super().__init__(detail)
        self.status = status


class TemporaryFailure(DeliveryFailure):
    """Worth retrying later: 4xx replies, dropped connections, timeouts, 429/5xx from HTTP APIs."""

    code = "delivery_temporary_failure"

    def __init__(
        self,
        detail: str | None = None,
        *,
        status: int | None = None,
        retry_after_seconds: float | None = None,
    ) -> None:
        super().__init__(detail, status=status)
        self.retry_after_seconds = retry_after_seconds


class ProviderUnreachable(TemporaryFailure):
    """The provider could not be reached or refused the session before any message was
    handed over: nothing was accepted, so trying again later is always safe."""

    code = "delivery_provider_unreachable"

    def __init__(
        self,
        detail: str | None = None,
        *,
        status: int | None = None,
        retry_after_seconds: float | None = None,
        cause: str | None = None,
        endpoint: str | None = None,
    ) -> None:
        super().__init__(detail, status=status, retry_after_seconds=retry_after_seconds)
        # Safe to show (SND-26): the error's class or the reply code, never the reply text.
        self.cause = cause or (f"reply {status}" if status else "unreachable")
        # host:port, set by the provider itself: a wrapper (DKIM signing) keeps it.
        self.endpoint = endpoint


class PermanentFailure(DeliveryFailure):
    """Retrying will not help: 5xx replies, a message the provider refuses outright."""

    code = "delivery_permanent_failure"


class SenderRefused(PermanentFailure):
    """The provider refused us, not the recipient: relaying denied, authentication required or
    refused, the sender address refused, a certificate not trusted, a key refused. Nothing was
    accepted, and trying again fails the same way until the configuration changes (so it is
    permanent: a transactional message is given up, replayable): a campaign's send pauses with
    the problem named instead of failing its recipients (SND-26)."""

    code = "delivery_sender_refused"
    title = "The provider refused the sender"

    def __init__(
        self,
        detail: str | None = None,
        *,
        cause: str,
        status: int | None = None,
        endpoint: str | None = None,
    ) -> None:
        super().__init__(detail, status=status)
        # Safe to show and log (SND-26): what was refused and its reply code, never reply text.
        self.cause = cause
        self.endpoint = endpoint  # host:port of the provider, when it knows it


class UncertainDelivery(DeliveryFailure):
    """The provider may have accepted the batch; do not resend automatically (SPEC SND-13).

    Raised when the whole request was sent and then the connection dropped or the answer did
    not come in time. Resending could mail every recipient twice; the batch stays
    `submitting` until the operator reconciles it.
    """

    code = "delivery_uncertain"
    title = "The provider may have accepted the message; its answer was lost"


@dataclass(frozen=True, slots=True)
class Envelope:
    """One serialised message and who gets it. `data` is the whole RFC 5322 message."""

    sender: str
    recipients: Sequence[str]
    data: bytes
    message_id: str


@dataclass(frozen=True, slots=True)
class Rejection:
    """One recipient refused. `permanent` decides retry; `status` is the reply code."""

    permanent: bool
    status: int | None
    detail: str = ""


@dataclass(frozen=True, slots=True)
class SendResult:
    """Per-recipient outcome of one envelope: accepted addresses and rejected ones."""

    accepted: Sequence[str]
    rejected: Mapping[str, Rejection] = field(default_factory=dict)
    provider_message_id: str | None = None


@runtime_checkable
class PerRecipientProvider(Protocol):
    """Sends one serialised envelope at a time (SMTP, local capture)."""

    name: str

    async def send(self, envelope: Envelope) -> SendResult: ...

    async def close(self) -> None: ...


class BatchRecipient(NamedTuple):
    """One recipient of a batch: its own `<...>` Message-ID and the values of its
    `%recipient.NAME%` placeholders, in the order of the batch's `variable_names` (a tuple,
    not a dict per recipient: a batch holds a thousand)."""

    address: str
    message_id: str
    variables: Sequence[str]


@dataclass(frozen=True, slots=True)
class BatchMessage:
    """One message template for up to `max_batch_size` recipients, with per-recipient variables.

    `deliver_at` (timezone-aware) asks the provider to hold the batch until then, which is how
    a send is spread over a window; None delivers at once.
    """

    sender: str
    subject: str
    html: str
    text: str
    headers: Mapping[str, str]
    variable_names: Sequence[str]  # what each recipient's `variables` are the values of
    recipients: Sequence[BatchRecipient]
    idempotency_key: str
    deliver_at: datetime | None = None


@runtime_checkable
class BatchProvider(Protocol):
    """Sends one batch per call (a Mailgun-compatible HTTP API)."""

    name: str
    max_batch_size: int

    async def send_batch(self, batch: BatchMessage) -> SendResult: ...

    async def close(self) -> None: ...
