"""What providers and mailboxes reported about transactional messages (PRV-6), read for the
admin API and the command line: by the mail job that sent one, or by its Message-ID."""

from __future__ import annotations

from tidings.storage import transactional_outcomes
from tidings.storage.database import Database
from tidings.storage.transactional_outcomes import MessageOutcome as MessageOutcome  # its answer


class MessageOutcomes:
    def __init__(self, db: Database) -> None:
        self._db = db

    async def of_job(self, job_id: int) -> MessageOutcome | None:
        """The outcome of the message mail job `job_id` sends; None for other jobs."""
        async with self._db.read() as conn:
            return await transactional_outcomes.outcome_of_job(conn, job_id)

    async def of_message(self, message_id: str) -> MessageOutcome | None:
        """The outcome of the message with this Message-ID; None if it is no transactional
        message (a campaign's, or one sent before outcomes were kept)."""
        async with self._db.read() as conn:
            return await transactional_outcomes.outcome_of_message(conn, message_id)
