"""An audience context on a test database, with the test clock and a fixed site secret."""

from __future__ import annotations

from datetime import timedelta

from tests.support.clock import Clock
from tidings.audience.context import AudienceContext
from tidings.bootstrap import queue_policy
from tidings.config import QueueSettings
from tidings.outbound.email_jobs import Mailer
from tidings.outbound.webhooks import Webhooks
from tidings.queue.service import JobQueue
from tidings.rendering import TemplateEngine
from tidings.storage.database import Database

SECRET = "audience-test-secret"


def audience_context(db: Database, clock: Clock) -> AudienceContext:
    queue = JobQueue(db, queue_policy(QueueSettings()), clock)
    return AudienceContext(
        db=db,
        now=clock,
        secret=lambda: SECRET,
        mailer=Mailer(db, queue),
        webhooks=Webhooks(db, queue, clock, rotation_overlap=timedelta(hours=1)),
        queue=queue,
        public_url="https://news.example.org",
        site_name="Tidings test",
        confirm_token_ttl_hours=48,
        templates=TemplateEngine(),
    )
