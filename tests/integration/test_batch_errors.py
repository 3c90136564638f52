"""An unexpected error while a worker holds a batch (SND-12's "of any type", at the batch): the
batch is released with the error recorded on it, nobody is marked, and its job sends the
readers once the cause is gone."""

from __future__ import annotations

from jinja2 import DictLoader
from sqlalchemy import select, update

from tests.factories import make_settings
from tests.support.sending import (
    FAST_QUEUE,
    first_batch,
    prepared_send,
    recipient_states,
    registry,
    running,
    studio_with,
    wait_for_campaign_status,
)
from tests.support.waiting import wait_for
from tidings.campaigns.jobs.batch_writes import BatchError
from tidings.campaigns.jobs.payloads import FINALISE_CAMPAIGN, SEND_BATCH
from tidings.domain.sending import BatchStatus
from tidings.storage.sending import batch_claims, batches
from tidings.storage.tables import campaign_batches, captured_messages


async def test_a_segment_that_fails_to_render_is_recorded_on_its_batch_then_sent(
    database_url: str,
) -> None:
    """The segment's message cannot be rendered when a batch is taken (here a broken
    template install): each batch goes back to `pending` with the error's class on it, no
    reader leaves `pending`, and once the templates are whole again the job's retry sends
    everyone exactly once."""
    settings = make_settings(database_url, queue={**FAST_QUEUE, "max_attempts": 100})
    async with studio_with(settings, 4) as (client, container, headers):
        campaign_id = await prepared_send(client, container, headers)
        environment = container.templates.environment
        whole = environment.loader
        environment.loader = DictLoader({"message.html": "{{ no_such_value }}"})

        async def recorded() -> list[tuple[str, str, str]]:
            """Each batch's (status, error code, error) once every batch has an error."""
            async with container.db.read() as conn:
                rows = (
                    await conn.execute(
                        select(
                            campaign_batches.c.status,
                            campaign_batches.c.error_code,
                            campaign_batches.c.error,
                        ).where(campaign_batches.c.campaign_id == campaign_id)
                    )
                ).all()
            if any(row.error_code is None for row in rows):
                return []
            return [(row.status, row.error_code, row.error) for row in rows]

        handlers = registry(container, kinds=(SEND_BATCH, FINALISE_CAMPAIGN))
        async with running(container, handlers):
            await wait_for(recorded, message="no error on the batches")
        # The workers stopped, each batch released by the attempt that failed on it (a retry
        # re-claims it, the error still shown, until it is sent).
        batches = await recorded()
        assert len(batches) == 2  # the free and the paid segment
        for status, code, error in batches:
            assert (status, code) == ("pending", "batch_error")
            assert "UndefinedError" in error
        assert await recipient_states(container, campaign_id) == {"pending": 4}
        environment.loader = whole
        async with running(container, handlers):
            assert await wait_for_campaign_status(container, campaign_id) == "submitted"
        assert await recipient_states(container, campaign_id) == {"sent": 4}
        async with container.db.read() as conn:
            mailed = [
                address
                for (addresses,) in await conn.execute(select(captured_messages.c.recipients))
                for address in addresses
            ]
        assert len(mailed) == len(set(mailed)) == 4


async def test_a_batch_retried_after_an_error_owes_work_until_it_ends(database_url: str) -> None:
    """A batch released with an error and claimed again by its job's retry is `submitting`
    with no error code: it still owes work, so no other batch finishing meanwhile finalises
    the campaign (a `submitting` batch with an error code is one awaiting an operator)."""
    settings = make_settings(database_url, queue=FAST_QUEUE)
    async with studio_with(settings, 4) as (client, container, headers):
        campaign_id = await prepared_send(client, container, headers)
        now = container.sending.now()
        async with container.db.write() as conn:
            batch_id = await first_batch(conn, campaign_id)
            # The other segment's batch has ended: this one alone can owe work.
            await conn.execute(
                update(campaign_batches)
                .where(
                    campaign_batches.c.campaign_id == campaign_id,
                    campaign_batches.c.id != batch_id,
                )
                .values(status=BatchStatus.FAILED.value)
            )
            first = await batch_claims.claim(conn, batch_id, token="first-attempt", now=now)
            released = await batch_claims.release(
                conn,
                batch_id,
                token="first-attempt",
                now=now,
                error_code=BatchError.BATCH_ERROR,
                error="The worker sending this batch stopped on an unexpected ValueError",
            )
            again = await batch_claims.claim(conn, batch_id, token="second-attempt", now=now)
            row = (
                await conn.execute(
                    select(campaign_batches.c.status, campaign_batches.c.error_code).where(
                        campaign_batches.c.id == batch_id
                    )
                )
            ).one()
            owes_work = await batches.any_unsettled(conn, campaign_id)
    assert (first, released, again) == (("claimed", None), True, ("claimed", None))
    assert (row.status, row.error_code) == ("submitting", None)
    assert owes_work
