"""CSV imports started from the browser: each runs as a task in this process while the page
polls its progress, then shows the report with the per-line errors. The form's consent
choice: leave the waiting rows waiting, email them the confirmation link afterwards (as
`tidings subscribers import --send-confirmations`), or assert consent (`--assert-consent`)."""

from __future__ import annotations

import asyncio
import io
import secrets
from dataclasses import dataclass, field

from tidings.audience.confirm_pending import PendingConfirmations
from tidings.audience.importer import Importer, ImportReport
from tidings.domain.errors import TidingsError

# Finished runs kept for their report pages; the oldest go first.
KEEP_FINISHED = 20
CONFIRMATION_RATE = 10.0  # a second, as the CLI's default
CONSENT_CHOICES = ("wait", "confirm", "assert")


@dataclass
class ImportRun:
    newsletter: str
    total_rows: int  # data lines in the file: the progress bar's end
    rows_read: int = 0
    consent: str = "wait"
    report: ImportReport | None = None
    confirmations_queued: int | None = None
    error: str | None = None
    task: asyncio.Task[None] | None = field(default=None, repr=False)

    @property
    def done(self) -> bool:
        return self.report is not None or self.error is not None


class ImportRuns:
    """The imports this process runs or ran lately, by an unguessable id."""

    def __init__(self) -> None:
        self._runs: dict[str, ImportRun] = {}

    def start(
        self,
        importer: Importer,
        confirmations: PendingConfirmations,
        text: str,
        *,
        newsletter: str,
        actor: str,
        consent: str = "wait",
    ) -> str:
        run_id = secrets.token_urlsafe(12)
        run = ImportRun(
            newsletter=newsletter, total_rows=max(text.count("\n") - 1, 1), consent=consent
        )
        run.task = asyncio.create_task(self._run(run, importer, confirmations, text, actor))
        self._runs[run_id] = run
        self._forget_old()
        return run_id

    def get(self, run_id: str) -> ImportRun | None:
        return self._runs.get(run_id)

    async def _run(
        self,
        run: ImportRun,
        importer: Importer,
        confirmations: PendingConfirmations,
        text: str,
        actor: str,
    ) -> None:
        def progress(rows: int) -> None:
            run.rows_read = rows

        try:
            report = await importer.import_csv(
                io.StringIO(text, newline=""),
                newsletter_slug=run.newsletter,
                actor=actor,
                on_progress=progress,
                chunk_size=500,
                assert_consent=run.consent == "assert",
            )
            run.total_rows = report.total_rows
            if run.consent == "confirm" and report.awaiting_confirmation:
                run.confirmations_queued = await confirmations.ask(
                    run.newsletter, rate_per_second=CONFIRMATION_RATE
                )
            run.report = report  # done only once the confirmations are queued too
        except TidingsError as refused:
            run.error = refused.detail

    def _forget_old(self) -> None:
        finished = [run_id for run_id, run in self._runs.items() if run.done]
        for run_id in finished[: max(len(finished) - KEEP_FINISHED, 0)]:
            del self._runs[run_id]
