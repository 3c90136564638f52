"""The public flows (AUD-5..7, API-1): subscribe, confirm, unsubscribe, preferences.

None of them reveal whether an address is known. Every change that must cause an email or a
webhook writes it to the queue in the same transaction (PRI-6). Nothing here locks rows a
campaign send reads, so an unsubscribe never waits on a send in progress.
"""

from __future__ import annotations

from dataclasses import dataclass

import structlog
from sqlalchemy.ext.asyncio import AsyncConnection

from tidings.audience.consent import ConsentRecorder, owners_of, state_of
from tidings.audience.consent_requests import ConsentRequest, queue_consent_request
from tidings.audience.context import AudienceContext
from tidings.audience.ratelimit import SubscribeRateLimiter
from tidings.audience.subscriber_mail import queue_welcome_email
from tidings.audience.tracking_consent import (
    consent_of,
    record_on_confirmation,
    record_tracking_consent,
)
from tidings.domain import consent, tokens
from tidings.domain.audience import Source, normalise_email, validate_name
from tidings.domain.errors import NotFound, TidingsError
from tidings.domain.tracking import TrackingMode
from tidings.domain.tracking_consent import ConsentSource
from tidings.storage import confirmations
from tidings.storage import newsletters as newsletter_queries
from tidings.storage import subscribers as subscriber_queries
from tidings.storage import subscriptions as subscription_queries
from tidings.storage import suppressions as suppression_queries
from tidings.storage.sending import recipient_outcomes
from tidings.storage.subscribers import SubscriberRow
from tidings.storage.subscriptions import SubscriptionRow

log = structlog.get_logger("tidings.audience")


class LinkProblem(TidingsError):
    """A link from an email that cannot be used. `reason` is `invalid` or `expired`."""

    code = "link_invalid"
    title = "This link cannot be used"

    def __init__(self, reason: str) -> None:
        super().__init__("the link has expired" if reason == "expired" else "the link is not valid")
        self.reason = reason


@dataclass(frozen=True, slots=True)
class LinkTarget:
    """What a link from an email points at, for the page that answers it."""

    newsletter_name: str
    subscriber_id: int
    preferences_url: str


@dataclass(frozen=True, slots=True)
class Preference:
    newsletter_id: int
    name: str
    description: str
    subscribed: bool  # confirmed and not left
    awaiting_confirmation: bool = False  # asked for; the emailed link has not been used yet


@dataclass(frozen=True, slots=True)
class TrackingChoice:
    """The preferences page's tracking box: `offered` when a newsletter tracks per person or
    the person's consent is on record (so it can always be withdrawn); `given`: ticked."""

    offered: bool
    given: bool


class PublicFlows:
    def __init__(self, context: AudienceContext, limiter: SubscribeRateLimiter) -> None:
        self._ctx = context
        self._limiter = limiter
        self._consent = ConsentRecorder(context)

    # -- subscribe (AUD-5) ----------------------------------------------------------------

    async def subscribe(
        self,
        *,
        email: str,
        name: str | None,
        newsletter_slug: str,
        source: Source,
        client_ip: str | None,
        tracking_consent: bool = False,
    ) -> None:
        """Answers the same, after the same work, whether the address is new, pending,
        confirmed, unsubscribed or suppressed: it records the address and queues the request.
        Rate-limited per client and per target address (429 with Retry-After).
        `tracking_consent`: the form's tracking box was ticked; it becomes consent only when
        the person confirms (or, single opt-in, when the request subscribes them)."""
        address = normalise_email(email)
        name = validate_name(name)
        await self._limiter.check(client_ip=client_ip, email_key=address.key)
        now = self._ctx.now()
        async with self._ctx.db.write() as conn:
            newsletter = await newsletter_queries.get_by_slug(conn, newsletter_slug)
            if newsletter is None:
                raise NotFound(f"no newsletter called {newsletter_slug!r}", field="newsletter")
            subscriber_id, created = await subscriber_queries.ensure(
                conn,
                email=address.email,
                email_key=address.key,
                email_hash=self._ctx.email_hash(address.key),
                name=name,  # only a new subscriber takes the name: this endpoint is public
                tier="free",
                attributes={},
                created_at=now,
                updated_at=now,
            )
            # The rest depends on the address's state, so it is deferred to the queue: the
            # request does the same work for every address (AUD-5, no enumeration by timing).
            await queue_consent_request(
                self._ctx,
                conn,
                ConsentRequest(
                    subscriber_id,
                    newsletter.id,
                    source,
                    new_subscriber=created,
                    tracking_consent=tracking_consent,
                ),
            )

    # -- confirm (AUD-6) ------------------------------------------------------------------

    async def confirmation_target(self, token: str) -> LinkTarget:
        """For the GET page: what the link would confirm. Changes nothing."""
        async with self._ctx.db.read() as conn:
            subscription = await self._subscription_for_confirmation(conn, token)
            return await self._target(conn, subscription)

    async def confirm(self, token: str, *, client_ip: str | None) -> LinkTarget:
        """Confirm consent (POST). Idempotent: confirming twice changes nothing more."""
        now = self._ctx.now()
        async with self._ctx.db.write() as conn:
            subscription = await self._subscription_for_confirmation(conn, token)
            decision = consent.decide(state_of(subscription), consent.ConfirmByLink(client_ip))
            if isinstance(decision, consent.Refusal):
                raise LinkProblem("invalid")  # left since: this link no longer applies
            written = await self._consent.record(conn, subscription, decision, now=now)
            await record_on_confirmation(conn, written, now=now)
            if decision.confirms:
                _, newsletter = await owners_of(conn, written)
                await queue_welcome_email(self._ctx, conn, written, newsletter)
            return await self._target(conn, subscription)

    async def _subscription_for_confirmation(
        self, conn: AsyncConnection, token: str
    ) -> SubscriptionRow:
        if not tokens.is_well_formed_confirmation_token(token):
            raise LinkProblem("invalid")
        found = await confirmations.find(conn, tokens.hash_token(token))
        if found is None:
            raise LinkProblem("invalid")
        subscription, expires = found
        if subscription.confirmed_at is None and expires < self._ctx.now():
            raise LinkProblem("expired")
        return subscription

    # -- unsubscribe (AUD-7) --------------------------------------------------------------

    async def _subscription_for_unsubscribe(
        self, conn: AsyncConnection, token: str
    ) -> SubscriptionRow:
        subscription_id = tokens.signed_id(token)
        subscription = (
            None
            if subscription_id is None
            else await subscription_queries.get_by_id(conn, subscription_id)
        )
        if subscription is None or not tokens.verify(
            self._ctx.secret(), "unsubscribe", token, subscription.created_at
        ):
            raise LinkProblem("invalid")
        return subscription

    async def unsubscribe_target(self, token: str) -> LinkTarget:
        async with self._ctx.db.read() as conn:
            subscription = await self._subscription_for_unsubscribe(conn, token)
            return await self._target(conn, subscription)

    async def unsubscribe(self, token: str) -> LinkTarget:
        """One-click unsubscribe (RFC 8058): no cookie, no CSRF token, no second step."""
        async with self._ctx.db.write() as conn:
            subscription = await self._subscription_for_unsubscribe(conn, token)
            await self.unsubscribe_in(conn, subscription)
            # Counted in the statistics of the campaign whose link it was (SND-27): the one
            # the token names (signed with it), or, for a link from mail sent before tokens
            # named their recipient row, the newsletter's latest campaign to the person.
            await recipient_outcomes.attribute_unsubscribe(
                conn,
                subscriber_id=subscription.subscriber_id,
                newsletter_id=subscription.newsletter_id,
                recipient_id=tokens.signed_recipient(token),
                at=self._ctx.now(),
            )
            return await self._target(conn, subscription)

    async def unsubscribe_in(self, conn: AsyncConnection, subscription: SubscriptionRow) -> None:
        """Unsubscribe inside the caller's transaction (idempotent)."""
        decision = consent.decide(state_of(subscription), consent.Unsubscribe())
        assert isinstance(decision, consent.Transition)  # the row exists
        await self._consent.record(conn, subscription, decision, now=self._ctx.now())

    # -- preferences ----------------------------------------------------------------------

    async def _subscriber_for_preferences(self, conn: AsyncConnection, token: str) -> SubscriberRow:
        subscriber_id = tokens.signed_id(token)
        subscriber = (
            None if subscriber_id is None else await subscriber_queries.get(conn, subscriber_id)
        )
        if subscriber is None or not tokens.verify(
            self._ctx.secret(), "preferences", token, subscriber.created_at
        ):
            raise LinkProblem("invalid")
        return subscriber

    async def preferences(self, token: str) -> list[Preference]:
        async with self._ctx.db.read() as conn:
            subscriber = await self._subscriber_for_preferences(conn, token)
            return await self._preferences(conn, subscriber.id)

    async def tracking_choice(self, token: str) -> TrackingChoice:
        async with self._ctx.db.read() as conn:
            subscriber = await self._subscriber_for_preferences(conn, token)
            per_person = any(
                n.tracking == TrackingMode.PER_PERSON
                for n in await newsletter_queries.list_newsletters(conn)
            )
            given = consent_of(subscriber).given
            return TrackingChoice(offered=per_person or given, given=given)

    async def _preferences(self, conn: AsyncConnection, subscriber_id: int) -> list[Preference]:
        if await subscriber_queries.get(conn, subscriber_id) is None:
            raise LinkProblem("invalid")
        current = {
            row.newsletter_id: state_of(row)
            for row, _, _ in await subscription_queries.of_subscriber(conn, subscriber_id)
        }
        return [
            Preference(
                n.id,
                n.name,
                n.description,
                subscribed=current.get(n.id) is consent.SubscriptionState.CONFIRMED,
                awaiting_confirmation=current.get(n.id) is consent.SubscriptionState.PENDING,
            )
            for n in await newsletter_queries.list_newsletters(conn)
        ]

    async def update_preferences(
        self, token: str, wanted: set[int], *, tracking: bool | None = None
    ) -> list[Preference]:
        """Unsubscribe from unticked newsletters; ask to subscribe to ticked ones. A ticked
        newsletter not yet confirmed gets a confirmation email (AUD-7): the page is reached
        from an email, and whoever it was forwarded to must not sign its recipient up.
        `tracking` gives (True) or withdraws (False) per-person tracking consent (ENG-1);
        None leaves it as it is. Unlike a subscription, it needs no confirmation: a page
        forwarded on can at worst let its holder say yes on the person's behalf, as it can
        subscribe them, and the person sees and withdraws it here."""
        now = self._ctx.now()
        async with self._ctx.db.write() as conn:
            subscriber = await self._subscriber_for_preferences(conn, token)
            subscriber_id = subscriber.id
            if tracking is not None:
                await record_tracking_consent(
                    conn, subscriber, tracking, source=ConsentSource.PREFERENCES, now=now
                )
            newsletter_ids = [n.id for n in await newsletter_queries.list_newsletters(conn)]
            existing = {
                row.newsletter_id: row
                for row, _, _ in await subscription_queries.of_subscriber(conn, subscriber_id)
            }
            suppressed = await suppression_queries.is_suppressed(conn, subscriber.email_hash)
            for newsletter_id in newsletter_ids:
                subscription = existing.get(newsletter_id)
                if newsletter_id in wanted and not suppressed:
                    subscription, before = await self._consent.subscription(
                        conn, subscriber_id, newsletter_id, source=Source.FORM, now=now
                    )
                    decision = consent.decide(before, consent.SubscribeInPreferences())
                    assert isinstance(decision, consent.Transition)
                    await self._consent.record(conn, subscription, decision, now=now)
                elif newsletter_id not in wanted and subscription is not None:
                    await self.unsubscribe_in(conn, subscription)
            return await self._preferences(conn, subscriber_id)

    async def _target(self, conn: AsyncConnection, subscription: SubscriptionRow) -> LinkTarget:
        subscriber, newsletter = await owners_of(conn, subscription)
        return LinkTarget(
            newsletter_name=newsletter.name,
            subscriber_id=subscriber.id,
            preferences_url=self._ctx.preferences_url(subscriber.id, subscriber.created_at),
        )
