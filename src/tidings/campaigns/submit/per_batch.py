"""One call per batch (a Mailgun-compatible API; SPEC PRV-2, SND-11, SND-13): the whole batch
goes in one request, the message a template with each recipient's variables.

Before the call the `send_batch` job marks the batch row handed over (its recipient rows stay
`pending`). The provider's answer settles them: sent, or failed one by one where it refused
some. A failure before the request went out is NOT_REACHED (given back, the job retries later);
a permanent refusal of the whole call fails the batch; a refusal of the sender (a key or
domain refused: 401, 403) is SENDER_REFUSED, failing nobody: the send pauses, named. A lost
answer after the request may have gone out — or anything else unexplained — is ANSWER_LOST:
the recipient rows become `uncertain` and the batch stays `submitting`, never resubmitted
automatically; an operator reconciles it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
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
    BatchMessage,
    BatchProvider,
    BatchRecipient,
    PermanentFailure,
    ProviderUnreachable,
    SenderRefused,
    SendResult,
    TemporaryFailure,
)
from tidings.domain.provider_health import refusal_reason, unreachable_reason
from tidings.domain.sending import RecipientState
from tidings.outbound.send_rate import SendRateLimiter
from tidings.rendering import SegmentRendering
from tidings.rendering.batch import BatchTemplate, batch_template, batch_variables

log = structlog.get_logger("tidings.campaigns")
TEMPLATE_CACHE_SIZE = 16
DEFAULT_COOL_DOWN = 30.0  # seconds, when a 429 names no Retry-After


@dataclass(frozen=True, slots=True)
class BatchCall:
    """The one request for a batch, and which row each of its addresses is."""

    provider: BatchProvider
    message: BatchMessage
    by_address: dict[str, int]

    @property
    def recipient_ids(self) -> list[int]:
        return [self.by_address[r.address] for r in self.message.recipients]


class PerBatchSubmit:
    in_flight = InFlight.WHOLE_BATCH

    def __init__(
        self,
        providers: Callable[[str], BatchProvider],
        *,
        deadline_seconds: float,
        limiter: SendRateLimiter | None = None,
    ) -> None:
        self._providers = providers  # one per sending domain (warming uses a second one)
        self._deadline = deadline_seconds
        self._limiter = limiter  # the provider's shared send rate (PRV-5)
        self._templates: dict[int, tuple[SegmentRendering, BatchTemplate]] = {}

    def _template(self, rendering: SegmentRendering) -> BatchTemplate:
        """Made once per segment rendering (kept alive by the worker's rendering cache)."""
        key = id(rendering)
        found = self._templates.get(key)
        if found is None or found[0] is not rendering:
            if len(self._templates) > TEMPLATE_CACHE_SIZE:
                self._templates.clear()
            found = self._templates[key] = (rendering, batch_template(rendering))
        return found[1]

    def chunks(self, recipients: Sequence[Recipient]) -> Iterator[Sequence[Recipient]]:
        if recipients:
            yield recipients

    async def prepare(
        self,
        rendering: SegmentRendering,
        sender: str,
        chunk: Sequence[Recipient],
        *,
        batch_id: int,
        now: datetime,
        deliver_at: datetime | None,
    ) -> BatchCall:
        """The request, and the send rate's permission for it: waited for before anything is
        in flight, where waiting costs nothing."""
        provider = self._providers(rendering.sender.sending_domain)
        template = self._template(rendering)
        message = BatchMessage(
            sender=template.from_header,
            subject=template.subject,
            html=template.html,
            text=template.text,
            headers=template.headers,
            variable_names=template.variable_names,
            recipients=[
                BatchRecipient(
                    address=recipient.values.address,
                    message_id=rendering.message_id_for(recipient.values.address),
                    variables=batch_variables(template, recipient.values),
                )
                for recipient in chunk
            ],
            idempotency_key=f"batch-{batch_id}",
            deliver_at=deliver_at,
        )
        by_address = {recipient.values.address: recipient.recipient_id for recipient in chunk}
        if self._limiter is not None:
            await self._limiter.acquire(len(by_address))
        return BatchCall(provider, message, by_address)

    def without(self, submission: BatchCall, withdrawn: frozenset[int]) -> BatchCall:
        if not withdrawn:
            return submission
        recipients = [
            r
            for r in submission.message.recipients
            if submission.by_address[r.address] not in withdrawn
        ]
        return replace(submission, message=replace(submission.message, recipients=recipients))

    async def submit(self, submission: BatchCall) -> ChunkOutcome:
        provider, by_address = submission.provider, submission.by_address
        name = provider.name
        try:
            async with asyncio.timeout(self._deadline):
                result = await provider.send_batch(submission.message)
        except TemporaryFailure as exc:  # never went out, or was refused whole
            if exc.status == 429 and self._limiter is not None:
                # Every worker slows down, not only this one (PRV-5).
                pause = exc.retry_after_seconds
                await self._limiter.cool_down(DEFAULT_COOL_DOWN if pause is None else pause)
            return ChunkOutcome(
                ChunkVerdict.NOT_REACHED,
                name,
                detail=_temporary_reason(provider, exc),
                retry_after_seconds=exc.retry_after_seconds,
            )
        except SenderRefused as exc:
            endpoint = exc.endpoint or getattr(provider, "endpoint", None)
            return ChunkOutcome(
                ChunkVerdict.SENDER_REFUSED, name, detail=refusal_reason(name, endpoint, exc.cause)
            )
        except PermanentFailure as exc:
            return ChunkOutcome(
                ChunkVerdict.REFUSED,
                name,
                detail=f"{name} refused the batch ({exc.status or 'no status'}); "
                "check the provider settings, then retry.",
            )
        except asyncio.CancelledError:
            raise
        except BaseException as exc:  # UncertainDelivery, our deadline, anything unexplained
            log.warning("campaign.batch_uncertain", error_type=type(exc).__name__)
            return ChunkOutcome(
                ChunkVerdict.ANSWER_LOST,
                name,
                others=RecipientState.UNCERTAIN,
                others_reason=f"{name}_answer_lost",
                detail=f"{name} may have accepted this batch: its answer was lost "
                f"({type(exc).__name__}). Reconcile it before any retry.",
            )
        refused = tuple(
            RecipientOutcome(
                by_address[address], RecipientState.FAILED, _rejection_code(name, result, address)
            )
            for address in result.rejected
            if address in by_address
        )
        return ChunkOutcome(
            ChunkVerdict.ANSWERED,
            name,
            recipients=refused,
            others=RecipientState.SENT,
            provider_message_id=result.provider_message_id,
        )


def _rejection_code(name: str, result: SendResult, address: str) -> str | None:
    rejected = result.rejected.get(address)
    if rejected is None:
        return None
    kind = "rejected" if rejected.permanent else "deferred"
    return f"{name}_{kind}_{rejected.status}" if rejected.status else f"{name}_{kind}"


def _temporary_reason(provider: BatchProvider, failure: TemporaryFailure) -> str:
    """What the batch job records: a provider that cannot be reached or answers 5xx is named
    with its endpoint (SND-26), as the SMTP relay is; a 429 or 408 is only slowness."""
    endpoint = getattr(provider, "endpoint", None)
    if isinstance(failure, ProviderUnreachable):
        return unreachable_reason(provider.name, endpoint, failure.cause)
    if failure.status is not None and failure.status >= 500:
        return unreachable_reason(provider.name, endpoint, f"reply {failure.status}")
    if failure.status is None:  # the connection broke before the request went out
        return unreachable_reason(provider.name, endpoint, "connection lost")
    return f"{provider.name} temporary failure {failure.status}"
