"""`tidings campaign retry|reconcile|resend`: an operator's repairs to a send (SND-13,
SND-19), each audited as `cli:<login>`."""

from __future__ import annotations

import getpass
import sys
from enum import StrEnum

import typer

from tidings.api.admin.send_views import AttemptQueued, ReconcileResult
from tidings.campaigns.retry import AttemptStarted
from tidings.cli.context import container_for, fail, out_console, run
from tidings.domain.sending import BatchStatus, RecipientState


class ReconcileAs(StrEnum):
    SUBMITTED = "submitted"
    FAILED = "failed"


class ResendState(StrEnum):
    UNCERTAIN = "uncertain"
    FAILED = "failed"


def _actor() -> str:
    return f"cli:{getpass.getuser()}"


def _note(note: str) -> str:
    if not note.strip() or len(note) > 500:
        fail("--note: say why, in 1 to 500 characters (it is kept in the audit)")
    return note


def _started(started: AttemptStarted, what: str, as_json: bool) -> None:
    if as_json:
        print(AttemptQueued.of(started).model_dump_json())
        return
    out_console.print(
        f"{what} campaign {started.campaign_id}: attempt {started.attempt} queued "
        f"({started.batches} batch(es) and {started.recipients} recipient(s) back to pending). "
        f"Follow it with `tidings campaign status {started.campaign_id} --follow`.",
        markup=False,
    )


def register(app: typer.Typer) -> None:
    @app.command("retry")
    def retry(
        ctx: typer.Context,
        campaign_id: int = typer.Argument(..., help="The campaign's id."),
        as_json: bool = typer.Option(False, "--json", help="Print the new attempt as JSON."),
    ) -> None:
        """Retry a failed send: its failed batches and transiently failed recipients are
        sent in a new attempt; nobody already sent is sent again. Refused while a batch is
        submitting (reconcile it first) or after a verification failure. Also a submitted
        send whose recipients a relay refusing the sender failed (530, 535, 554)."""

        async def go() -> AttemptStarted:
            async with container_for(ctx) as container:
                return await container.retries.retry(campaign_id, actor=_actor())

        _started(run(go), "Retrying", as_json)

    @app.command("reconcile")
    def reconcile(
        ctx: typer.Context,
        campaign_id: int = typer.Argument(..., help="The campaign's id."),
        batch_id: int = typer.Option(..., "--batch", help="The submitting batch's id."),
        outcome: ReconcileAs = typer.Option(
            ..., "--as", help="submitted: the provider had it; failed: it did not."
        ),
        note: str = typer.Option(..., "--note", help="Why: what you found at the provider."),
        as_json: bool = typer.Option(False, "--json", help="Print the result as JSON."),
    ) -> None:
        """Record what the provider did with a batch left submitting (its outcome unknown),
        after looking its Message-IDs up there. Audited with your login and the note."""
        text = _note(note)

        async def go() -> None:
            async with container_for(ctx) as container:
                done = await container.reconciler.reconcile(
                    campaign_id, batch_id, BatchStatus(outcome.value), note=text, actor=_actor()
                )
            if as_json:
                print(ReconcileResult.of(done).model_dump_json())
                return
            out_console.print(
                f"Batch {done.batch_id} reconciled as {done.outcome.value} "
                f"({done.recipients} recipient(s) settled). Campaign {done.campaign_id} is "
                f"{done.campaign_status.value}: {done.next_step}.",
                markup=False,
            )

        run(go)

    @app.command("resend")
    def resend(
        ctx: typer.Context,
        campaign_id: int = typer.Argument(..., help="The campaign's id."),
        state: ResendState = typer.Option(
            ..., "--state", help="uncertain, or failed (transient failures only)."
        ),
        note: str = typer.Option(..., "--note", help="Why you are sending again."),
        yes: bool = typer.Option(False, "--yes", "-y", help="Do not ask for confirmation."),
        as_json: bool = typer.Option(False, "--json", help="Print the new attempt as JSON."),
    ) -> None:
        """Send again to a finished send's uncertain (or transiently failed) recipients. The
        uncertain ones may already have the message: this is the operator's decision to risk
        a duplicate, audited. Nobody sent, excluded or permanently failed is touched."""
        text = _note(note)
        chosen = RecipientState(state.value)

        async def go() -> AttemptStarted:
            async with container_for(ctx) as container:
                count = await container.retries.resendable_count(campaign_id, chosen)
                if not yes:
                    if not sys.stdin.isatty():
                        fail("refusing to resend without confirmation: add --yes")
                    question = f"Send campaign {campaign_id} again to {count} {state.value} "
                    if not typer.confirm(f"{question}recipient(s)?", default=False):
                        fail("not resent")
                return await container.retries.resend(
                    campaign_id, chosen, note=text, actor=_actor()
                )

        _started(run(go), "Resending", as_json)
