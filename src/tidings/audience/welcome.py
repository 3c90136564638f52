"""The welcome email (issue 13): a newsletter's optional message to a person who has just
confirmed — by the emailed link, or by subscribing to a single opt-in newsletter. Never for
imports or admin assertions: those people did nothing just now."""

from __future__ import annotations

from sqlalchemy.ext.asyncio import AsyncConnection

from tidings.audience.context import AudienceContext
from tidings.delivery.email_jobs import TransactionalEmail
from tidings.rendering.notice import render_notice
from tidings.storage.newsletters import NewsletterRow
from tidings.storage.subscribers import SubscriberRow
from tidings.storage.subscriptions import SubscriptionRow


async def queue_welcome(
    context: AudienceContext,
    conn: AsyncConnection,
    subscription: SubscriptionRow,
    owners: tuple[SubscriberRow, NewsletterRow],
) -> None:
    """Queue the newsletter's welcome email, if it has one, in the confirming transaction
    (PRI-6). Keyed by the confirmation's time: two racing confirmations send one welcome, and
    a person who leaves and confirms again later is welcomed again."""
    subscriber, newsletter = owners
    if not (newsletter.welcome_subject and newsletter.welcome_body):
        return
    if subscription.confirmed_at is None:
        return
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
        button_url=context.preferences_url(subscriber.id, subscriber.created_at),
        newsletter_name=newsletter.name,
        engine=context.templates,
        theme=context.theme,
    )
    confirmed = int(subscription.confirmed_at.timestamp() * 1_000_000)
    await context.mailer.queue_in(
        conn,
        TransactionalEmail(
            to=subscriber.email,
            subject=notice.subject,
            text=notice.text,
            html=notice.html,
            sender=newsletter.sender_address,
            sender_name=newsletter.sender_name,
            reply_to=newsletter.reply_to,
        ),
        idempotency_key=f"welcome:{subscription.id}:{confirmed}",
    )
