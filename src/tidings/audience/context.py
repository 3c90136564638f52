"""What every audience use case needs: the database, the clock, the site secret, outbox
writers (email, webhooks, the job queue), the template engine and the public URL for links."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from tidings.domain import tokens
from tidings.domain.clock import Clock
from tidings.outbound.email_jobs import Mailer
from tidings.outbound.webhooks import Webhooks
from tidings.queue.service import JobQueue
from tidings.rendering import DEFAULT_THEME, TemplateEngine, Theme
from tidings.storage.database import Database


@dataclass(frozen=True)
class AudienceContext:
    db: Database
    now: Clock
    secret: Callable[[], str]  # loaded at start-up; read lazily
    mailer: Mailer
    webhooks: Webhooks
    queue: JobQueue
    public_url: str  # no trailing slash
    site_name: str
    confirm_token_ttl_hours: int
    templates: TemplateEngine
    theme: Theme = DEFAULT_THEME  # the configured brand and postal address, for notices
    # The suppression key from outside the database (privacy.suppression_key), if any.
    email_hash_key: Callable[[], str | None] = lambda: None

    def email_hash(self, email_key: str) -> str:
        return tokens.keyed_email_hash(self.secret(), email_key, self.email_hash_key())

    def unsubscribe_token(self, subscription_id: int, created_at: datetime) -> str:
        return tokens.sign(self.secret(), "unsubscribe", subscription_id, created_at)

    def preferences_token(self, subscriber_id: int, created_at: datetime) -> str:
        return tokens.sign(self.secret(), "preferences", subscriber_id, created_at)

    def unsubscribe_url(self, subscription_id: int, created_at: datetime) -> str:
        token = self.unsubscribe_token(subscription_id, created_at)
        return f"{self.public_url}/unsubscribe/{token}"

    def preferences_url(self, subscriber_id: int, created_at: datetime) -> str:
        return f"{self.public_url}/preferences/{self.preferences_token(subscriber_id, created_at)}"

    def confirm_url(self, token: str) -> str:
        return f"{self.public_url}/confirm/{token}"
