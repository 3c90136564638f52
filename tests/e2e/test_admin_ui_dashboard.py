"""The dashboard tells an operator how the audience grew and whether the queue needs them, and
the jobs page lets them replay what died (UI-1)."""

import dataclasses
import io
from datetime import UTC, datetime, timedelta

from tests.factories import make_settings
from tests.support.admin_ui import signed_in, ui_app
from tests.support.clock import Clock
from tests.support.queue_policy import policy
from tidings.audience.newsletters import NewsletterFields
from tidings.campaigns.listing import send_started
from tidings.domain.jobs import GiveUp, JobStatus
from tidings.queue.job import Job
from tidings.queue.policy import HandlerRegistry
from tidings.queue.worker import Worker
from tidings.storage.sending.campaign_sends import SendRow
from tidings.ui.campaign_sends import duration_words, eta_words
from tidings.ui.chart import line_chart, nice_ceiling


def _people(first: int, count: int) -> str:
    rows = "".join(f"p{n}@example.org,confirmed\n" for n in range(first, first + count))
    return "email,status\n" + rows


async def test_growth_chart_counts_confirmations_per_day_over_30_days(database_url: str) -> None:
    """Growth is read at a glance: confirmations older than 30 days must not count, recent
    ones must, whatever the database server's time zone."""
    clock = Clock()
    async with ui_app(make_settings(database_url), clock=clock) as (browser, container):
        await container.newsletters.create(
            NewsletterFields(
                slug="weekly",
                name="Weekly Notes",
                sender_name="The Editors",
                sender_address="editors@example.org",
            )
        )

        async def import_people(first: int, count: int) -> None:
            lines = io.StringIO(_people(first, count), newline="")
            await container.importer.import_csv(lines, newsletter_slug="weekly", actor="tests")

        await import_people(0, 4)  # 45 days before "now": out of the chart
        clock.advance(timedelta(days=40))
        await import_people(4, 3)
        clock.advance(timedelta(days=5))
        await import_people(7, 2)
        client = browser()
        await signed_in(client, container)
        growth = await container.audience_stats.growth(days=30)
        assert [day.confirmed for day in growth if day.confirmed] == [3, 2]
        assert growth[-1].day == clock.now.date()
        page = await client.get("/admin")
        assert "5 confirmations over 30 days, at most 3 in one day" in page.text
        assert '<td class="num">9</td>' in page.text  # all nine are confirmed


async def test_the_favicon_is_served_to_every_page_without_a_session(sqlite_url: str) -> None:
    """Browsers ask for /favicon.ico on every page, the sign-in and reader pages included: a
    404 there is noise in every log and a blank tab among the operator's others."""
    settings = make_settings(sqlite_url, theme={"accent_color": "#0a5c36"})
    async with ui_app(settings) as (browser, _container):
        client = browser()
        for path in ("/favicon.ico", "/admin/favicon.svg"):
            icon = await client.get(path)
            assert icon.status_code == 200
            assert icon.headers["content-type"] == "image/svg+xml"
            assert 'fill="#0a5c36"' in icon.text  # the site's accent
        sign_in_page = await client.get("/admin/sign-in")
        assert '<link rel="icon" href="/admin/favicon.svg" type="image/svg+xml">' in (
            sign_in_page.text
        )


async def test_dead_jobs_raise_a_banner_and_can_be_replayed(database_url: str) -> None:
    """A job that died silently is mail or a webhook that never went: it must be shouted
    about on the first page and be one click from running again."""
    async with ui_app(make_settings(database_url)) as (browser, container):
        client = browser()
        csrf = await signed_in(client, container)
        assert "failed for good" not in (await client.get("/admin")).text
        async with container.db.write() as conn:
            doomed, _ = await container.queue.enqueue(conn, "doomed", "doomed-1", {})

        async def give_up(job: Job) -> None:
            raise GiveUp("provider_rejected")

        registry = HandlerRegistry()
        registry.register("doomed", give_up)
        worker = Worker(container.db, registry, policy(), container.clock)
        await worker.claim_round()
        await worker.drain(5)
        dashboard = await client.get("/admin")
        assert "1 job failed for good" in dashboard.text
        jobs_page = await client.get("/admin/jobs")
        assert "provider_rejected" in jobs_page.text
        replayed = await client.post(f"/admin/jobs/{doomed.id}/replay", data={"csrf_token": csrf})
        assert replayed.status_code == 303
        job, _ = await container.queue.get(doomed.id)
        assert job.status is JobStatus.PENDING
        assert "failed for good" not in (await client.get("/admin")).text


def test_line_chart_scales_from_zero_to_a_round_number_above_the_peak() -> None:
    """The chart's geometry is what the operator reads: zero on the axis, the line using the
    height up to a round top value the labels can state, whatever the data's size."""
    chart = line_chart(["a", "b", "c"], [0, 4, 2], what="signups")
    points = [tuple(map(float, point.split(","))) for point in chart.points.split()]
    assert [x for x, _ in points] == [0.0, 300.0, 600.0]
    assert [y for _, y in points] == [158.0, 2.0, 80.0]
    assert (chart.peak, chart.middle) == (4, "2")
    assert (chart.first_label, chart.middle_label, chart.last_label) == ("a", "b", "c")
    assert chart.summary == "6 signups over 3 days, at most 4 in one day"
    assert line_chart([], [], what="signups").summary == "no signups"
    assert [nice_ceiling(n) for n in (0, 1, 3, 7, 9, 11, 45, 100, 1234)] == [
        1, 1, 4, 8, 10, 20, 50, 100, 2000,
    ]  # fmt: skip
    assert line_chart(["a", "b"], [0, 3000], what="signups").peak == 4000


def test_eta_reads_as_an_operator_would_say_it() -> None:
    """The send page's time left must be plain words, and honest before there is an estimate."""
    assert eta_words(None) == "estimating…"
    assert eta_words(0) == "about 0 s"
    assert eta_words(59) == "about 59 s"
    assert eta_words(150) == "about 2 min"
    assert eta_words(3600 + 30 * 60) == "about 1 h 30 min"


def test_a_sends_duration_and_start_read_as_an_operator_would_say_them() -> None:
    """A sent campaign's page says how long it took in plain words, and a scheduled send
    started when it was due, not when someone pressed Schedule."""
    start = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)
    assert duration_words(start, None) == "—"
    assert duration_words(start, start + timedelta(seconds=42)) == "42 s"
    assert duration_words(start, start + timedelta(seconds=125)) == "2 min 5 s"
    assert duration_words(start, start + timedelta(hours=1, minutes=3, seconds=9)) == "1 h 3 min"
    due = start + timedelta(days=2)

    def row(attempt_started_at: datetime, candidates: int | None = 10) -> SendRow:
        fields = dict.fromkeys(f.name for f in dataclasses.fields(SendRow))
        fields.update(
            campaign_id=1,
            attempt=1,
            attempt_started_at=attempt_started_at,
            preflight_email_count=10,
            candidate_count=candidates,
            created_at=start,
            updated_at=start,
        )
        return SendRow(**fields)  # type: ignore[arg-type]

    assert send_started("submitted", row(due), due) == due  # rewritten when it went out
    assert send_started("submitted", row(start), due) == due  # a row from before that rule
    assert send_started("submitted", row(due), start) == due  # a retry after the due time
    assert send_started("submitted", row(start), None) == start
    assert send_started("scheduled", row(start), due) is None  # not gone out yet
    assert send_started("draft", row(start), None) is None  # unscheduled
    assert send_started("cancelled", row(start, candidates=None), due) is None  # called off
    assert send_started("cancelled", row(start), None) == start  # cancelled mid-send
    assert send_started("draft", None, None) is None
