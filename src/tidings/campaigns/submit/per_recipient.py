"""Handing one batch's recipients to a per-recipient provider (SMTP, local capture; SND-12,
SND-13): each recipient is marked in flight before its message is handed over, and each
outcome is settled on its own row, so a failure at recipient 40 never undoes the 39 before it.

Recipients go in chunks of `in_flight_chunk`: one fenced write settles every outcome of the
chunk before and marks the next chunk `sending`, its messages are handed over concurrently,
and the last chunk's outcomes are written with the batch's own. A worker killed mid-chunk
leaves at most that chunk `sending`; whoever reclaims the batch turns those rows `uncertain`
(never resent automatically) — the documented duplicate window.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import NamedTuple, Protocol

import structlog

from tidings.campaigns.jobs.batch_writes import BatchWrites, Outcome
from tidings.delivery.provider import (
    Envelope,
    PermanentFailure,
    PerRecipientProvider,
    ProviderUnreachable,
    TemporaryFailure,
    UncertainDelivery,
)
from tidings.delivery.send_rate import SendRateLimiter
from tidings.domain.errors import TidingsError
from tidings.domain.jobs import RetryLater
from tidings.domain.provider_health import unreachable_reason
from tidings.domain.sending import RecipientState
from tidings.rendering import RecipientValues, SegmentRendering

log = structlog.get_logger("tidings.campaigns")


@dataclass(frozen=True, slots=True)
class Parcel:
    """One recipient's finished message."""

    recipient_id: int
    envelope: Envelope


class Delivery(NamedTuple):
    """One recipient to hand over: its row id and the values that personalise its message."""

    recipient_id: int
    values: RecipientValues


@dataclass(frozen=True, slots=True)
class HandoverResult:
    """How a batch's hand-over ended. With `error_code` the batch does not complete:
    `outcome_uncertain` keeps it `submitting` for an operator, `provider_refused` fails it."""

    provider_message_id: str | None = None
    error_code: str | None = None
    error: str | None = None
    # Outcomes still to write, in the same transaction as the batch's own outcome: each
    # listed recipient's, then every other one still in flight as `sent` (a batch call).
    outcomes: tuple[Outcome, ...] = ()
    rest_sent: bool = False
    settle_from: RecipientState = RecipientState.SENDING


class HandoverStopped(TidingsError):
    """The worker is shutting down (SND-21): the hand-over stopped before its next chunk, with
    nothing in flight. The batch is given back for whoever runs next."""

    code = "handover_stopped"


def stop_requested(writes: BatchWrites) -> None:
    """Between chunks: raise `HandoverStopped` once this process has begun shutting down."""
    if writes.context.queue.stopping.is_set():
        raise HandoverStopped("the worker is shutting down")


class Handover(Protocol):
    """Hands one batch's deliveries to a provider and settles each recipient's row."""

    async def deliver(
        self,
        rendering: SegmentRendering,
        sender: str,
        deliveries: Sequence[Delivery],
        writes: BatchWrites,
        *,
        deliver_at: datetime | None = None,
    ) -> HandoverResult: ...


class _Deferred(Exception):
    """A temporary failure for one recipient, to be tried again inside this batch."""

    def __init__(self, reason: str, *, connection: bool, cause: str = "") -> None:
        super().__init__(reason)
        self.reason = reason
        self.connection = connection  # nothing was accepted: the relay could not be reached
        self.cause = cause  # for `connection`: the error's class or reply code (SND-26)


class PerRecipientHandover:
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
    ) -> None:
        self.provider = provider
        self._return_path = return_path  # VERP (PRV-6): the envelope sender names the row
        self._limiter = limiter  # the provider's shared send rate (PRV-5)
        self._chunk = chunk
        self._limit = asyncio.Semaphore(concurrency)
        self._retries = retries
        self._deadline = deadline_seconds
        self._pause = retry_pause_seconds

    async def deliver(
        self,
        rendering: SegmentRendering,
        sender: str,
        deliveries: Sequence[Delivery],
        writes: BatchWrites,
        *,
        deliver_at: datetime | None = None,
    ) -> HandoverResult:
        """Hand every message over, chunk by chunk, each built just before its chunk goes.
        If the provider cannot be reached at all for a whole chunk, the chunk goes back to
        `pending` and the job retries later; so do recipients still deferred after the
        retries inside the batch, once every chunk went out. At shutdown the chunk in hand is
        finished and settled, and no new one is started."""
        settled_later: list[Outcome] = []  # the chunk just handed over, settled with the next
        deferred = 0
        for start in range(0, len(deliveries), self._chunk):
            try:
                stop_requested(writes)
                now = writes.context.now()
                chunk = [
                    _parcel(rendering, self._sender(sender, delivery), delivery, now)
                    for delivery in deliveries[start : start + self._chunk]
                ]
            except BaseException:
                await writes.settle(settled_later)  # what went out is recorded before leaving
                raise
            withdrawn = await writes.settle_and_mark(
                settled_later, [parcel.recipient_id for parcel in chunk]
            )
            chunk = [parcel for parcel in chunk if parcel.recipient_id not in withdrawn]
            ids = [parcel.recipient_id for parcel in chunk]
            outcomes = await self._hand_over(chunk)
            unreachable = [o for o in outcomes if isinstance(o, _Deferred) and o.connection]
            if unreachable and len(unreachable) == len(chunk):
                await writes.unmark(ids)
                endpoint = getattr(self.provider, "endpoint", None)
                raise RetryLater(
                    unreachable_reason(self.provider.name, endpoint, unreachable[0].cause)
                )
            # A deferral (4xx) is never a failure (PRV-1): still deferred after the retries
            # inside the batch, the recipient goes back to `pending`, with the reply's code,
            # for the job's next try (later, on a fresh connection).
            settled_later = [
                (parcel.recipient_id, RecipientState.PENDING, outcome.reason)
                if isinstance(outcome, _Deferred)
                else (parcel.recipient_id, *outcome)
                for parcel, outcome in zip(chunk, outcomes, strict=True)
            ]
            deferred += sum(isinstance(outcome, _Deferred) for outcome in outcomes)
        if deferred:
            await writes.settle(settled_later)
            raise RetryLater(f"{self.provider.name} deferred {deferred} recipient(s)")
        # The last chunk's outcomes are written with the batch's own outcome (one transaction).
        return HandoverResult(outcomes=tuple(settled_later))

    def _sender(self, sender: str, delivery: Delivery) -> str:
        if self._return_path is None:
            return sender
        return self._return_path(delivery.recipient_id)

    async def _hand_over(
        self, chunk: list[Parcel]
    ) -> list[tuple[RecipientState, str | None] | _Deferred]:
        outcomes = list(await asyncio.gather(*(self._one(parcel) for parcel in chunk)))
        for round_number in range(self._retries):
            again = [i for i, outcome in enumerate(outcomes) if isinstance(outcome, _Deferred)]
            if not again or all(outcomes[i].connection for i in again):  # type: ignore[union-attr]
                break
            await asyncio.sleep(self._pause * (round_number + 1))
            retried = await asyncio.gather(*(self._one(chunk[i]) for i in again))
            for index, outcome in zip(again, retried, strict=True):
                outcomes[index] = outcome
        return outcomes

    async def _one(self, parcel: Parcel) -> tuple[RecipientState, str | None] | _Deferred:
        """One recipient's outcome. Any exception the provider raises is caught and recorded
        here (SND-12): one recipient can never abort the batch."""
        name = self.provider.name
        async with self._limit:
            if self._limiter is not None:
                await self._limiter.acquire(1)
            try:
                async with asyncio.timeout(self._deadline):  # None: the provider keeps its own
                    result = await self.provider.send(parcel.envelope)
            except TemporaryFailure as exc:
                if isinstance(exc, ProviderUnreachable):
                    code = _code(f"{name}_temporary", exc.status)
                    return _Deferred(code, connection=True, cause=exc.cause)
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
                    recipient_id=parcel.recipient_id,
                    error_type=type(exc).__name__,
                )
                return RecipientState.FAILED, f"provider_error_{type(exc).__name__}"[:64]
        for rejection in result.rejected.values():
            if rejection.permanent:
                return RecipientState.FAILED, _code(f"{name}_rejected", rejection.status)
            return _Deferred(_code(f"{name}_deferred", rejection.status), connection=False)
        return RecipientState.SENT, None


def _parcel(rendering: SegmentRendering, sender: str, delivery: Delivery, now: datetime) -> Parcel:
    address = delivery.values.address
    envelope = Envelope(
        sender=sender,
        recipients=[address],
        data=rendering.personalise(delivery.values, now=now),
        message_id=rendering.message_id_for(address),
    )
    return Parcel(delivery.recipient_id, envelope)


def _code(prefix: str, status: int | None) -> str:
    return f"{prefix}_{status}" if status else prefix
