"""Exactly one consumer per job kind (SPEC SND-22). Two handlers taking turns at one kind's
jobs race, and the one that does not understand a job marks it done: work vanishes while every
check stays green. The worker's composition has one handler per kind, and a second one stops
the worker at start with an error naming the kind."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
import typer

from tests.factories import make_settings
from tidings.audience.consent_requests import REQUEST_CONSENT
from tidings.audience.subscriber_mail import SEND_SUBSCRIBER_EMAIL
from tidings.bootstrap import Container, build
from tidings.campaigns.feeds.jobs import RUN_FEED, SEND_DIGEST
from tidings.campaigns.jobs.payloads import SEND_BATCH, SEND_KINDS
from tidings.cli.context import run
from tidings.outbound.email_jobs import SEND_EMAIL
from tidings.outbound.webhooks import DELIVER_WEBHOOK
from tidings.queue.job import Job
from tidings.queue.policy import HandlerRegistry


async def _drop(job: Job) -> None:
    """A consumer that does not know the job and returns quietly: the failure mode."""
    return None


def _container(tmp_path: Path) -> Container:
    return build(make_settings(f"sqlite:///{tmp_path / 'consumers.db'}"))


async def test_every_job_kind_a_worker_runs_has_exactly_one_handler(tmp_path: Path) -> None:
    """Each kind that tidings enqueues needs one consumer: none, and its jobs wait for ever;
    two, and they race. The worker's registry is the one place that decides."""
    container = _container(tmp_path)
    try:
        kinds = container.handler_registry().kinds()
    finally:
        await container.close()
    assert sorted(kinds) == sorted(
        {
            SEND_EMAIL,
            SEND_SUBSCRIBER_EMAIL,
            REQUEST_CONSENT,
            DELIVER_WEBHOOK,
            RUN_FEED,
            SEND_DIGEST,
            *SEND_KINDS,
        }
    )
    assert len(kinds) == len(set(kinds))


def test_a_second_consumer_of_a_kind_stops_the_worker_at_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Adding another handler for `send_batch` beside the real one (as two decorated classes
    on one queue would) must fail loudly when the worker starts — before it claims a job —
    with a one-line error naming the kind, not run and drop a share of the batches."""
    container = _container(tmp_path)
    composed = container.handler_registry

    def with_a_second_consumer() -> HandlerRegistry:
        registry = composed()
        registry.register(SEND_BATCH, _drop)
        return registry

    monkeypatch.setattr(container, "handler_registry", with_a_second_consumer)

    async def start_worker() -> None:
        stop = asyncio.Event()
        stop.set()  # were the registry accepted, the worker would start and stop at once
        try:
            await container.run_workers(stop)
        finally:
            await container.close()

    with pytest.raises(typer.Exit) as stopped:
        run(start_worker)
    assert stopped.value.exit_code == 1
    error = capsys.readouterr().err
    assert "a handler for job kind 'send_batch' is already registered" in error
