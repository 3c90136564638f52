"""The worker's handler registry: every job kind and its one handler."""

from __future__ import annotations

import os
import socket
from typing import TYPE_CHECKING

from tidings.audience.consent_requests import REQUEST_CONSENT, ConsentRequestHandler
from tidings.audience.subscriber_mail import SEND_SUBSCRIBER_EMAIL, SubscriberMailHandler
from tidings.campaigns.feeds.jobs import RUN_FEED, SEND_DIGEST
from tidings.campaigns.jobs.finalise_campaign import FinaliseCampaignHandler
from tidings.campaigns.jobs.payloads import (
    DECIDE_AB_TEST,
    FINALISE_CAMPAIGN,
    SEND_BATCH,
    SEND_CAMPAIGN,
)
from tidings.campaigns.jobs.send_batch import SendBatchHandler
from tidings.campaigns.jobs.send_campaign import SendCampaignHandler
from tidings.domain import verp
from tidings.outbound.email_jobs import SEND_EMAIL, EmailJobHandler
from tidings.outbound.webhooks import DELIVER_WEBHOOK, WebhookJobHandler
from tidings.queue.policy import HandlerRegistry

if TYPE_CHECKING:
    from tidings.bootstrap.container import Container


def handler_registry(container: Container) -> HandlerRegistry:
    """Every job kind and its one handler. A second registration of a kind fails here."""
    queue = container.settings.queue
    registry = HandlerRegistry()
    bounce_address = container.settings.inbound.bounce_address
    email_sender = EmailJobHandler(
        container.email_provider(),
        container.clock,
        deadline_seconds=container.settings.email.send_deadline_seconds,
        domain=container.settings.email.from_address.rpartition("@")[2],
        return_path=None
        if bounce_address is None
        else lambda job_id: verp.mail_return_path(bounce_address, container.site_secret(), job_id),
    )
    registry.register(SEND_EMAIL, email_sender, concurrency=queue.email_concurrency)
    registry.register(
        SEND_SUBSCRIBER_EMAIL,
        SubscriberMailHandler(container.audience, email_sender),
        concurrency=queue.email_concurrency,
    )
    registry.register(
        REQUEST_CONSENT,
        ConsentRequestHandler(container.audience),
        concurrency=queue.email_concurrency,
    )
    bulk = container.settings.bulk_email
    # Long jobs: they renew their lease while they work instead of running under a deadline.
    registry.register(
        SEND_CAMPAIGN, SendCampaignHandler(container.sending), concurrency=1, renew_lease=True
    )
    registry.register(
        SEND_BATCH,
        SendBatchHandler(
            container.sending,
            container.submit_strategy(),
            worker=f"{socket.gethostname()}:{os.getpid()}",
            domain_rates=container.domain_rates(),
        ),
        concurrency=bulk.concurrency,
        renew_lease=True,
    )
    registry.register(
        FINALISE_CAMPAIGN,
        FinaliseCampaignHandler(container.sending),
        concurrency=1,
        renew_lease=True,
    )
    registry.register(DECIDE_AB_TEST, container.ab_tests.decide, concurrency=1)
    # Feed reads wait on other servers: a couple at once per worker is plenty.
    registry.register(RUN_FEED, container.feeds.run_job, concurrency=2)
    registry.register(SEND_DIGEST, container.feeds.send_job, concurrency=1)
    registry.register(
        DELIVER_WEBHOOK,
        WebhookJobHandler(container.queue, container.webhook_client, container.clock),
        concurrency=queue.webhook_concurrency,
    )
    return registry
