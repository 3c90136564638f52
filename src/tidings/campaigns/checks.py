"""Checks before sending (CMP-8): every segment the campaign renders, as it would go out, and
its audience as it stands now. Shown on the editor page, on the send confirmation, by
`tidings campaign check` and `GET /api/admin/campaigns/{id}/checks`. Warnings only."""

from __future__ import annotations

from collections.abc import Callable

from tidings.campaigns.drafts import CampaignContext, CampaignDraft, CampaignDrafts
from tidings.domain.ab_tests import letter
from tidings.domain.presend import (
    CheckCode,
    CheckReport,
    Finding,
    header_findings,
    lacking_finding,
    merged,
    size_finding,
)
from tidings.rendering import CampaignContent
from tidings.rendering.checks import MissingFallback, content_findings, unsubscribe_finding
from tidings.rendering.theme import DEFAULT_THEME
from tidings.rendering.tracking import tracking_signer
from tidings.storage.sending import candidates as candidate_queries


class PresendChecks:
    def __init__(
        self, context: CampaignContext, drafts: CampaignDrafts, secret: Callable[[], str]
    ) -> None:
        self._ctx = context
        self._drafts = drafts
        self._secret = secret

    async def check(self, campaign_id: int) -> CheckReport:
        """The campaign's warnings, whole-campaign ones first, then its segments' (one warning
        for what several segments share). NotFound for an unknown id."""
        draft = await self._drafts.get(campaign_id)
        found = [*self._headers(draft), *self._identity(draft)]
        missing: dict[MissingFallback, list[str]] = {}
        for segment in draft.segments:
            found.extend(self._segment(draft, segment, missing))
        found.extend(await self._lacking(draft, missing))
        return CheckReport(campaign_id, tuple(merged(found)))

    def _headers(self, draft: CampaignDraft) -> list[Finding]:
        campaign = draft.campaign
        found = header_findings(campaign.subject, campaign.preheader)
        ab = draft.ab
        if ab is not None and ab.test.field.value in ("subject", "preheader"):
            for number in range(2, ab.test.variant_count + 1):
                value = ab.test.value(number, None) or ""
                subject, preheader = (
                    (value, "") if ab.test.field.value == "subject" else ("", value)
                )
                found.extend(header_findings(subject, preheader, variant=letter(number)))
        return found

    def _identity(self, draft: CampaignDraft) -> list[Finding]:
        address = self._ctx.theme.postal_address.strip()
        if address and address != DEFAULT_THEME.postal_address:
            return []
        return [
            Finding(
                CheckCode.NO_POSTAL_ADDRESS,
                "The footer shows no real postal address (theme.postal_address is "
                f"{'empty' if not address else 'the placeholder'}): CAN-SPAM and most "
                "providers' terms ask for one, and real mail is refused until it is set.",
            )
        ]

    def _segment(
        self, draft: CampaignDraft, segment: str, missing: dict[MissingFallback, list[str]]
    ) -> list[Finding]:
        """The segment's version as it would go out (size, unsubscribe link) and as written
        (images, links); its merge tags without a fallback are added to `missing`."""
        campaign = draft.campaign
        domain = draft.newsletter.sender_address.rpartition("@")[2]
        # An undecided A/B test has no winner for the tier's remainder yet: its variant A
        # (the campaign's own values) stands for it.
        shown = segment if draft.ab is None or draft.ab.decided else f"{segment}-v1"
        rendering = self._drafts.render_for_send(
            draft, shown, domain, tracking_signer(self._secret())
        )
        found: list[Finding] = []
        clipped = size_finding(segment, len(rendering.html.encode("utf-8")))
        if clipped is not None:
            found.append(clipped)
        unsubscribe = unsubscribe_finding(rendering, segment)
        if unsubscribe is not None:
            found.append(unsubscribe)
        content = CampaignContent(
            subject=campaign.subject,
            preheader=campaign.preheader,
            body=campaign.body,
            body_format="html" if campaign.body_format == "html" else "markdown",
        )
        scanned, tags = content_findings(content, segment)
        for tag in tags:
            missing.setdefault(tag, []).append(segment)
        return [*found, *scanned]

    async def _lacking(
        self, draft: CampaignDraft, missing: dict[MissingFallback, list[str]]
    ) -> list[Finding]:
        """Each merge tag without a fallback, counted once over the audience of the segments
        that use it, as it stands now."""
        found: list[Finding] = []
        async with self._ctx.db.read() as conn:
            for tag, segments in missing.items():
                count = await candidate_queries.count_lacking(
                    conn,
                    draft.newsletter.id,
                    draft.audience,
                    segments=tuple(segments),
                    field=tag.field,
                    key=tag.key,
                    campaign_id=draft.campaign.id,
                    now=self._ctx.now(),
                )
                lacking = lacking_finding(tuple(segments), tag.tag, count)
                if lacking is not None:
                    found.append(lacking)
        return found
