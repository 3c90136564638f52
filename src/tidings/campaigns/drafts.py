"""Campaign drafts (CMP-1), preview and test send (CMP-5).

Everything that could make a send fail later is checked when the draft is saved: header-bound
fields (no CR/LF/NUL), the body's segment blocks and merge tags, and the audience filter.
"""

from __future__ import annotations

import dataclasses
import uuid
from dataclasses import dataclass
from typing import Any, Literal

import structlog

from tidings.campaigns.commands import DraftChanges, DraftFields
from tidings.domain import tokens
from tidings.domain.ab_tests import AbField, AbTest, split_segment
from tidings.domain.audience import normalise_email
from tidings.domain.clock import Clock, require_timezone
from tidings.domain.edits import Unset
from tidings.domain.email_headers import check_address, check_header_values
from tidings.domain.errors import Conflict, InvalidInput, NotFound, TidingsError
from tidings.domain.identity import NOT_CHECKED, SendingIdentity
from tidings.domain.segments import MAX_ENGAGEMENT_DAYS, TIERS, AudienceFilter, parse_filter
from tidings.domain.tracking import TrackingMode, TrackingSigner
from tidings.outbound.email_jobs import Mailer, RawEmail
from tidings.rendering import (
    CampaignContent,
    ListInfo,
    Preview,
    RecipientValues,
    SegmentRendering,
    Sender,
    TemplateEngine,
    Theme,
    check_content,
    preview,
    render_segment,
)
from tidings.rendering.archive import issue_url
from tidings.rendering.content import MAX_SUBJECT
from tidings.rendering.tracking import LinkTracking
from tidings.storage import ab_tests as ab_queries
from tidings.storage import campaigns as queries
from tidings.storage import newsletters as newsletter_queries
from tidings.storage.ab_tests import AbTestRow
from tidings.storage.campaigns import CampaignRow
from tidings.storage.database import Database
from tidings.storage.newsletters import NewsletterRow
from tidings.storage.sending import campaign_sends as send_queries

log = structlog.get_logger("tidings.campaigns")
MAX_TEST_RECIPIENTS = 10
TEST_SUBJECT_PREFIX = "[Test] "
REQUIRED_FIELDS = frozenset({"subject", "preheader", "body", "body_format", "audience_filter"})
EDITABLE_FIELDS = frozenset(
    {
        "subject",
        "preheader",
        "body",
        "body_format",
        "audience_filter",
        "sender_name",
        "reply_to",
        "scheduled_at",
        "archive_public",
    }
)
CLONED_FIELDS = EDITABLE_FIELDS - {"scheduled_at"}
# Fields that may not be null in an edit: the required ones and the archive flag.
NOT_NULL_FIELDS = REQUIRED_FIELDS | {"archive_public"}


@dataclass(frozen=True)
class CampaignContext:
    db: Database
    now: Clock
    mailer: Mailer
    public_url: str
    theme: Theme
    templates: TemplateEngine
    # Real mail (SMTP, Mailgun) is refused while the publisher's identity is the placeholder.
    identity: SendingIdentity = NOT_CHECKED
    unsubscribe_address: str | None = None  # a List-Unsubscribe mailto; None: https only
    # The longest `engaged:DAYS` window a filter may ask for: hits are kept this long (ENG-7).
    engagement_days_max: int = MAX_ENGAGEMENT_DAYS


@dataclass(frozen=True, slots=True)
class CampaignDraft:
    campaign: CampaignRow
    newsletter: NewsletterRow
    audience: AudienceFilter
    segments: tuple[str, ...]  # the tiers this campaign renders a version for
    ab: AbTestRow | None = None  # its A/B test (ENG-8), with the decision once made
    # The tracking mode frozen when its send was prepared (None: not prepared, or before 0034)
    sent_tracking: str | None = None

    @property
    def tracking(self) -> TrackingMode:
        """The mode its messages are rendered under: the one frozen with the send's snapshot,
        the newsletter's current one until then (ENG-1)."""
        return TrackingMode(self.sent_tracking or self.newsletter.tracking)

    def archive_audit(self) -> tuple[str, str, dict[str, Any]]:
        """The audit log's action, target and detail for an operator's archive decision."""
        return (
            "campaign.archive",
            f"campaign:{self.campaign.id}",
            {"public": self.campaign.archive_public},
        )


def _validated(
    values: dict[str, Any], *, engagement_days_max: int = MAX_ENGAGEMENT_DAYS
) -> dict[str, Any]:
    """Check a complete set of campaign fields; raise InvalidInput naming the bad one."""
    content = CampaignContent(
        subject=values["subject"],
        preheader=values.get("preheader") or "",
        body=values["body"],
        body_format=values.get("body_format") or "markdown",
    )
    named = check_content(content)
    unknown = sorted(set(named) - set(TIERS))
    if unknown:
        raise InvalidInput(
            f"segment blocks name unknown segments: {', '.join(unknown)} "
            f"(segments are the tiers: {', '.join(TIERS)})",
            field="body",
        )
    audience = parse_filter(values.get("audience_filter"), max_engagement_days=engagement_days_max)
    require_timezone("scheduled_at", values.get("scheduled_at"))
    check_header_values(
        {"sender_name": values.get("sender_name"), "reply_to": values.get("reply_to")}
    )
    if values.get("reply_to"):
        check_address("reply_to", values["reply_to"])
    archive_public = values.get("archive_public")
    return {
        **values,
        # Paid issues stay paid: with no decision made, only an unfiltered issue is public.
        "archive_public": not audience.clauses if archive_public is None else archive_public,
        "audience_filter": str(audience),
        "preheader": content.preheader,
        "body_format": content.body_format,
    }


def check_ab(test: AbTest | None, newsletter: NewsletterRow) -> None:
    """An A/B test's own bounds, its values as safe as the field they replace, and a
    newsletter that tracks: without opens and clicks there is nothing to decide by."""
    if test is None:
        return
    test.check()
    if newsletter.tracking == TrackingMode.OFF:
        raise InvalidInput(
            f"an A/B test needs opens and clicks, and newsletter {newsletter.slug!r} has "
            f"tracking 'off': set its tracking field to aggregate or per_person first "
            f"(tidings newsletters tracking {newsletter.slug} aggregate)",
            field="tracking",
        )
    for value in test.alternatives:
        if test.field is AbField.SENDER_NAME:
            check_header_values({"sender_name": value})
        elif test.field is AbField.SUBJECT:
            CampaignContent(subject=value, preheader="", body="")  # checks it as a subject
        else:
            CampaignContent(subject="-", preheader=value, body="")


class CampaignDrafts:
    def __init__(self, context: CampaignContext) -> None:
        self._ctx = context

    async def create(self, newsletter: str, draft: DraftFields) -> CampaignDraft:
        fields = _validated(draft.values(), engagement_days_max=self._ctx.engagement_days_max)
        now = self._ctx.now()
        async with self._ctx.db.write() as conn:
            found = await newsletter_queries.get_by_slug(conn, newsletter)
            if found is None:
                raise NotFound(f"no newsletter called {newsletter!r}", field="newsletter")
            check_ab(draft.ab, found)
            row = await queries.insert_campaign(
                conn,
                newsletter_id=found.id,
                status="draft",
                created_at=now,
                updated_at=now,
                **fields,
            )
            await ab_queries.replace(conn, row.id, draft.ab)
            ab = await ab_queries.get(conn, row.id)
        log.info("campaign.created", campaign_id=row.id)
        return self._draft(row, found, ab)

    async def clone(self, campaign_id: int) -> CampaignDraft:
        """A new draft with the content, audience and sender of campaign `campaign_id`, in any
        state (a sent issue is the usual start of the next one); never its schedule."""
        source = await self.get(campaign_id)
        original = source.campaign
        now = self._ctx.now()
        async with self._ctx.db.write() as conn:
            row = await queries.insert_campaign(
                conn,
                newsletter_id=original.newsletter_id,
                status="draft",
                created_at=now,
                updated_at=now,
                **{key: getattr(original, key) for key in CLONED_FIELDS},
            )
        log.info("campaign.cloned", campaign_id=row.id, cloned_from=campaign_id)
        return self._draft(row, source.newsletter)

    async def update(self, campaign_id: int, edit: DraftChanges) -> CampaignDraft:
        changes = edit.values()
        for key in NOT_NULL_FIELDS & {k for k, v in changes.items() if v is None}:
            raise InvalidInput(f"{key} cannot be null", field=key)
        if changes.keys() == {"archive_public"}:
            return await self.set_archive_public(campaign_id, changes["archive_public"])
        current = await self.get(campaign_id)
        merged = {key: getattr(current.campaign, key) for key in EDITABLE_FIELDS}
        if "archive_public" not in changes and "audience_filter" in changes:
            # A new audience decides again, so narrowing a public issue to paid readers
            # takes it out of the archive unless the same edit says otherwise.
            audience = str(parse_filter(changes["audience_filter"]))
            if audience != current.campaign.audience_filter:
                merged["archive_public"] = None
        merged.update(changes)
        fields = _validated(merged, engagement_days_max=self._ctx.engagement_days_max)
        ab = edit.ab
        if not isinstance(ab, Unset):
            check_ab(ab, current.newsletter)
        async with self._ctx.db.write() as conn:
            row = await queries.update_draft(
                conn, campaign_id, **fields, updated_at=self._ctx.now()
            )
            if row is None:
                raise Conflict("only a draft campaign can be edited")
            if not isinstance(ab, Unset):  # left alone, the test (and any pick) stays
                await ab_queries.replace(conn, campaign_id, ab)
            stored = await ab_queries.get(conn, campaign_id)
        return self._draft(row, current.newsletter, stored)

    async def set_archive_public(self, campaign_id: int, public: bool) -> CampaignDraft:
        """Publish a campaign in its newsletter's archive, or withdraw it: in any state, so an
        issue already sent can be published or withdrawn (API-4)."""
        async with self._ctx.db.write() as conn:
            row = await queries.set_archive_public(
                conn, campaign_id, public, updated_at=self._ctx.now()
            )
            if row is None:
                raise NotFound(f"no campaign with id {campaign_id}")
            newsletter = await newsletter_queries.get_by_id(conn, row.newsletter_id)
        assert newsletter is not None
        log.info("campaign.archive_changed", campaign_id=campaign_id, archive_public=public)
        return self._draft(row, newsletter)

    async def get(self, campaign_id: int) -> CampaignDraft:
        async with self._ctx.db.read() as conn:
            row = await queries.get(conn, campaign_id)
            if row is None:
                raise NotFound(f"no campaign with id {campaign_id}")
            newsletter = await newsletter_queries.get_by_id(conn, row.newsletter_id)
            ab = await ab_queries.get(conn, campaign_id)
            sent_tracking = await send_queries.sent_tracking(conn, campaign_id)
        assert newsletter is not None
        return self._draft(row, newsletter, ab, sent_tracking)

    async def list_campaigns(
        self, *, newsletter: str | None = None, before_id: int | None = None, limit: int = 50
    ) -> list[CampaignRow]:
        async with self._ctx.db.read() as conn:
            newsletter_id = None
            if newsletter is not None:
                found = await newsletter_queries.get_by_slug(conn, newsletter)
                if found is None:
                    raise NotFound(f"no newsletter called {newsletter!r}", field="newsletter")
                newsletter_id = found.id
            return await queries.list_campaigns(
                conn, newsletter_id=newsletter_id, before_id=before_id, limit=limit
            )

    async def delete(self, campaign_id: int) -> None:
        await self.get(campaign_id)
        async with self._ctx.db.write() as conn:
            if not await queries.delete_draft(conn, campaign_id):
                raise Conflict("only a draft campaign can be deleted")

    def check_identity(self, draft: CampaignDraft) -> None:
        """Refuse (PlaceholderIdentity) to mail readers under placeholder settings or a
        newsletter sender address no mail can come from; the capture provider passes."""
        newsletter = draft.newsletter
        self._ctx.identity.check(newsletter=(newsletter.slug, newsletter.sender_address))

    def _draft(
        self,
        row: CampaignRow,
        newsletter: NewsletterRow,
        ab: AbTestRow | None = None,
        sent_tracking: str | None = None,
    ) -> CampaignDraft:
        audience = parse_filter(row.audience_filter)
        return CampaignDraft(row, newsletter, audience, audience.tiers(), ab, sent_tracking)

    # -- rendering -----------------------------------------------------------------------

    def _parts(self, draft: CampaignDraft) -> tuple[CampaignContent, Sender, ListInfo]:
        campaign, newsletter = draft.campaign, draft.newsletter
        body_format: Literal["markdown", "html"] = (
            "html" if campaign.body_format == "html" else "markdown"
        )
        content = CampaignContent(
            subject=campaign.subject,
            preheader=campaign.preheader,
            body=campaign.body,
            body_format=body_format,
        )
        sender = Sender(
            name=campaign.sender_name or newsletter.sender_name,
            address=newsletter.sender_address,
            sending_domain=newsletter.sender_address.rpartition("@")[2],
            reply_to=campaign.reply_to or newsletter.reply_to,
            unsubscribe_mailbox=self._ctx.unsubscribe_address,
        )
        list_info = ListInfo(
            campaign_id=str(campaign.id),
            newsletter_slug=newsletter.slug,
            newsletter_name=newsletter.name,
            archive_url=(
                issue_url(self._ctx.public_url, newsletter.slug, campaign.id)
                if newsletter.archive and campaign.archive_public
                else None
            ),
        )
        return content, sender, list_info

    def render_for_send(
        self,
        draft: CampaignDraft,
        segment: str,
        sending_domain: str,
        signer: TrackingSigner | None = None,
    ) -> SegmentRendering:
        """The segment's real message for a send, its Message-IDs in `sending_domain`; its
        links tracked when the newsletter tracks (ENG-2) and a `signer` is given. In an A/B
        test (ENG-8) a `<tier>-v<n>` segment is the tier's message with variant n's value,
        and the remainder's (the tier) has the winner's; its links count for the segment."""
        content, sender, list_info = self._parts(draft)
        tier, variant = split_segment(segment)
        if draft.ab is not None:
            content, sender = _with_variant(draft.ab, variant, content, sender)
        mode = draft.tracking
        return render_segment(
            content,
            tier,
            tracked_segment=segment,
            sender=dataclasses.replace(sender, sending_domain=sending_domain),
            list_info=list_info,
            base_url=self._ctx.public_url,
            theme=self._ctx.theme,
            engine=self._ctx.templates,
            now=self._ctx.now(),
            tracking=None if signer is None else LinkTracking(mode, signer),
        )

    def _segment(self, draft: CampaignDraft, segment: str | None) -> str:
        if segment is None:  # the first tier the audience can reach
            return draft.segments[0] if draft.segments else TIERS[0]
        if segment not in TIERS:
            raise InvalidInput(f"segment must be one of {', '.join(TIERS)}", field="segment")
        return segment

    async def preview(self, campaign_id: int, segment: str | None) -> Preview:
        draft = await self.get(campaign_id)
        content, sender, list_info = self._parts(draft)
        shown = preview(
            content,
            self._segment(draft, segment),
            sender=sender,
            list_info=list_info,
            base_url=self._ctx.public_url,
            engine=self._ctx.templates,
            now=self._ctx.now(),
            theme=self._ctx.theme,
        )
        if not self._ctx.public_url.startswith("https://"):
            warning = (
                "site.public_url is not https: one-click unsubscribe (RFC 8058) needs an https "
                "List-Unsubscribe URL, so set it before sending to real readers."
            )
            shown = dataclasses.replace(shown, warnings=(*shown.warnings, warning))
        if draft.tracking != TrackingMode.OFF:
            # A preview (and a test send) is untracked, so the operator's clicks count nowhere.
            warning = (
                f"Links are tracked when sent ({draft.tracking}): the sent message's "
                "links go through this site and carry an open pixel; this preview's do not."
            )
            shown = dataclasses.replace(shown, warnings=(*shown.warnings, warning))
        return shown

    async def test_send(
        self, campaign_id: int, addresses: list[str], segment: str | None
    ) -> list[int]:
        """Send the segment's real message to `addresses` through the delivery engine, its
        subject starting `[Test]`. The campaign's state and counts are untouched; the links
        carry test tokens and are never tracked (a test copy's clicks must not count)."""
        if not 1 <= len(addresses) <= MAX_TEST_RECIPIENTS:
            raise InvalidInput(f"give 1 to {MAX_TEST_RECIPIENTS} addresses", field="to")
        recipients = list(
            dict.fromkeys(normalise_email(address, field="to").email for address in addresses)
        )
        draft = await self.get(campaign_id)
        self.check_identity(draft)
        content, sender, list_info = self._parts(draft)
        # Marked in the inbox, so a test copy is never taken (or forwarded) for the issue.
        # A subject at the length limit loses its last characters to the mark.
        marked = f"{TEST_SUBJECT_PREFIX}{content.subject}"[:MAX_SUBJECT]
        content = dataclasses.replace(content, subject=marked)
        rendering = render_segment(
            content,
            self._segment(draft, segment),
            sender=sender,
            list_info=list_info,
            base_url=self._ctx.public_url,
            engine=self._ctx.templates,
            now=self._ctx.now(),
            theme=self._ctx.theme,
        )
        job_ids = []
        async with self._ctx.db.write() as conn:
            for number, address in enumerate(recipients, start=1):
                values = RecipientValues(
                    address=address,
                    name=None,
                    unsubscribe_token=tokens.TEST_SEND_TOKEN,
                    preferences_token=tokens.TEST_SEND_TOKEN,
                    subscriber_id="test",
                    recipient_id=f"test-{number}",
                )
                # A test send must not share the real send's Message-ID (providers and Gmail
                # drop repeats): swap in a one-off id for this test only.
                real_id = rendering.message_id_for(address)
                test_id = f"<test-{uuid.uuid4().hex}.{real_id[1:]}"
                data = rendering.personalise(values).replace(
                    f"Message-ID: {real_id}".encode(), f"Message-ID: {test_id}".encode(), 1
                )
                job, _ = await self._ctx.mailer.queue_raw_in(
                    conn, RawEmail(sender=sender.address, to=address, data=data, message_id=test_id)
                )
                job_ids.append(job.id)
        log.info("campaign.test_sent", campaign_id=campaign_id, recipients=len(job_ids))
        return job_ids


class AbUndecided(TidingsError):
    """The remainder of an A/B test was to be rendered before its winner was chosen."""

    code = "ab_test_undecided"


def _with_variant(
    ab: AbTestRow, variant: int | None, content: CampaignContent, sender: Sender
) -> tuple[CampaignContent, Sender]:
    """The content and sender of `variant`, or of the winner for the remainder (None)."""
    chosen = variant if variant is not None else ab.winner
    if chosen is None:
        raise AbUndecided("the A/B test has no winner yet: the remainder waits for it")
    test = ab.test
    if test.field is AbField.SENDER_NAME:
        return content, dataclasses.replace(
            sender, name=test.value(chosen, sender.name) or sender.name
        )
    if test.field is AbField.SUBJECT:
        subject = test.value(chosen, content.subject) or content.subject
        return dataclasses.replace(content, subject=subject), sender
    preheader = test.value(chosen, content.preheader) or ""
    return dataclasses.replace(content, preheader=preheader), sender
