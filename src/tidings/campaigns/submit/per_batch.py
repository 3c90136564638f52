"""Handing one batch to a batch provider (a Mailgun-compatible API; PRV-2, SND-11, SND-13): one
call for the whole batch, the message a template with each recipient's variables.

Every recipient is marked `sending` before the call. The provider's answer settles them: sent,
or failed one by one where it refused some. A failure before the request went out puts them
back to `pending` (the job retries later). A lost answer after the request went out — or
anything else unexplained — leaves them `uncertain` and the batch `submitting`: the provider
may have accepted it, so it is never resubmitted automatically; an operator reconciles it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import datetime

import structlog

from tidings.campaigns.jobs.batch_writes import BatchWrites
from tidings.campaigns.submit.per_recipient import Delivery, HandoverResult, stop_requested
from tidings.delivery.provider import (
    BatchMessage,
    BatchProvider,
    BatchRecipient,
    PermanentFailure,
    SendResult,
    TemporaryFailure,
)
from tidings.delivery.send_rate import SendRateLimiter
from tidings.domain.jobs import RetryLater
from tidings.domain.sending import RecipientState
from tidings.rendering import SegmentRendering
from tidings.rendering.batch import BatchTemplate, batch_template, batch_variables

log = structlog.get_logger("tidings.campaigns")
OUTCOME_UNCERTAIN = "outcome_uncertain"
PROVIDER_REFUSED = "provider_refused"
TEMPLATE_CACHE_SIZE = 16
DEFAULT_COOL_DOWN = 30.0  # seconds, when a 429 names no Retry-After


class BatchHandover:
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

    async def deliver(
        self,
        rendering: SegmentRendering,
        sender: str,
        deliveries: Sequence[Delivery],
        writes: BatchWrites,
        *,
        deliver_at: datetime | None = None,
    ) -> HandoverResult:
        if not deliveries:
            return HandoverResult()
        provider = self._providers(rendering.sender.sending_domain)
        template = self._template(rendering)
        by_address = {delivery.values.address: delivery.recipient_id for delivery in deliveries}
        message = BatchMessage(
            sender=template.from_header,
            subject=template.subject,
            html=template.html,
            text=template.text,
            headers=template.headers,
            recipients=[
                BatchRecipient(
                    address=delivery.values.address,
                    message_id=rendering.message_id_for(delivery.values.address),
                    variables=batch_variables(template, delivery.values),
                )
                for delivery in deliveries
            ],
            idempotency_key=f"batch-{writes.batch_id}",
            deliver_at=deliver_at,
        )
        ids = list(by_address.values())
        name = provider.name
        if self._limiter is not None:  # before anything is in flight: waiting costs nothing
            await self._limiter.acquire(len(ids))
        stop_requested(writes)  # shutting down: the request is not started
        # In flight from here, recorded once on the batch (not on each of 1,000 rows): the
        # readers stay `pending` until the answer settles them, or a takeover finds the mark.
        # Consent is re-checked in that same write; whoever left is not in the call.
        withdrawn = await writes.handed_over(True, ids)
        if withdrawn:
            ids = [recipient_id for recipient_id in ids if recipient_id not in withdrawn]
            message = replace(
                message,
                recipients=[
                    r for r in message.recipients if by_address[r.address] not in withdrawn
                ],
            )
            if not ids:
                await writes.handed_over(False)
                return HandoverResult()
        try:
            async with asyncio.timeout(self._deadline):
                result = await provider.send_batch(message)
        except TemporaryFailure as exc:
            await writes.handed_over(False)  # never went out, or was refused whole
            if exc.status == 429 and self._limiter is not None:
                # Every worker slows down, not only this one (PRV-5).
                pause = exc.retry_after_seconds
                await self._limiter.cool_down(DEFAULT_COOL_DOWN if pause is None else pause)
            raise RetryLater(
                f"{provider.name} temporary failure {exc.status or ''}".strip(),
                retry_after_seconds=exc.retry_after_seconds,
            ) from None
        except PermanentFailure as exc:
            await writes.handed_over(False)
            return HandoverResult(
                error_code=PROVIDER_REFUSED,
                error=f"{provider.name} refused the batch ({exc.status or 'no status'}); "
                "check the provider settings, then retry.",
            )
        except asyncio.CancelledError:
            raise
        except BaseException as exc:  # UncertainDelivery, our deadline, anything unexplained
            await writes.move(
                ids,
                from_states=[RecipientState.PENDING],
                to_state=RecipientState.UNCERTAIN,
                reason=f"{provider.name}_answer_lost",
            )
            log.warning("campaign.batch_uncertain", error_type=type(exc).__name__)
            return HandoverResult(
                error_code=OUTCOME_UNCERTAIN,
                error=f"{provider.name} may have accepted this batch: its answer was lost "
                f"({type(exc).__name__}). Reconcile it before any retry.",
            )
        refused = tuple(
            (by_address[address], RecipientState.FAILED, _rejection_code(name, result, address))
            for address in result.rejected
            if address in by_address
        )
        # Settled with the batch's outcome, in one transaction (the submitter's `finish`).
        return HandoverResult(
            provider_message_id=result.provider_message_id,
            outcomes=refused,
            rest_sent=True,
            settle_from=RecipientState.PENDING,
        )


def _rejection_code(name: str, result: SendResult, address: str) -> str | None:
    rejected = result.rejected.get(address)
    if rejected is None:
        return None
    kind = "rejected" if rejected.permanent else "deferred"
    return f"{name}_{kind}_{rejected.status}" if rejected.status else f"{name}_{kind}"
