"""A/B tests end to end (ENG-8), on both databases: a real send to the SMTP sink in which the
test share gets the variants, the remainder waits for the decision and then gets the winner
(or the default when nothing is significant, or the operator's pick), and every recipient is
accounted for exactly once across variants and the remainder."""

from __future__ import annotations

import json
import signal
from collections import Counter
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from email import message_from_bytes
from email.policy import default
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import select, update

from tests.e2e.audience_helpers import create_newsletter
from tests.factories import admin_headers, api_client, make_settings
from tests.support.cli import clean_env, tidings
from tests.support.engagement_rows import Counted, add_counters
from tests.support.processes import worker_env, worker_process
from tests.support.sending import (
    FAST_QUEUE,
    create_campaign,
    mailed_at_least,
    recipient_states,
    registry,
    running,
    seed,
    sink_settings,
    wait_for_campaign_status,
    wait_for_send_status,
    workers,
)
from tests.support.waiting import wait_for
from tidings.bootstrap import Container, utcnow
from tidings.campaigns.jobs.payloads import SEND_CAMPAIGN
from tidings.campaigns.verification import check_ab_accounting
from tidings.devservers.sink import Faults, SmtpSink
from tidings.domain.ab_tests import assignment_key, split_segment, variant_of
from tidings.domain.sending import VerificationFailed
from tidings.storage.tables import (
    audit_log,
    campaign_batches,
    campaign_recipients,
    jobs,
    newsletters,
    subscribers,
)

READERS = 120
SUBJECTS = {1: "Plain subject", 2: "Bold subject"}
AB_TEST = {"alternatives": [SUBJECTS[2]], "test_share": 50, "test_wait": "1h"}


@asynccontextmanager
async def _studio(
    database_url: str, *, tracking: str = "aggregate"
) -> AsyncIterator[tuple[httpx.AsyncClient, Container, dict[str, str], SmtpSink]]:
    async with SmtpSink(clock=utcnow, port=0) as sink:
        settings = sink_settings(database_url, sink)
        async with api_client(settings) as (client, container):
            headers = await admin_headers(container)
            await create_newsletter(client, headers, tracking=tracking)
            await seed(container, "weekly", READERS)
            yield client, container, headers, sink


async def _start(client: httpx.AsyncClient, headers: dict[str, str]) -> int:
    campaign_id = await create_campaign(client, headers, subject=SUBJECTS[1], ab_test=AB_TEST)
    sent = await client.post(f"/api/admin/campaigns/{campaign_id}/send", headers=headers)
    assert sent.status_code == 202, sent.text
    return campaign_id


async def _segments(container: Container, campaign_id: int) -> dict[str, str]:
    """Each recipient's address -> the segment of the batch it is in."""
    query = (
        select(subscribers.c.email, campaign_batches.c.segment)
        .select_from(
            campaign_recipients.join(
                campaign_batches, campaign_batches.c.id == campaign_recipients.c.batch_id
            ).join(subscribers, subscribers.c.id == campaign_recipients.c.subscriber_id)
        )
        .where(campaign_recipients.c.campaign_id == campaign_id)
    )
    async with container.db.read() as conn:
        return {str(email): str(segment) for email, segment in await conn.execute(query)}


async def _test_share_sent(container: Container, campaign_id: int, sink: SmtpSink) -> int:
    """Wait until the test is dispatched (preparation over), then until every test batch is
    submitted and its mail arrived; returns their recipients."""

    async def testing() -> bool:
        summary = await container.ab_tests.summary(campaign_id)
        return summary is not None and summary["state"] == "testing"

    await wait_for(testing, message="the test never started")
    segments = await _segments(container, campaign_id)
    tested = sum(1 for segment in segments.values() if split_segment(segment)[1] is not None)

    async def arrived() -> bool:
        async with container.db.read() as conn:
            query = select(campaign_batches.c.segment, campaign_batches.c.status).where(
                campaign_batches.c.campaign_id == campaign_id
            )
            statuses = [(str(s), str(status)) for s, status in await conn.execute(query)]
        done = all(
            status == "submitted" for s, status in statuses if split_segment(s)[1] is not None
        )
        return done and len(sink.messages) >= tested

    await wait_for(arrived, message="the test share was never sent")
    return tested


def _subjects(sink: SmtpSink) -> dict[str, str]:
    """Address -> the subject it received (each address once: checked by the caller)."""
    found: dict[str, str] = {}
    for message in sink.messages:
        parsed = message_from_bytes(message.data, policy=default)
        for address in message.recipients:
            found[address] = str(parsed["Subject"])
    return found


async def _decide_now(container: Container) -> None:
    """The end of the wait, brought forward: the decision job is made due (the clock is the
    world outside; the job, its handler and the workers are the real ones)."""
    async with container.db.write() as conn:
        await conn.execute(
            update(jobs).where(jobs.c.kind == "decide_ab_test").values(run_at=container.clock())
        )


async def _clicks(container: Container, campaign_id: int, a: int, b: int) -> None:
    """People's unique clicks per variant, as the engagement applier leaves them."""
    async with container.db.write() as conn:
        await add_counters(
            conn,
            campaign_id,
            Counted("free-v1", 0, "click", a, a, 3),
            Counted("free-v2", 0, "click", b, b, 3),
        )


async def _delivered(container: Container, campaign_id: int, segment: str) -> int:
    """Deliveries reported for the recipients of one segment's batches (as a provider's
    events would record them); how many."""
    batches = select(campaign_batches.c.id).where(
        campaign_batches.c.campaign_id == campaign_id, campaign_batches.c.segment == segment
    )
    async with container.db.write() as conn:
        result = await conn.execute(
            update(campaign_recipients)
            .where(campaign_recipients.c.batch_id.in_(batches))
            .values(delivered_at=container.clock())
        )
    return int(result.rowcount)


def _check_everyone_once(sink: SmtpSink, segments: dict[str, str], winner: int) -> None:
    """Everyone mailed once; a test recipient got their variant's subject, the rest the
    winner's."""
    counted = Counter(address for message in sink.messages for address in message.recipients)
    assert set(counted) == set(segments)
    assert max(counted.values()) == 1
    subjects = _subjects(sink)
    for address, segment in segments.items():
        variant = split_segment(segment)[1]
        assert subjects[address] == SUBJECTS[variant or winner], (address, segment)


@pytest.mark.parametrize(
    ("clicks_a", "clicks_b", "winner", "significant"),
    [(1, 24, 2, True), (5, 7, 1, False)],
    ids=["b-clears-the-bar", "nothing-clears-the-bar"],
)
async def test_the_remainder_waits_for_the_decision_then_gets_the_winner(
    database_url: str, clicks_a: int, clicks_b: int, winner: int, significant: bool
) -> None:
    """ENG-8's whole promise: only the test share is mailed until the wait ends; then the
    winner goes to the rest — the variant when its clicks clear the confidence, otherwise
    the operator's default, and the recorded result says which and why."""
    async with _studio(database_url) as (client, container, headers, sink):
        campaign_id = await _start(client, headers)
        async with workers(container):
            tested = await _test_share_sent(container, campaign_id, sink)
            shown = await client.get(f"/api/admin/campaigns/{campaign_id}/ab", headers=headers)
            assert shown.json()["state"] == "testing"
            assert 0 < tested < READERS
            assert len(sink.messages) == tested
            await _clicks(container, campaign_id, clicks_a, clicks_b)
            delivered_b = await _delivered(container, campaign_id, "free-v2")
            await _decide_now(container)
            assert await wait_for_campaign_status(container, campaign_id) == "submitted"
        segments = await _segments(container, campaign_id)
        stats = await client.get(f"/api/admin/campaigns/{campaign_id}/stats", headers=headers)
    _check_everyone_once(sink, segments, winner)
    assert delivered_b > 0
    ab = stats.json()["ab"]
    assert (ab["state"], ab["winner"], ab["decided_by"]) == (
        "decided",
        "AB"[winner - 1],
        "automatic",
    )
    assert ab["significant"] is significant
    a, b = ab["figures"]["variants"]
    assert (a["value"], b["value"]) == (SUBJECTS[1], SUBJECTS[2])
    assert (a["human_unique_clicks"], b["human_unique_clicks"]) == (clicks_a, clicks_b)
    assert (a["delivered"], b["delivered"]) == (0, delivered_b)  # as reported by the decision
    assert a["sent"] + b["sent"] == tested
    assert b["z"] is not None
    assert b["p"] is not None
    counted = ab["accounting"]
    assert counted["total"] == READERS
    assert counted["variants"]["A"] + counted["variants"]["B"] == tested


async def test_a_paused_test_waits_for_resume_without_polling(database_url: str) -> None:
    """Paused while the test share is unsent, a decision job that comes due ends instead of
    deferring every second for as long as the pause lasts (hours, maybe); it neither decides
    nor releases anyone. Resuming makes it due again: the test share goes, the decision is
    made, the remainder gets the winner and everyone is mailed once."""
    async with _studio(database_url) as (client, container, headers, sink):
        campaign_id = await _start(client, headers)
        async with running(container, registry(container, kinds=(SEND_CAMPAIGN,))):

            async def testing() -> bool:
                summary = await container.ab_tests.summary(campaign_id)
                return summary is not None and summary["state"] == "testing"

            await wait_for(testing, message="the test never started")
        paused = await client.post(f"/api/admin/campaigns/{campaign_id}/pause", headers=headers)
        assert paused.status_code == 200, paused.text
        await _decide_now(container)

        async def decide_job() -> tuple[str, int]:
            async with container.db.read() as conn:
                query = select(jobs.c.status, jobs.c.attempts).where(
                    jobs.c.kind == "decide_ab_test"
                )
                status, attempts = (await conn.execute(query)).one()
            return str(status), int(attempts)

        async with workers(container):

            async def ended() -> bool:
                return (await decide_job())[0] == "done"

            await wait_for(ended, message="the decision job kept polling the paused send")
        assert len(sink.messages) == 0
        shown = await client.get(f"/api/admin/campaigns/{campaign_id}/ab", headers=headers)
        assert shown.json()["state"] == "testing"
        resumed = await client.post(f"/api/admin/campaigns/{campaign_id}/resume", headers=headers)
        assert resumed.status_code == 202, resumed.text
        async with workers(container):
            await _test_share_sent(container, campaign_id, sink)
            await _decide_now(container)  # resuming made it due at the wait's end again
            assert await wait_for_campaign_status(container, campaign_id) == "submitted"
        segments = await _segments(container, campaign_id)
        decided = await client.get(f"/api/admin/campaigns/{campaign_id}/ab", headers=headers)
    _check_everyone_once(sink, segments, winner=1)  # no clicks: A, the default, wins
    assert (decided.json()["state"], decided.json()["winner"]) == ("decided", "A")


async def test_the_operator_picks_a_winner_early_and_the_job_later_changes_nothing(
    database_url: str,
) -> None:
    """A manual pick releases the remainder at once, is audited, and is final: a second pick
    is refused and the decision job, when its time comes, neither re-decides nor mails
    anyone twice (deciding is idempotent)."""
    async with _studio(database_url) as (client, container, headers, sink):
        campaign_id = await _start(client, headers)
        async with workers(container):
            await _test_share_sent(container, campaign_id, sink)
            picked = await client.post(
                f"/api/admin/campaigns/{campaign_id}/ab/winner",
                json={"variant": "b"},
                headers=headers,
            )
            assert picked.status_code == 200, picked.text
            assert await wait_for_campaign_status(container, campaign_id) == "submitted"
            again = await client.post(
                f"/api/admin/campaigns/{campaign_id}/ab/winner",
                json={"variant": "A"},
                headers=headers,
            )
            assert again.status_code == 409, again.text
            await _clicks(container, campaign_id, 30, 0)  # would make A win, were it asked
            await _decide_now(container)

            async def job_done() -> bool:
                async with container.db.read() as conn:
                    query = select(jobs.c.status).where(jobs.c.kind == "decide_ab_test")
                    return (await conn.execute(query)).scalar_one() == "done"

            await wait_for(job_done, message="the decision job never ran")
        segments = await _segments(container, campaign_id)
        shown = (await client.get(f"/api/admin/campaigns/{campaign_id}/ab", headers=headers)).json()
        async with container.db.read() as conn:
            audited = (
                await conn.execute(
                    select(audit_log.c.action, audit_log.c.target, audit_log.c.detail).where(
                        audit_log.c.action == "campaign.ab_winner_picked"
                    )
                )
            ).all()
    _check_everyone_once(sink, segments, winner=2)
    assert (shown["winner"], shown["decided_by"]) == ("B", "operator")
    assert [(row.target, row.detail) for row in audited] == [
        (f"campaign:{campaign_id}", {"variant": "B"})
    ]


async def test_assignment_is_the_keyed_hash_and_the_accounting_is_verified(
    database_url: str,
) -> None:
    """The SQL selection assigns exactly what the keyed hash says (so a re-preparation can
    only reproduce it), and the verification that guards preparation and every resume
    refuses batches that do not add up: variants + remainder = candidates - exclusions."""
    async with _studio(database_url) as (client, container, headers, _sink):
        campaign_id = await _start(client, headers)
        async with running(container, registry(container, kinds=(SEND_CAMPAIGN,))):
            await wait_for_send_status(container, campaign_id, "submitting")
        key = assignment_key(container.site_secret(), campaign_id)
        async with container.db.read() as conn:
            rows = await conn.execute(
                select(campaign_recipients.c.subscriber_id, campaign_batches.c.segment).join(
                    campaign_batches, campaign_batches.c.id == campaign_recipients.c.batch_id
                )
            )
            for subscriber_id, segment in rows:
                expected = variant_of(key.bucket(int(subscriber_id)), 50, 2)
                assert split_segment(str(segment))[1] == expected
        async with container.db.write() as conn:
            counted = await check_ab_accounting(conn, campaign_id, READERS, 0)
            assert counted is not None
            assert counted.total == READERS
            with pytest.raises(VerificationFailed) as short:
                await check_ab_accounting(conn, campaign_id, READERS + 1, 0)
            assert short.value.reason == "ab_variant_totals"
            await conn.execute(
                update(campaign_batches)
                .where(campaign_batches.c.segment == "free-v2")
                .values(segment="free-v3")
            )
            with pytest.raises(VerificationFailed) as unknown:
                await check_ab_accounting(conn, campaign_id, READERS, 0)
            assert unknown.value.reason == "ab_unknown_variant"
            await conn.rollback()


async def test_an_ab_test_on_a_newsletter_that_does_not_track_is_refused(
    database_url: str,
) -> None:
    """Without opens and clicks there is nothing to decide by: refused when the draft is
    saved, naming the newsletter's tracking field, never discovered after the wait."""
    async with _studio(database_url, tracking="off") as (client, _container, headers, _sink):
        response = await client.post(
            "/api/admin/campaigns",
            json={"newsletter": "weekly", "subject": "S", "body": "Hi.", "ab_test": AB_TEST},
            headers=headers,
        )
    assert response.status_code == 422, response.text
    problem: dict[str, Any] = response.json()
    assert "tracking" in str(problem)
    assert "aggregate" in problem["detail"]


async def test_a_worker_killed_while_the_test_share_is_sending_reshuffles_nobody(
    database_url: str,
) -> None:
    """A crash mid-test must not move anyone between variants (their figures would mix) or
    mail anyone twice: a real `tidings worker` is SIGKILLed while the test batches go out,
    a new one finishes; the assignment seen at the kill is the final one, both equal the
    keyed hash, and the remainder waits for the decision and then gets A (no clicks)."""
    readers = 600
    async with SmtpSink(clock=utcnow, port=0) as sink:
        sink.faults = Faults(delay_seconds=0.002, delay_commands=frozenset({"DATA"}))
        settings = make_settings(database_url, queue=FAST_QUEUE)
        async with api_client(settings) as (client, container):
            headers = await admin_headers(container)
            await create_newsletter(client, headers, tracking="aggregate")
            await seed(container, "weekly", readers)
            campaign_id = await create_campaign(
                client,
                headers,
                subject=SUBJECTS[1],
                ab_test={**AB_TEST, "test_share": 60, "test_wait": "2s"},
            )
            sent = await client.post(f"/api/admin/campaigns/{campaign_id}/send", headers=headers)
            assert sent.status_code == 202, sent.text
            env = worker_env(container.settings.database.url, sink, BULK_EMAIL_BATCH_SIZE="40")
            async with worker_process(env) as process:
                await wait_for(lambda: mailed_at_least(sink, 60), message="no test mail")
                process.send_signal(signal.SIGKILL)
                await process.wait()
            at_kill = await _segments(container, campaign_id)
            assert len(sink.messages) < readers * 0.6, "the kill came after the test share"
            async with worker_process(env):
                status = await wait_for_campaign_status(container, campaign_id, within_seconds=90)
            assert status == "submitted"
            final = await _segments(container, campaign_id)
            states = await recipient_states(container, campaign_id)
            key = assignment_key(container.site_secret(), campaign_id)
            async with container.db.read() as conn:
                ids = {
                    str(email): int(sid)
                    for email, sid in await conn.execute(
                        select(subscribers.c.email, subscribers.c.id)
                    )
                }
    assert at_kill == final
    assert len(final) == readers
    for address, segment in final.items():
        assert split_segment(segment)[1] == variant_of(key.bucket(ids[address]), 60, 2)
    assert set(states) <= {"sent", "uncertain"}
    counted = Counter(address for message in sink.messages for address in message.recipients)
    assert max(counted.values()) == 1, "someone was mailed twice"
    subjects = _subjects(sink)
    for address, subject in subjects.items():
        assert subject == SUBJECTS[split_segment(final[address])[1] or 1]
    remainder = [a for a, s in final.items() if split_segment(s)[1] is None]
    assert remainder
    assert all(address in subjects for address in remainder)


async def test_the_cli_creates_shows_and_decides_a_test(database_url: str, tmp_path: Path) -> None:
    """The command line is a full client: `campaign create --variant-subject …` makes the
    test (a bad share refused, naming the option's field), `stats --json` carries `ab`, and
    `pick-winner` decides, once."""
    async with _studio(database_url) as (_client, container, _headers, _sink):
        env = clean_env(DATABASE_URL=container.settings.database.url)
        body = tmp_path / "issue.md"
        body.write_text("Hello.\n", encoding="utf-8")
        common = ("campaign", "create", "-n", "weekly", "-s", SUBJECTS[1], "--from-file", str(body))
        bad = tidings(*common, "--variant-subject", SUBJECTS[2], "--test-share", "0", env=env)
        assert bad.returncode != 0
        assert "test_share" in bad.output
        made = tidings(
            *common,
            "--variant-subject",
            SUBJECTS[2],
            "--test-share",
            "30",
            "--test-wait",
            "90m",
            "--test-metric",
            "opens",
            "--json",
            env=env,
        )
        assert made.returncode == 0, made.output
        campaign_id = json.loads(made.stdout)["id"]
        stats = tidings("campaign", "stats", str(campaign_id), "--json", env=env)
        assert stats.returncode == 0, stats.output
        ab = json.loads(stats.stdout)["ab"]
        assert (ab["field"], ab["metric"], ab["test_share"], ab["wait_seconds"]) == (
            "subject",
            "opens",
            30,
            5400,
        )
        assert ab["state"] == "not started"
        assert [v["value"] for v in ab["figures"]["variants"]] == [SUBJECTS[1], SUBJECTS[2]]
        picked = tidings("campaign", "pick-winner", str(campaign_id), "b", env=env)
        assert picked.returncode == 0, picked.output
        again = tidings("campaign", "pick-winner", str(campaign_id), "A", env=env)
        assert again.returncode != 0
        assert "decided already" in again.output
        shown = tidings("campaign", "stats", str(campaign_id), env=env)
    assert "winner B, picked by the operator" in shown.stdout


async def test_the_cli_edits_a_drafts_test(database_url: str, tmp_path: Path) -> None:
    """`campaign edit` changes a draft's test as `create` makes one: a setting alone keeps
    the variants, new variants replace them (keeping the settings), `--no-ab-test` removes
    the test; a setting for a campaign with no test, or `--no-ab-test` with options, is
    refused naming the option and changes nothing; create and edit show the test."""
    async with _studio(database_url) as (_client, container, _headers, _sink):
        env = clean_env(DATABASE_URL=container.settings.database.url)
        body = tmp_path / "issue.md"
        body.write_text("Hello.\n", encoding="utf-8")
        made = tidings(
            *("campaign", "create", "-n", "weekly", "-s", SUBJECTS[1], "--from-file", str(body)),
            *("--variant-subject", SUBJECTS[2]),
            env=env,
        )
        assert made.returncode == 0, made.output
        assert "A/B test of the subject: 2 variants" in made.stdout
        campaign_id = int(made.stdout.split()[1])

        def edit(*options: str) -> Any:
            return tidings("campaign", "edit", str(campaign_id), *options, env=env)

        def shown() -> Any:
            return json.loads(edit("--json").stdout)["ab_test"]

        assert edit("--test-share", "40", "--test-wait", "2h").returncode == 0
        assert shown() == {
            "field": "subject",
            "variants": [SUBJECTS[2]],
            "test_share": 40,
            "wait_seconds": 7200,
            "metric": "clicks",
        }
        replaced = edit("--variant-subject", "Third", "--variant-subject", "Fourth", "--json")
        assert replaced.returncode == 0, replaced.output
        assert json.loads(replaced.stdout)["ab_test"]["variants"] == ["Third", "Fourth"]
        assert json.loads(replaced.stdout)["ab_test"]["test_share"] == 40
        mixed = edit("--no-ab-test", "--test-share", "30")
        assert mixed.returncode != 0
        assert "no_ab_test" in mixed.output
        assert shown()["test_share"] == 40
        assert edit("--no-ab-test").returncode == 0
        assert shown() is None
        lonely = edit("--test-metric", "opens")
        assert lonely.returncode != 0
        assert "test_metric" in lonely.output
        assert "no A/B test to change" in lonely.output
        assert shown() is None


async def test_a_test_whose_newsletter_stopped_tracking_is_refused_at_send(
    database_url: str,
) -> None:
    """Tracking turned off after the draft was saved would leave the test blind (A would win
    on zeros): the send is refused, naming the field, and nothing starts."""
    async with _studio(database_url) as (client, container, headers, _sink):
        campaign_id = await create_campaign(client, headers, subject=SUBJECTS[1], ab_test=AB_TEST)
        async with container.db.write() as conn:
            await conn.execute(update(newsletters).values(tracking="off"))
        sent = await client.post(f"/api/admin/campaigns/{campaign_id}/send", headers=headers)
        draft = await container.campaigns.get(campaign_id)
    assert sent.status_code == 422, sent.text
    assert "tracking" in sent.json()["detail"]
    assert draft.campaign.status == "draft"
