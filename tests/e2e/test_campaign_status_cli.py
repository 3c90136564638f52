"""The operator's commands for a troubled send, run as an operator runs them: status (one line,
JSON, --follow with its exit code), the uncertain readers with their Message-IDs, a refused
retry that says why, and an audited reconcile as `cli:<login>`."""

from __future__ import annotations

import asyncio
import csv
import getpass
import io
import json
from collections.abc import AsyncIterator

import httpx
import pytest
from sqlalchemy import select

from tests.support.cli import Ran, clean_env, tidings
from tests.support.sending import (
    batch_provider_settings,
    create_campaign,
    registry,
    running,
    studio_with,
    wait_for_campaign_status,
)
from tidings.bootstrap import Container
from tidings.devservers.dev_faults import Fault
from tidings.devservers.dev_server import DevProviderServer
from tidings.storage.sending import interventions
from tidings.storage.tables import campaign_batches

Studio = tuple[httpx.AsyncClient, Container, dict[str, str], DevProviderServer, str]


@pytest.fixture
async def studio(database_url: str, dev_provider: DevProviderServer) -> AsyncIterator[Studio]:
    settings = batch_provider_settings(database_url, dev_provider.base_url)
    async with studio_with(settings, 100) as (client, container, headers):
        yield client, container, headers, dev_provider, database_url


async def _tidings(database_url: str, *args: str) -> Ran:
    """The command on a thread of its own, while this test's loop serves the provider."""
    env = clean_env(DATABASE_URL=database_url, LOG_FORMAT="json")
    return await asyncio.to_thread(tidings, *args, env=env)


@pytest.mark.slow
async def test_an_operator_finds_decides_and_follows_an_uncertain_send(studio: Studio) -> None:
    """The runbook from a terminal: the status says why it stopped and that retry will not
    help yet, the listing gives the Message-IDs to look up, retry says reconcile first, the
    reconcile is audited as the login, and --follow exits 0 once the send is submitted."""
    client, container, headers, server, url = studio
    server.faults.replace([Fault(action="drop_after_accept", times=1)])
    campaign_id = await create_campaign(client, headers)
    await client.post(f"/api/admin/campaigns/{campaign_id}/send", headers=headers)
    async with running(container, registry(container)):
        assert await wait_for_campaign_status(container, campaign_id) == "failed"
    cid = str(campaign_id)

    shown = await _tidings(url, "campaign", "status", cid, "--json")
    assert shown.returncode == 0, shown.stderr
    status = json.loads(shown.stdout)
    assert (status["status"], status["error_code"], status["retryable"]) == (
        "failed",
        "batch_outcome_uncertain",
        False,
    )
    line = await _tidings(url, "campaign", "status", cid)
    assert f"campaign {cid}: failed during submitting" in line.stdout
    assert "not retryable" in line.stdout
    followed = await _tidings(url, "campaign", "status", cid, "--follow", "--json")
    assert followed.returncode == 1  # failed is where a follow ends, unsuccessfully
    assert json.loads(followed.stdout.splitlines()[-1])["status"] == "failed"

    listed = await _tidings(url, "campaign", "recipients", cid, "--state", "uncertain", "--csv")
    assert listed.returncode == 0, listed.stderr
    rows = list(csv.DictReader(io.StringIO(listed.stdout)))
    assert rows
    assert {row["state"] for row in rows} == {"uncertain"}
    for row in rows:
        (held,) = server.store.find(message_id=row["message_id"])
        assert held.address == row["address"]
    as_json = await _tidings(url, "campaign", "recipients", cid, "--state", "uncertain", "--json")
    assert [json.loads(text)["id"] for text in as_json.stdout.splitlines()] == [
        int(row["id"]) for row in rows
    ]

    refused = await _tidings(url, "campaign", "retry", cid)
    assert refused.returncode == 1
    assert "reconcile" in refused.stderr
    assert "Traceback" not in refused.stderr
    async with container.db.read() as conn:
        (batch_id,) = (
            await conn.execute(
                select(campaign_batches.c.id).where(
                    campaign_batches.c.campaign_id == campaign_id,
                    campaign_batches.c.status == "submitting",
                )
            )
        ).scalars()
    unconfirmed = await _tidings(
        url, "campaign", "resend", cid, "--state", "uncertain", "--note", "x"
    )
    assert unconfirmed.returncode == 1
    assert "--yes" in unconfirmed.stderr
    decided = await _tidings(
        url,
        "campaign",
        "reconcile",
        cid,
        "--batch",
        str(batch_id),
        "--as",
        "submitted",
        "--note",
        "all found in the provider's log",
    )
    assert decided.returncode == 0, decided.stderr
    assert f"Batch {batch_id} reconciled as submitted" in decided.stdout
    async with container.db.read() as conn:
        (audit,) = await interventions.list_for(conn, campaign_id)
    assert (audit.actor, audit.note) == (
        f"cli:{getpass.getuser()}",
        "all found in the provider's log",
    )

    async with running(container, registry(container)):
        assert await wait_for_campaign_status(container, campaign_id) == "submitted"
    done = await _tidings(url, "campaign", "status", cid, "--follow")
    assert done.returncode == 0, done.stderr
    assert f"campaign {cid}: submitted, 100/100 processed" in done.stdout
