"""Settings for open and click tracking (SPEC ENG-1..6): how machine hits are told apart, how
hits are taken in, and how long a person's hits are kept."""

from __future__ import annotations

from pydantic import Field

from tidings.config.base import Section


class TrackingSettings(Section):
    """Engagement: opens and clicks (SPEC §5.9). Whether a newsletter tracks at all is its own
    `tracking` mode (`tidings newsletters tracking SLUG MODE`); these keys tune how."""

    machine_window_seconds: float = Field(
        default=10.0,
        ge=0,
        le=3600,
        description="A hit this soon after its message was handed to the provider is taken as "
        "a machine's (security scanners and link checkers fetch on arrival; people rarely read "
        "that fast). 0 turns the rule off.",
    )
    burst_window_seconds: float = Field(
        default=1.0,
        gt=0,
        le=60,
        description="Clicks on several different links of one message within this many seconds "
        "are a link checker's, not a person's.",
    )
    burst_links: int = Field(
        default=3,
        ge=2,
        le=100,
        description="How many different links of one message clicked within "
        "`burst_window_seconds` make a burst (a message with fewer links: all of them).",
    )
    source_hits_per_minute: int = Field(
        default=600,
        ge=10,
        le=1_000_000,
        description="Hits per minute from one network source (an address's /24 or /48, never "
        "stored) above which its further hits are counted as a machine's (`flood`), so a flood "
        "never hides real readers' hits; redirects keep working.",
    )
    commit_interval_ms: float = Field(
        default=5.0,
        gt=0,
        le=1000,
        description="Group commit: hits arriving within this many milliseconds are written "
        "in one INSERT before their answers go out.",
    )
    apply_batch: int = Field(
        default=5000,
        ge=10,
        le=100_000,
        description="Hits the `apply_engagement` job folds into the counters per transaction.",
    )
    retention_days: float = Field(
        default=395.0,
        gt=0,
        le=3650,
        description="A consented person's own hits are kept this long, then deleted; the "
        "campaign's counters already hold them, so no figure changes (ENG-6).",
    )
    sunset_interval_seconds: float = Field(
        default=3600.0,
        gt=0,
        le=86400,
        description="How often the workers run the sunset policy (ENG-7) over the newsletters "
        "that have it on: ask people who stopped reading, unsubscribe those who did not answer.",
    )
    sunset_batch: int = Field(
        default=1000,
        ge=1,
        le=100_000,
        description="Subscriptions the sunset policy examines, and requests it closes, per "
        "newsletter per run: bounded work, the whole list covered over successive runs.",
    )
