"""The sunset policy (ENG-7): per newsletter, off by default. A subscriber tracked per person
with no human open or click over `after_days` (and at least `min_sends` tracked campaigns in
that span) is asked once whether to stay; without an answer (the keep button, or a human open
or click) within `grace_days` they are unsubscribed with reason `inactive`. History is kept;
subscribing again through the normal flow reverses it.

The request row and its email job are written in one transaction (the outbox), and the row is
unique per (subscription, period): a crash never loses or doubles the email, and two runs never
ask one person twice in one period. Each run looks at a bounded slice of each newsletter's
subscriptions (a cursor kept per process, wrapping round), so a million-subscriber newsletter
costs bounded work per run and is covered over successive runs.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import structlog

from tidings.audience.consent import ConsentRecorder, state_of
from tidings.audience.context import AudienceContext
from tidings.audience.public import LinkProblem
from tidings.audience.subscriber_mail import queue_sunset_email
from tidings.domain import consent, tokens
from tidings.domain.consent import SubscriptionState
from tidings.domain.errors import InvalidInput, NotFound
from tidings.storage import feedback as feedback_queries
from tidings.storage import newsletters as newsletter_queries
from tidings.storage import subscribers as subscriber_queries
from tidings.storage import subscriptions as subscription_queries
from tidings.storage import sunset as queries
from tidings.storage.newsletters import NewsletterRow

log = structlog.get_logger("tidings.audience")
LIMITS = {"after_days": (7, 3650), "min_sends": (1, 1000), "grace_days": (1, 365)}
RunReport = Callable[[int, dict[str, int]], Awaitable[None]]


@dataclass(frozen=True, slots=True)
class SunsetSettings:
    enabled: bool
    after_days: int
    min_sends: int
    grace_days: int

    @classmethod
    def of(cls, newsletter: NewsletterRow) -> SunsetSettings:
        return cls(
            newsletter.sunset_enabled,
            newsletter.sunset_after_days,
            newsletter.sunset_min_sends,
            newsletter.sunset_grace_days,
        )


@dataclass(frozen=True, slots=True)
class SunsetPreview:
    """A dry run: who would be asked, and who would be unsubscribed, now."""

    asked: list[str]
    unsubscribed: list[str]


@dataclass(frozen=True, slots=True)
class KeepTarget:
    newsletter_name: str
    outcome: str | None  # None: still open


@dataclass
class SunsetPolicy:
    context: AudienceContext
    batch: int = 1000  # subscriptions examined, and requests closed, per newsletter per run
    retention_days: int = 3650  # hits are kept this long: a longer after_days would lie
    report: RunReport | None = None  # the audit log, told each run's counts
    _cursors: dict[int, int] = field(default_factory=dict)  # newsletter -> subscriber id
    _consent: ConsentRecorder = field(init=False)

    def __post_init__(self) -> None:
        self._consent = ConsentRecorder(self.context)

    # -- settings ---------------------------------------------------------------------------

    async def configure(self, slug: str, **changes: Any) -> SunsetSettings:
        """Change some of `enabled`, `after_days`, `min_sends`, `grace_days`."""
        values = {}
        for name, value in changes.items():
            if value is None:
                continue
            if name != "enabled":
                low, high = LIMITS[name]
                if name == "after_days":
                    high = min(high, self.retention_days)
                if not low <= int(value) <= high:
                    raise InvalidInput(
                        f"sunset {name} must be from {low} to {high}", field=f"sunset_{name}"
                    )
            values[f"sunset_{name}"] = value
        async with self.context.db.write() as conn:
            newsletter = await self._newsletter(conn, slug)
            if values:
                updated = await newsletter_queries.update_newsletter(
                    conn, newsletter.id, **values, updated_at=self.context.now()
                )
                assert updated is not None
                newsletter = updated
        return SunsetSettings.of(newsletter)

    async def settings(self, slug: str) -> SunsetSettings:
        async with self.context.db.read() as conn:
            return SunsetSettings.of(await self._newsletter(conn, slug))

    # -- the periodic run -------------------------------------------------------------------

    async def run(self) -> int:
        """One run over every newsletter with the policy on; returns asked + closed."""
        async with self.context.db.read() as conn:
            enabled = await queries.enabled_newsletters(conn)
        done = 0
        for newsletter_id in enabled:
            counts = await self._run_one(newsletter_id)
            done += sum(counts.values())
            log.info("sunset.run", newsletter_id=newsletter_id, **counts)
            if self.report is not None and any(counts.values()):
                await self.report(newsletter_id, counts)
        return done

    async def _run_one(self, newsletter_id: int) -> dict[str, int]:
        now = self.context.now()
        counts = {"asked": 0, "kept_by_engaging": 0, "unsubscribed": 0, "gone": 0}
        async with self.context.db.write() as conn:
            newsletter = await newsletter_queries.get_by_id(conn, newsletter_id)
            if newsletter is None or not newsletter.sunset_enabled:
                return counts
            rules = SunsetSettings.of(newsletter)
            for request, engaged in await queries.due_to_resolve(
                conn, newsletter_id, now, grace_days=rules.grace_days, limit=self.batch
            ):
                outcome = await self._close(conn, request, engaged=engaged)
                counts[outcome] += 1
        async with self.context.db.write() as conn:
            after = self._cursors.get(newsletter_id, 0)
            upto = await queries.slice_end(conn, newsletter_id, after, self.batch)
            due = await queries.due_to_ask(
                conn,
                newsletter_id,
                now,
                after_days=rules.after_days,
                min_sends=rules.min_sends,
                after=after,
                upto=upto,
            )
            period = queries.period_of(now, rules.after_days)
            for candidate in due:
                request_id = await queries.add_request(
                    conn,
                    subscription_id=candidate.subscription_id,
                    newsletter_id=newsletter_id,
                    subscriber_id=candidate.subscriber_id,
                    period=period,
                    now=now,
                )
                if request_id is None:
                    continue  # asked already in this period
                await queue_sunset_email(
                    self.context,
                    conn,
                    request_id=request_id,
                    subscriber_id=candidate.subscriber_id,
                    newsletter_id=newsletter_id,
                )
                counts["asked"] += 1
            # The next run takes the next slice; after the last one, from the start again.
            self._cursors[newsletter_id] = 0 if upto is None else upto
        return counts

    async def _close(self, conn: Any, request: queries.SunsetRequestRow, *, engaged: bool) -> str:
        now = self.context.now()
        if engaged:
            await queries.resolve(conn, request.id, "engaged", now)
            return "kept_by_engaging"
        subscription = await subscription_queries.get(
            conn, request.subscriber_id, request.newsletter_id
        )
        subscriber = await subscriber_queries.get(conn, request.subscriber_id)
        if (
            subscription is None
            or subscriber is None
            or state_of(subscription) is not SubscriptionState.CONFIRMED
        ):
            await queries.resolve(conn, request.id, "gone", now)
            return "gone"
        decision = consent.decide(state_of(subscription), consent.Unsubscribe())
        assert isinstance(decision, consent.Transition)
        await self._consent.record(conn, subscription, decision, now=now, reason="inactive")
        await feedback_queries.add_history(
            conn,
            email_hash=subscriber.email_hash,
            event="inactive",
            decision="unsubscribed",
            source="sunset",
            code=f"newsletter:{request.newsletter_id}",
            occurred_at=now,
            created_at=now,
        )
        await queries.resolve(conn, request.id, "unsubscribed", now)
        return "unsubscribed"

    # -- the dry run ------------------------------------------------------------------------

    async def dry_run(self, slug: str) -> SunsetPreview:
        """Who a run would ask and unsubscribe now, over the whole newsletter (unbatched:
        an operator's question, not the periodic job), whether or not the policy is on."""
        now = self.context.now()
        async with self.context.db.read() as conn:
            newsletter = await self._newsletter(conn, slug)
            rules = SunsetSettings.of(newsletter)
            asked = await queries.due_to_ask(
                conn, newsletter.id, now, after_days=rules.after_days, min_sends=rules.min_sends
            )
            leaving = await queries.due_to_unsubscribe(
                conn, newsletter.id, now, grace_days=rules.grace_days
            )
        return SunsetPreview([found.email for found in asked], leaving)

    # -- the keep button --------------------------------------------------------------------

    async def keep_target(self, token: str) -> KeepTarget:
        """What a keep link points at; a GET changes nothing (scanners follow links)."""
        async with self.context.db.read() as conn:
            request, newsletter = await self._request(conn, token)
        return KeepTarget(newsletter.name, request.outcome)

    async def keep(self, token: str) -> KeepTarget:
        """The person pressed "keep me subscribed" (a POST): the open request is answered.
        Once unsubscribed for inactivity, only the normal subscribe flow brings them back."""
        async with self.context.db.write() as conn:
            request, newsletter = await self._request(conn, token)
            if request.outcome is None:
                await queries.resolve(conn, request.id, "kept", self.context.now())
                log.info("sunset.kept", request_id=request.id, newsletter_id=newsletter.id)
                return KeepTarget(newsletter.name, "kept")
        return KeepTarget(newsletter.name, request.outcome)

    async def _request(
        self, conn: Any, token: str
    ) -> tuple[queries.SunsetRequestRow, NewsletterRow]:
        request_id = tokens.signed_id(token)
        request = None if request_id is None else await queries.get_request(conn, request_id)
        if request is None or not tokens.verify(
            self.context.secret(), "sunset", token, request.asked_at
        ):
            raise LinkProblem("invalid")
        newsletter = await newsletter_queries.get_by_id(conn, request.newsletter_id)
        assert newsletter is not None  # CASCADE: the request goes with it
        return request, newsletter

    async def _newsletter(self, conn: Any, slug: str) -> NewsletterRow:
        newsletter = await newsletter_queries.get_by_slug(conn, slug)
        if newsletter is None:
            raise NotFound(f"no newsletter called {slug!r}", field="newsletter")
        return newsletter
