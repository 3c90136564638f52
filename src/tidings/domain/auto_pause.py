"""Auto-pause (SPEC SND-24): when a sending campaign's hard bounces or complaints pass a
threshold after a minimum sample, it pauses itself. Pure: the figures are passed in.

The sample is the campaign's messages handed over (`sent`), the mailbox providers' own
denominator (Gmail's and Yahoo's spam rate is complaints over mail delivered): every provider
knows it, where deliveries are only reported by some (an SMTP relay reports bounces alone, so
a rate over *reported* outcomes would read 100% there). Bounces and complaints trail their
hand-over by seconds to days, so the rate seen while sending is a lower bound; the thresholds
are set with that in mind.

After an operator resumes an auto-paused send, the thresholds apply to what happens since
(`since(baseline)`), so the resume does not re-trip on the figures that caused the pause, and
a second run of bad addresses pauses it again once a fresh minimum sample has gone out.
"""

from __future__ import annotations

from dataclasses import dataclass

REASON_LENGTH = 200  # campaign_feedback_counts.auto_pause_reason


@dataclass(frozen=True, slots=True)
class AutoPausePolicy:
    """Thresholds as fractions (0.05 = 5%), each after its minimum sample; a rate of 0 turns
    that measure off."""

    hard_bounce_rate: float = 0.05
    hard_bounce_sample: int = 500
    complaint_rate: float = 0.001
    complaint_sample: int = 1000

    def __post_init__(self) -> None:
        for rate in (self.hard_bounce_rate, self.complaint_rate):
            if not 0 <= rate <= 1:
                raise ValueError("an auto-pause rate is a fraction from 0 to 1")
        if self.hard_bounce_sample < 1 or self.complaint_sample < 1:
            raise ValueError("an auto-pause sample is at least 1 message")

    @property
    def enabled(self) -> bool:
        return self.hard_bounce_rate > 0 or self.complaint_rate > 0


@dataclass(frozen=True, slots=True)
class FeedbackTally:
    """A campaign's figures: messages handed over, and recipients hard-bounced or complaining
    (each counted once)."""

    sent: int
    hard_bounced: int
    complained: int

    def since(self, baseline: FeedbackTally) -> FeedbackTally:
        """The figures after `baseline` (never below zero)."""
        return FeedbackTally(
            sent=max(0, self.sent - baseline.sent),
            hard_bounced=max(0, self.hard_bounced - baseline.hard_bounced),
            complained=max(0, self.complained - baseline.complained),
        )


def auto_pause_reason(tally: FeedbackTally, policy: AutoPausePolicy) -> str | None:
    """Why the campaign must pause now, or None. A rate is over its threshold only once the
    sample is reached: 3 bounces of the first 10 messages are noise, 30 of 500 are not."""
    checks = (
        ("hard bounces", tally.hard_bounced, policy.hard_bounce_rate, policy.hard_bounce_sample),
        ("complaints", tally.complained, policy.complaint_rate, policy.complaint_sample),
    )
    for what, count, threshold, sample in checks:
        if threshold <= 0 or tally.sent < sample:
            continue
        if count > threshold * tally.sent:
            reason = (
                f"{what} {count} of {tally.sent} sent ({_percent(count / tally.sent)}), "
                f"over the {_percent(threshold)} threshold"
            )
            return reason[:REASON_LENGTH]
    return None


def _percent(fraction: float) -> str:
    return f"{fraction * 100:.2f}%".replace(".00%", "%")
