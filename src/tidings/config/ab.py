"""Settings for A/B tests (SPEC ENG-8): how sure the test must be before a variant beats the
operator's default."""

from __future__ import annotations

from pydantic import Field

from tidings.config.base import Section


class AbSettings(Section):
    """A/B tests of a campaign's subject, preheader or sender name. The test itself (variants,
    share, wait, metric) is the campaign's own (`tidings campaign create --variant-subject`)."""

    confidence: float = Field(
        default=0.95,
        ge=0.5,
        le=0.9999,
        description="How sure a two-proportion z-test must be that a variant beats the "
        "default (variant A) before it wins: a variant wins when its p-value is below "
        "(1 - confidence) / the number of alternatives. When none clears it, A is sent to the "
        "rest and the result says so.",
    )
