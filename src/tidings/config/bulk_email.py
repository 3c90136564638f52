"""Settings for campaign sends: batches, concurrency, warming, rates and auto-pause."""

from __future__ import annotations

from datetime import timedelta

from pydantic import Field

from tidings.config.annotated import DomainRates, Duration, StrictPositiveInt
from tidings.config.base import Section


class BulkEmailSettings(Section):
    """How campaigns are prepared and submitted (SPEC §5.3-5.5)."""

    batch_size: int = Field(
        default=1000,
        ge=1,
        le=1000,
        description="Recipients per batch (a page of the audience); never above the provider's "
        "maximum.",
    )
    batch_creation_concurrency: StrictPositiveInt = Field(
        default=2,
        description="Pages of the audience turned into batches at once per campaign. A positive "
        "integer; raise it only after measuring database load.",
    )
    submission_concurrency: int = Field(
        default=8,
        ge=1,
        le=100,
        description="SMTP only: messages of one batch handed to the relay at once (bounded by "
        "smtp.pool_size connections).",
    )
    in_flight_chunk: int = Field(
        default=20,
        ge=1,
        le=1000,
        description="SMTP only: recipients marked in flight together before they are handed "
        "over. A worker killed mid-send leaves at most this many `uncertain` recipients per "
        "batch it held (never resent automatically).",
    )
    recipient_retries: int = Field(
        default=2,
        ge=0,
        le=10,
        description="SMTP only: extra tries, inside one batch attempt, for a recipient the relay "
        "deferred (4xx) before it is recorded as failed (transient).",
    )
    concurrency: int = Field(
        default=2,
        ge=1,
        le=100,
        description="Campaign batches one worker submits at once (every worker serving the "
        "campaign queue takes batches, so more workers add throughput).",
    )
    warming_domain: str | None = Field(
        default=None,
        pattern=r"^[A-Za-z0-9.-]+\.[A-Za-z]{2,}$",
        description="Optional sending domain being warmed up: pages go to it, in audience "
        "order, up to its daily capacity; the rest use the newsletter's own domain.",
    )
    warming_daily_capacity: int = Field(
        default=0,
        ge=0,
        description="Recipients the warming domain may take per UTC day (0 = none).",
    )
    send_rate_per_second: float = Field(
        default=0.0,
        ge=0,
        le=1_000_000,
        allow_inf_nan=False,
        description="Most messages per second sent through the provider, shared by all workers "
        "on all machines (kept in the database, so a restart does not burst); 0 = unlimited. "
        "A 429 from the provider pauses every worker for its Retry-After either way.",
    )

    auto_pause_hard_bounce_rate: float = Field(
        default=0.05,
        ge=0,
        le=1,
        allow_inf_nan=False,
        description="A sending campaign pauses itself (SND-24) when more than this fraction of "
        "its messages handed over hard-bounced, once `auto_pause_hard_bounce_sample` went "
        "out; 0 turns the check off. 0.05 = 5%.",
    )
    auto_pause_hard_bounce_sample: int = Field(
        default=500,
        ge=1,
        description="Messages handed over before the hard-bounce rate is judged.",
    )
    auto_pause_complaint_rate: float = Field(
        default=0.001,
        ge=0,
        le=1,
        allow_inf_nan=False,
        description="A sending campaign pauses itself when more than this fraction of its "
        "messages handed over drew a spam complaint, once `auto_pause_complaint_sample` went "
        "out; 0 turns the check off. 0.001 = 0.1% (Gmail and Yahoo ask bulk senders to stay "
        "under 0.3%).",
    )
    auto_pause_complaint_sample: int = Field(
        default=1000,
        ge=1,
        description="Messages handed over before the complaint rate is judged.",
    )
    domain_rates: DomainRates = Field(
        default_factory=dict,
        description="Most messages per minute to each recipient domain, shared by all workers "
        "(SND-25): `gmail.com=600,example.net=300` in the environment, or a TOML table. "
        "Empty (the default): no per-domain limit. A 421/451 naming a domain halves its rate "
        "for `domain_rate_cool_down_seconds`.",
    )
    domain_rate_cool_down_seconds: float = Field(
        default=300.0,
        ge=1,
        le=86_400,
        allow_inf_nan=False,
        description="How long a domain's rate stays halved after a 421/451; each further "
        "deferral halves it again (to 1/16 at most), and each cool-down without one doubles it "
        "back.",
    )

    resume_max_age: Duration = Field(
        default=timedelta(hours=24),
        gt=timedelta(0),
        le=timedelta(days=30),
        description="An interrupted send (workers stopped or its jobs died) younger than this "
        "is resumed when a worker starts and by the sweep; an older one is logged "
        "(`campaign.send_not_resumed`) and left for an operator, so readers never get a stale "
        "issue days late. Age counts from the send (or its schedule time). `24h`, `90m`, "
        "`2d`, a number of seconds, or ISO 8601 (`PT24H`).",
    )
    stored_statistics_above: int = Field(
        default=100_000,
        ge=0,
        le=1_000_000_000,
        description="A campaign of more recipients has its delivery statistics counted by the "
        "workers in the background and its page reads the stored count (saying when it was "
        "taken); smaller campaigns are counted each time they are shown. 0 stores every "
        "campaign's.",
    )
    statistics_interval_seconds: float = Field(
        default=15.0,
        ge=0.1,
        le=86_400,
        description="How often the workers count a large campaign's statistics again while it "
        "is sending or finished less than 14 days ago (at least a hundred times the last "
        "count's time, so counting takes at most 1% of the database's time per campaign); "
        "older campaigns once a day.",
    )
    sweep_interval_seconds: float = Field(
        default=300.0,
        ge=1,
        le=86_400,
        description="How often each worker looks for sends left `pending` or `submitting` with "
        "no live job and hands them back to the send handler (it also looks once at start).",
    )
