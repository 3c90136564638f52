"""One call per recipient (SMTP, local capture; SPEC SND-12, SND-13): a chunk's messages are
handed over concurrently and each recipient's outcome is classified on its own, so a failure at
recipient 40 never undoes the 39 before it. Deferred recipients are tried again inside the
batch; those still deferred come back `pending`, for the job's next try. A provider that
refuses the sender (`SenderRefused`) fails nobody: the chunk is SENDER_REFUSED, no further
message of it is handed over, and every recipient not sent comes back `pending`.

The `send_batch` job marks each chunk `sending` before it goes and settles its outcomes with
the next chunk's mark; a worker killed mid-chunk leaves at most that chunk `sending`, and whoever
reclaims the batch turns those rows `uncertain` (never resent automatically).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime

import structlog

from tidings.campaigns.submit.strategy import (
    ChunkOutcome,
    ChunkVerdict,
    InFlight,
    Recipient,
    RecipientOutcome,
)
from tidings.delivery.provider import (
    Envelope,
    PermanentFailure,
    PerRecipientProvider,
    ProviderUnreachable,
    SenderRefused,
    TemporaryFailure,
    UncertainDelivery,
)
from tidings.domain.provider_health import refusal_reason, unreachable_reason
from tidings.domain.sending import RecipientState
from tidings.outbound.domain_rates import DomainRates
from tidings.outbound.send_rate import SendRateLimiter
from tidings.rendering import SegmentRendering

log = structlog.get_logger("tidings.campaigns")


@dataclass(frozen=True, slots=True)
class RecipientMessage:
    """One recipient's finished message."""

    recipient_id: int
    envelope: Envelope


@dataclass(frozen=True, slots=True)
class RecipientMessages:
    """One chunk's messages, one per recipient."""

    messages: tuple[RecipientMessage, ...]

    @property
    def recipient_ids(self) -> list[int]:
        return [message.recipient_id for message in self.messages]


class _Deferred(Exception):
    """A temporary failure for one recipient, to be tried again inside this batch."""

    def __init__(
        self, reason: str, *, connection: bool, cause: str = "", endpoint: str | None = None
    ) -> None:
        super().__init__(reason)
        self.reason = reason
        self.connection = connection  # nothing was accepted: the relay could not be reached
        self.cause = cause  # for `connection`: the error's class or reply code (SND-26)
        self.endpoint = endpoint


class _Refused(Exception):
    """The provider refused the sender for this message (or, `cause` None, it was not tried
    after another message of the chunk was refused so)."""

    def __init__(self, cause: str | None, endpoint: str | None = None) -> None:
        super().__init__(cause)
        self.cause = cause
        self.endpoint = endpoint


Outcome = tuple[RecipientState, str | None] | _Deferred | _Refused


class PerRecipientSubmit:
    in_flight = InFlight.EACH_RECIPIENT

    def __init__(
        self,
        provider: PerRecipientProvider,
        *,
        chunk: int,
        concurrency: int,
        retries: int,
        deadline_seconds: float | None,
        retry_pause_seconds: float = 1.0,
        limiter: SendRateLimiter | None = None,
        return_path: Callable[[int], str] | None = None,
        domain_rates: DomainRates | None = None,
    ) -> None:
        self.provider = provider
        self._domains = domain_rates  # a 421/451 slows the recipient's domain (SND-25)
        self._return_path = return_path  # VERP (PRV-6): the envelope sender names the row
        self._limiter = limiter  # the provider's shared send rate (PRV-5)
        self._chunk = chunk
        self._limit = asyncio.Semaphore(concurrency)
        self._retries = retries
        self._deadline = deadline_seconds
        self._pause = retry_pause_seconds

    def chunks(self, recipients: Sequence[Recipient]) -> Iterator[Sequence[Recipient]]:
        for start in range(0, len(recipients), self._chunk):
            yield recipients[start : start + self._chunk]

    async def prepare(
        self,
        rendering: SegmentRendering,
        sender: str,
        chunk: Sequence[Recipient],
        *,
        batch_id: int,
        now: datetime,
        deliver_at: datetime | None,
    ) -> RecipientMessages:
        """Each message built just before its chunk goes (paced per message, in `submit`)."""
        return RecipientMessages(
            tuple(
                _message(rendering, self._sender(sender, recipient), recipient, now)
                for recipient in chunk
            )
        )

    def without(
        self, submission: RecipientMessages, withdrawn: frozenset[int]
    ) -> RecipientMessages:
        return RecipientMessages(
            tuple(m for m in submission.messages if m.recipient_id not in withdrawn)
        )

    async def submit(self, submission: RecipientMessages) -> ChunkOutcome:
        """If the provider refused the sender, SENDER_REFUSED: what went out stands, everyone
        else is `pending` again. If it cannot be reached at all for the whole chunk, nothing
        went out: NOT_REACHED. Otherwise each recipient's outcome; a deferral (4xx) is never
        a failure (PRV-1): still deferred after the retries inside the batch, it comes back
        `pending` with the reply's code."""
        chunk = list(submission.messages)
        outcomes = await self._send_all(chunk)
        name = self.provider.name
        refused = [o for o in outcomes if isinstance(o, _Refused) and o.cause is not None]
        if refused:
            return ChunkOutcome(
                ChunkVerdict.SENDER_REFUSED,
                name,
                recipients=tuple(
                    _recorded(message.recipient_id, outcome, sender_refused=True)
                    for message, outcome in zip(chunk, outcomes, strict=True)
                ),
                detail=refusal_reason(
                    name, self._endpoint(refused[0].endpoint), refused[0].cause or ""
                ),
            )
        unreachable = [o for o in outcomes if isinstance(o, _Deferred) and o.connection]
        if unreachable and len(unreachable) == len(chunk):
            return ChunkOutcome(
                ChunkVerdict.NOT_REACHED,
                name,
                detail=unreachable_reason(
                    name, self._endpoint(unreachable[0].endpoint), unreachable[0].cause
                ),
            )
        return ChunkOutcome(
            ChunkVerdict.ANSWERED,
            name,
            recipients=tuple(
                _recorded(message.recipient_id, outcome, sender_refused=False)
                for message, outcome in zip(chunk, outcomes, strict=True)
            ),
        )

    def _endpoint(self, reported: str | None) -> str | None:
        """host:port as the provider's error carried it (a DKIM-signing wrapper keeps it)."""
        return reported or getattr(self.provider, "endpoint", None)

    def _sender(self, sender: str, recipient: Recipient) -> str:
        if self._return_path is None:
            return sender
        return self._return_path(recipient.recipient_id)

    async def _send_all(self, chunk: list[RecipientMessage]) -> list[Outcome]:
        refused = asyncio.Event()  # once one message is refused so, no other one is tried
        outcomes = list(await asyncio.gather(*(self._one(m, refused) for m in chunk)))
        for round_number in range(self._retries):
            again = [i for i, outcome in enumerate(outcomes) if isinstance(outcome, _Deferred)]
            if refused.is_set() or not again or all(outcomes[i].connection for i in again):  # type: ignore[union-attr]
                break
            await asyncio.sleep(self._pause * (round_number + 1))
            retried = await asyncio.gather(*(self._one(chunk[i], refused) for i in again))
            for index, outcome in zip(again, retried, strict=True):
                outcomes[index] = outcome
        return outcomes

    async def _one(self, message: RecipientMessage, refused: asyncio.Event) -> Outcome:
        """One recipient's outcome. Any exception the provider raises is caught and recorded
        here (SND-12): one recipient can never abort the batch."""
        name = self.provider.name
        async with self._limit:
            if refused.is_set():
                return _Refused(None)
            if self._limiter is not None:
                await self._limiter.acquire(1)
            try:
                async with asyncio.timeout(self._deadline):  # None: the provider keeps its own
                    result = await self.provider.send(message.envelope)
            except SenderRefused as exc:
                refused.set()
                return _Refused(exc.cause, exc.endpoint)
            except TemporaryFailure as exc:
                if isinstance(exc, ProviderUnreachable):
                    code = _code(f"{name}_temporary", exc.status)
                    return _Deferred(code, connection=True, cause=exc.cause, endpoint=exc.endpoint)
                await self._slow_domain(message, exc.status)
                return _Deferred(_code(f"{name}_temporary", exc.status), connection=False)
            except PermanentFailure as exc:
                return RecipientState.FAILED, _code(f"{name}_permanent", exc.status)
            except UncertainDelivery:
                # The relay may have taken it (lost after DATA): never resent automatically.
                return RecipientState.UNCERTAIN, f"{name}_answer_lost"
            except TimeoutError:
                # The message may have been accepted as the deadline struck: not resent.
                return RecipientState.UNCERTAIN, f"{name}_deadline"
            except asyncio.CancelledError:
                raise
            except BaseException as exc:  # of any type (SND-12), but cancellation
                log.error(
                    "email.provider_error",
                    recipient_id=message.recipient_id,
                    error_type=type(exc).__name__,
                )
                return RecipientState.FAILED, f"provider_error_{type(exc).__name__}"[:64]
        for rejection in result.rejected.values():
            if rejection.permanent:
                return RecipientState.FAILED, _code(f"{name}_rejected", rejection.status)
            await self._slow_domain(message, rejection.status)
            return _Deferred(_code(f"{name}_deferred", rejection.status), connection=False)
        return RecipientState.SENT, None

    async def _slow_domain(self, message: RecipientMessage, status: int | None) -> None:
        """A 421/451 for this recipient, from its domain's MX through the relay: every worker
        sends to that domain at half its rate for a cool-down (SND-25)."""
        if self._domains is not None:
            await self._domains.deferred(message.envelope.recipients[0], status)


def _recorded(recipient_id: int, outcome: Outcome, *, sender_refused: bool) -> RecipientOutcome:
    """What one recipient's outcome is recorded as. In a chunk that found the sender refused,
    only what went out (or may have: `uncertain`) stands; everyone else is `pending` again."""
    if isinstance(outcome, tuple):
        state, reason = outcome
        if not sender_refused or state in (RecipientState.SENT, RecipientState.UNCERTAIN):
            return RecipientOutcome(recipient_id, state, reason)
    elif isinstance(outcome, _Deferred) and not sender_refused:
        return RecipientOutcome(recipient_id, RecipientState.PENDING, outcome.reason)
    return RecipientOutcome(recipient_id, RecipientState.PENDING)


def _message(
    rendering: SegmentRendering, sender: str, recipient: Recipient, now: datetime
) -> RecipientMessage:
    address = recipient.values.address
    envelope = Envelope(
        sender=sender,
        recipients=[address],
        data=rendering.personalise(recipient.values, now=now),
        message_id=rendering.message_id_for(address),
    )
    return RecipientMessage(recipient.recipient_id, envelope)


def _code(prefix: str, status: int | None) -> str:
    return f"{prefix}_{status}" if status else prefix
