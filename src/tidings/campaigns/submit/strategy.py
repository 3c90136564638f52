"""What a submit strategy is and what it answers (SPEC SND-12, SND-13): the `send_batch` job
gives it one chunk of recipients at a time and writes the typed outcome it returns. A strategy
builds messages and calls the provider; it never writes a row, reads the clock or the stop flag.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from enum import Enum
from typing import NamedTuple, Protocol, TypeVar

from tidings.domain.sending import RecipientState
from tidings.rendering import RecipientValues, SegmentRendering


class InFlight(Enum):
    """How a chunk is marked in flight before it goes, so that a crash leaves the evidence."""

    EACH_RECIPIENT = "each_recipient"  # its rows are marked `sending` (one call per recipient)
    WHOLE_BATCH = "whole_batch"  # the batch row is marked handed over; rows stay `pending`

    @property
    def row_state(self) -> RecipientState:
        """The state the chunk's rows hold while in flight: their outcomes settle from it."""
        if self is InFlight.EACH_RECIPIENT:
            return RecipientState.SENDING
        return RecipientState.PENDING


class ChunkVerdict(Enum):
    """How the provider call(s) for one chunk ended, as a whole."""

    ANSWERED = "answered"  # each recipient's outcome is known (or deferred to the job's retry)
    NOT_REACHED = "not_reached"  # nothing went out: the chunk is given back, the job retries
    REFUSED = "refused"  # the provider refused the whole batch: the batch fails
    ANSWER_LOST = "answer_lost"  # it may have gone out: never resubmitted, an operator decides
    # The provider refused the sender (SND-26): nobody's failure. What went out is recorded,
    # everyone else goes back `pending`, and the send pauses with the problem named.
    SENDER_REFUSED = "sender_refused"


@dataclass(frozen=True, slots=True)
class RecipientOutcome:
    """One recipient's outcome: `sent`, `failed`, `uncertain`, or `pending` (deferred: the
    provider asked to be tried later, on the job's next try) with the provider's reason."""

    recipient_id: int
    state: RecipientState
    reason: str | None = None


@dataclass(frozen=True, slots=True)
class ChunkOutcome:
    """What one chunk's submission came to, for the `send_batch` job to write."""

    verdict: ChunkVerdict
    provider: str  # the provider's name, for messages and reason codes
    recipients: tuple[RecipientOutcome, ...] = ()
    # Every recipient of the chunk not in `recipients` (a batch call: all but the refused
    # are `sent`; an answer lost: all `uncertain`), with its reason.
    others: RecipientState | None = None
    others_reason: str | None = None
    provider_message_id: str | None = None
    detail: str | None = None  # why, when the verdict is not ANSWERED
    retry_after_seconds: float | None = None  # NOT_REACHED: the provider's Retry-After

    @property
    def deferred(self) -> int:
        """Recipients the provider deferred, owed a try on the job's next run."""
        return sum(outcome.state is RecipientState.PENDING for outcome in self.recipients)


class Recipient(NamedTuple):
    """One recipient to submit: its row id and the values that personalise its message."""

    recipient_id: int
    values: RecipientValues


class Submission(Protocol):
    """One chunk's messages, built before anything is marked in flight."""

    @property
    def recipient_ids(self) -> list[int]: ...


S = TypeVar("S", bound=Submission)


class SubmitStrategy(Protocol[S]):
    """One way of reaching a provider: per recipient, or one call per batch."""

    in_flight: InFlight

    def chunks(self, recipients: Sequence[Recipient]) -> Iterator[Sequence[Recipient]]:
        """The chunks the batch goes in, in order; each is marked in flight before it goes."""
        ...

    async def prepare(
        self,
        rendering: SegmentRendering,
        sender: str,
        chunk: Sequence[Recipient],
        *,
        batch_id: int,
        now: datetime,
        deliver_at: datetime | None,
    ) -> S:
        """Build the chunk's messages (and wait for the send rate, where it is paced per
        call): nothing is in flight yet, so a failure here leaves the chunk `pending`."""
        ...

    def without(self, submission: S, withdrawn: frozenset[int]) -> S:
        """The submission less the recipients whose consent was withdrawn (SND-10)."""
        ...

    async def submit(self, submission: S) -> ChunkOutcome:
        """Hand the chunk to the provider and classify what happened (HOUSE rule 8): any
        exception the provider code raises is an outcome here, never an abort."""
        ...
