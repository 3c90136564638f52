"""Mail about one subscriber (the confirmation email, a newsletter's welcome email), queued
as ids and a purpose and rendered only when it is sent (HOUSE rule 19, AUD-5).

The confirmation token is minted, and its hash stored, by the `send_subscriber_email` job just
before the message goes out: the queue never holds the token (a bearer secret), the address or
the body, and only the sent mail carries the link. Whether the mail is still wanted is decided
then too: a subscription confirmed, left or suppressed since the request gets no confirmation
email, and one no longer confirmed (or a newsletter whose welcome was removed) no welcome.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import timedelta
from enum import StrEnum
from typing import ClassVar

import structlog
from sqlalchemy.ext.asyncio import AsyncConnection

from tidings.audience.context import AudienceContext
from tidings.domain import tokens
from tidings.domain.consent import SubscriptionState, subscription_state
from tidings.outbound.email_jobs import EmailJobHandler, TransactionalEmail
from tidings.queue.job import Job, JobPayload
from tidings.rendering.notice import Notice, render_confirmation_email, render_notice
from tidings.storage import confirmations, transactional_outcomes
from tidings.storage import newsletters as newsletter_queries
from tidings.storage import subscribers as subscriber_queries
from tidings.storage import subscriptions as subscription_queries
from tidings.storage import sunset as sunset_queries
from tidings.storage import suppressions as suppression_queries
from tidings.storage.newsletters import NewsletterRow
from tidings.storage.subscribers import SubscriberRow
from tidings.storage.subscriptions import SubscriptionRow

SEND_SUBSCRIBER_EMAIL = "send_subscriber_email"
log = structlog.get_logger("tidings.audience")


class MailPurpose(StrEnum):
    CONFIRMATION = "confirmation"  # the double opt-in link (AUD-5, AUD-6)
    WELCOME = "welcome"  # the newsletter's welcome email, once a person confirms (issue 13)
    SUNSET = "sunset"  # "still want this?", to a person who stopped reading (ENG-7)


@dataclass(frozen=True, slots=True)
class SubscriberMail(JobPayload):
    """The `send_subscriber_email` job: which mail, to whom, about which newsletter."""

    kind: ClassVar[str] = SEND_SUBSCRIBER_EMAIL
    purpose: MailPurpose
    subscriber_id: int
    newsletter_id: int


async def queue_confirmation_email(
    context: AudienceContext, conn: AsyncConnection, *, subscriber_id: int, newsletter_id: int
) -> None:
    """Queue "confirmation mail for subscriber X, newsletter Y" in the caller's transaction
    (PRI-6). Every request is its own job, so a person who never got the first email can ask
    again; the key is random, never built from ids a database may reuse."""
    mail = SubscriberMail(MailPurpose.CONFIRMATION, subscriber_id, newsletter_id)
    key = f"subscriber-mail:{mail.purpose}:{uuid.uuid4().hex}"
    await _queue(context, conn, mail, key)


async def queue_welcome_email(
    context: AudienceContext,
    conn: AsyncConnection,
    subscription: SubscriptionRow,
    newsletter: NewsletterRow,
) -> None:
    """Queue the newsletter's welcome email, if it has one, in the transaction that confirmed
    `subscription` (PRI-6): by the emailed link, or by subscribing to a single opt-in
    newsletter. Never for imports or admin assertions: those people did nothing just now.
    Callers queue it only on the transition that confirms, so once per confirmation (a second
    click confirms nothing), and a person who leaves and confirms again is welcomed again.
    The key names the subscription and the confirmation's time; a reused id never meets an
    old key, as the privacy delete drops the person's jobs with them."""
    if not (newsletter.welcome_subject and newsletter.welcome_body):
        return
    if subscription.confirmed_at is None:
        return
    mail = SubscriberMail(MailPurpose.WELCOME, subscription.subscriber_id, newsletter.id)
    confirmed = int(subscription.confirmed_at.timestamp() * 1_000_000)
    key = f"subscriber-mail:{mail.purpose}:{subscription.id}:{confirmed}"
    await _queue(context, conn, mail, key)


async def queue_sunset_email(
    context: AudienceContext,
    conn: AsyncConnection,
    *,
    request_id: int,
    subscriber_id: int,
    newsletter_id: int,
) -> None:
    """Queue the sunset policy's re-permission email in the transaction that records the
    request (PRI-6): a crash loses neither, and the key (the request) queues it once."""
    mail = SubscriberMail(MailPurpose.SUNSET, subscriber_id, newsletter_id)
    await _queue(context, conn, mail, f"subscriber-mail:{mail.purpose}:{request_id}")


async def _queue(
    context: AudienceContext, conn: AsyncConnection, mail: SubscriberMail, key: str
) -> None:
    """Queue `mail`, noting its message so what the provider reports about it lands on it."""
    job, _ = await context.queue.enqueue(conn, mail.kind, key, mail.to_payload())
    await transactional_outcomes.remember(
        conn, job_id=job.id, idempotency_key=key, message_id=None, now=job.created_at
    )


@dataclass(frozen=True, slots=True)
class _Confirmation:
    to: str
    newsletter_name: str
    sender: str
    sender_name: str
    reply_to: str | None
    token: str


class SubscriberMailHandler:
    """Renders and sends a `send_subscriber_email` job. What the mail needs (a confirmation
    token, written under the job's claim, fenced) is committed, and only then is the message
    handed to the provider (PRI-3). A retry mints a fresh link; one that may have reached the
    person stays valid too."""

    def __init__(self, context: AudienceContext, sender: EmailJobHandler) -> None:
        self._ctx = context
        self._sender = sender

    async def __call__(self, job: Job) -> None:
        mail = SubscriberMail.from_job(job)
        async with self._ctx.queue.fenced(job) as conn:
            if mail.purpose is MailPurpose.WELCOME:
                email = await self._welcome(conn, mail)
            elif mail.purpose is MailPurpose.SUNSET:
                email = await self._sunset(conn, mail)
            else:
                email = await self._confirmation(conn, mail)
        if email is None:
            return
        await self._sender.deliver(email, idempotency_key=job.idempotency_key, job_id=job.id)
        log.info(
            "subscriber_mail.sent",
            purpose=mail.purpose.value,
            subscriber_id=mail.subscriber_id,
            newsletter_id=mail.newsletter_id,
        )

    async def _confirmation(
        self, conn: AsyncConnection, mail: SubscriberMail
    ) -> TransactionalEmail | None:
        confirmation = await self._mint(conn, mail)
        if confirmation is None:
            return None
        notice = render_confirmation_email(
            site_name=self._ctx.site_name,
            newsletter_name=confirmation.newsletter_name,
            confirm_url=self._ctx.confirm_url(confirmation.token),
            expires_hours=self._ctx.confirm_token_ttl_hours,
            engine=self._ctx.templates,
            theme=self._ctx.theme,
        )
        return TransactionalEmail(
            to=confirmation.to,
            subject=notice.subject,
            text=notice.text,
            html=notice.html,
            sender=confirmation.sender,
            sender_name=confirmation.sender_name,
            reply_to=confirmation.reply_to,
        )

    async def _mint(self, conn: AsyncConnection, mail: SubscriberMail) -> _Confirmation | None:
        """A new link for a subscription still waiting for one, else None (nothing to send)."""
        found = await _recipient(conn, mail, SubscriptionState.PENDING)
        if found is None:
            return None
        subscriber, newsletter, subscription = found
        token = tokens.new_confirmation_token()
        now = self._ctx.now()
        await confirmations.add(
            conn,
            token_hash=tokens.hash_token(token),
            subscription_id=subscription.id,
            now=now,
            expires_at=now + timedelta(hours=self._ctx.confirm_token_ttl_hours),
        )
        return _Confirmation(
            to=subscriber.email,
            newsletter_name=newsletter.name,
            sender=newsletter.sender_address,
            sender_name=newsletter.sender_name,
            reply_to=newsletter.reply_to,
            token=token,
        )

    async def _welcome(
        self, conn: AsyncConnection, mail: SubscriberMail
    ) -> TransactionalEmail | None:
        """The newsletter's welcome email as it reads now, for a subscription still confirmed."""
        found = await _recipient(conn, mail, SubscriptionState.CONFIRMED)
        if found is None:
            return None
        subscriber, newsletter, _ = found
        if not (newsletter.welcome_subject and newsletter.welcome_body):
            _skipped(mail, "no_welcome")  # removed since the confirmation
            return None
        paragraphs = [
            " ".join(paragraph.split())
            for paragraph in newsletter.welcome_body.replace("\r\n", "\n").split("\n\n")
            if paragraph.strip()
        ]
        notice = render_notice(
            subject=newsletter.welcome_subject,
            title=newsletter.welcome_subject,
            paragraphs=paragraphs,
            button_label="Manage your subscriptions",
            button_url=self._ctx.preferences_url(subscriber.id, subscriber.created_at),
            newsletter_name=newsletter.name,
            engine=self._ctx.templates,
            theme=self._ctx.theme,
        )
        return _from_newsletter(subscriber, newsletter, notice)

    async def _sunset(
        self, conn: AsyncConnection, mail: SubscriberMail
    ) -> TransactionalEmail | None:
        """ "Do you still want it?" with a button to the keep page, while the request is open
        and the subscription confirmed; the link is signed for this request."""
        found = await _recipient(conn, mail, SubscriptionState.CONFIRMED)
        if found is None:
            return None
        subscriber, newsletter, _ = found
        request = await sunset_queries.open_request(conn, subscriber.id, newsletter.id)
        if request is None:
            _skipped(mail, "answered")
            return None
        token = tokens.sign(self._ctx.secret(), "sunset", request.id, request.asked_at)
        notice = render_notice(
            subject=f"Do you still want {newsletter.name}?",
            title=f"Do you still want {newsletter.name}?",
            paragraphs=[
                f"It looks like you have not read {newsletter.name} for a while. We only "
                "want to write to people who want to hear from us.",
                "If you would like to keep receiving it, press the button. If we do not hear "
                f"from you within {newsletter.sunset_grace_days} days, we will stop sending "
                "it to you; you can subscribe again at any time.",
            ],
            button_label="Keep me subscribed",
            button_url=f"{self._ctx.public_url}/keep/{token}",
            newsletter_name=newsletter.name,
            engine=self._ctx.templates,
            theme=self._ctx.theme,
        )
        return _from_newsletter(subscriber, newsletter, notice)


def _from_newsletter(
    subscriber: SubscriberRow, newsletter: NewsletterRow, notice: Notice
) -> TransactionalEmail:
    """`notice` to the subscriber, from the newsletter's sender."""
    return TransactionalEmail(
        to=subscriber.email,
        subject=notice.subject,
        text=notice.text,
        html=notice.html,
        sender=newsletter.sender_address,
        sender_name=newsletter.sender_name,
        reply_to=newsletter.reply_to,
    )


async def _recipient(
    conn: AsyncConnection, mail: SubscriberMail, wanted: SubscriptionState
) -> tuple[SubscriberRow, NewsletterRow, SubscriptionRow] | None:
    """The subscriber, newsletter and subscription the mail is about, when the subscription is
    still in the `wanted` state and the address not suppressed; else None (logged)."""
    subscriber = await subscriber_queries.get(conn, mail.subscriber_id)
    newsletter = await newsletter_queries.get_by_id(conn, mail.newsletter_id)
    subscription = await subscription_queries.get(conn, mail.subscriber_id, mail.newsletter_id)
    if subscriber is None or newsletter is None or subscription is None:
        _skipped(mail, "gone")
        return None
    state = subscription_state(subscription.confirmed_at, subscription.unsubscribed_at)
    if state is not wanted:
        _skipped(mail, state.value)
        return None
    if await suppression_queries.is_suppressed(conn, subscriber.email_hash):
        _skipped(mail, "suppressed")
        return None
    return subscriber, newsletter, subscription


def _skipped(mail: SubscriberMail, reason: str) -> None:
    log.info(
        "subscriber_mail.skipped",
        purpose=mail.purpose.value,
        subscriber_id=mail.subscriber_id,
        newsletter_id=mail.newsletter_id,
        reason=reason,
    )
