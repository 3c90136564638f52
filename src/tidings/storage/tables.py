"""Every table, on one MetaData. Migrations must produce exactly these definitions."""

from __future__ import annotations

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    CheckConstraint,
    Column,
    Double,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Table,
    Text,
    UniqueConstraint,
    text,
)
from sqlalchemy.dialects.postgresql import JSONB

from tidings.storage.dialect import UTCDateTime

# 64-bit ids on PostgreSQL; SQLite only auto-increments a column declared INTEGER.
BigId = BigInteger().with_variant(Integer(), "sqlite")
Json = JSON().with_variant(JSONB(), "postgresql")

# The operator roles (UI-2), for accounts and API keys alike.
ROLES = "role IN ('owner', 'editor', 'viewer')"

metadata = MetaData(
    naming_convention={
        "ix": "ix_%(table_name)s_%(column_0_N_name)s",
        "uq": "uq_%(table_name)s_%(column_0_N_name)s",
        "ck": "ck_%(table_name)s_%(constraint_name)s",
        "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
        "pk": "pk_%(table_name)s",
    }
)

api_keys = Table(
    "api_keys",
    metadata,
    Column("id", String(16), primary_key=True, comment="the id part of the key, in clear"),
    Column("name", String(200), nullable=False),
    Column("secret_hash", String(64), nullable=False),
    Column("created_at", UTCDateTime(), nullable=False),
    Column("last_used_at", UTCDateTime(), nullable=True),
    Column("revoked_at", UTCDateTime(), nullable=True),
    Column("role", String(16), nullable=False, server_default="owner"),
    Column(
        "parent_id",
        String(16),
        ForeignKey("api_keys.id"),
        nullable=True,
        comment="the key that minted this one; revoking it revokes this",
    ),
    CheckConstraint(ROLES, name="role"),
)
Index(None, api_keys.c.parent_id)

site_secrets = Table(
    "site_secrets",
    metadata,
    Column("name", String(64), primary_key=True),
    Column("value", Text(), nullable=False),
    Column("created_at", UTCDateTime(), nullable=False),
)

Index(None, api_keys.c.created_at)

jobs = Table(
    "jobs",
    metadata,
    Column("id", BigId, primary_key=True, autoincrement=True),
    Column("kind", String(64), nullable=False),
    Column("idempotency_key", String(255), nullable=False),
    Column("payload", Json, nullable=False),
    Column("status", String(16), nullable=False),
    Column("attempts", Integer, nullable=False, server_default="0"),
    Column("max_attempts", Integer, nullable=False),
    Column("run_at", UTCDateTime(), nullable=False),
    Column("locked_until", UTCDateTime(), nullable=True),
    Column("claim_token", String(32), nullable=True),
    Column("last_error", Text(), nullable=True, comment="codes and class names only, no PII"),
    Column("created_at", UTCDateTime(), nullable=False),
    Column("updated_at", UTCDateTime(), nullable=False),
    Column("finished_at", UTCDateTime(), nullable=True),
    UniqueConstraint("idempotency_key"),
    CheckConstraint("status IN ('pending', 'running', 'done', 'dead')", name="status"),
    CheckConstraint(
        "(status = 'running') = (claim_token IS NOT NULL AND locked_until IS NOT NULL)",
        name="running_has_lease",
    ),
)
# Partial indexes shaped like the queue's queries (DLV-2): the claim reads due pending jobs of
# one kind oldest first, the reaper running jobs by lease, fenced checks running jobs by token.
# Finished rows, most of the table, are in none of them.
_PENDING = text("status = 'pending'")
_RUNNING = text("status = 'running'")
Index(None, jobs.c.kind, jobs.c.run_at, jobs.c.id, postgresql_where=_PENDING, sqlite_where=_PENDING)
Index(None, jobs.c.locked_until, postgresql_where=_RUNNING, sqlite_where=_RUNNING)
Index(None, jobs.c.claim_token, postgresql_where=_RUNNING, sqlite_where=_RUNNING)
Index(None, jobs.c.finished_at)

job_attempts = Table(
    "job_attempts",
    metadata,
    Column("id", BigId, primary_key=True, autoincrement=True),
    Column("job_id", BigId, ForeignKey("jobs.id", ondelete="CASCADE"), nullable=False),
    Column("attempt", Integer, nullable=False),
    Column("started_at", UTCDateTime(), nullable=False),
    Column("finished_at", UTCDateTime(), nullable=False),
    Column("outcome", String(16), nullable=False),
    Column("error", Text(), nullable=True),
    CheckConstraint("outcome IN ('done', 'retry', 'dead')", name="outcome"),
)
Index(None, job_attempts.c.job_id)
Index(None, job_attempts.c.finished_at)

captured_messages = Table(
    "captured_messages",
    metadata,
    Column("id", BigId, primary_key=True, autoincrement=True),
    Column("message_id", String(255), nullable=False),
    Column("sender", String(320), nullable=False),
    Column("recipients", Json, nullable=False),
    Column("subject", Text(), nullable=False),
    Column("raw", LargeBinary(), nullable=False),
    Column("captured_at", UTCDateTime(), nullable=False),
)
Index(None, captured_messages.c.captured_at)

webhook_endpoints = Table(
    "webhook_endpoints",
    metadata,
    Column("id", BigId, primary_key=True, autoincrement=True),
    Column("url", Text(), nullable=False),
    Column("description", String(500), nullable=False, server_default=""),
    Column("event_types", Json, nullable=False),
    Column("enabled", Boolean(), nullable=False),
    Column("disabled_reason", String(200), nullable=True),
    # False: events caused by a CSV import (one per imported row) are not sent here.
    Column("include_imports", Boolean(), nullable=False, server_default="1"),
    # Kept in clear: signing needs the secret itself. Shown once, never returned again.
    Column("secret", String(100), nullable=False),
    Column("previous_secret", String(100), nullable=True),
    Column("previous_secret_expires_at", UTCDateTime(), nullable=True),
    Column("created_at", UTCDateTime(), nullable=False),
    Column("updated_at", UTCDateTime(), nullable=False),
)

webhook_deliveries = Table(
    "webhook_deliveries",
    metadata,
    Column("id", BigId, primary_key=True, autoincrement=True),
    Column(
        "endpoint_id",
        BigId,
        ForeignKey("webhook_endpoints.id", ondelete="CASCADE"),
        nullable=False,
    ),
    Column("event_id", String(64), nullable=False),
    Column("event_type", String(100), nullable=False),
    Column("payload", Json, nullable=False),
    Column("status", String(16), nullable=False),
    Column("attempts", Integer, nullable=False, server_default="0"),
    Column("last_status_code", Integer, nullable=True),
    Column("last_error", String(200), nullable=True),
    Column("response_excerpt", Text(), nullable=True),
    Column("created_at", UTCDateTime(), nullable=False),
    Column("updated_at", UTCDateTime(), nullable=False),
    Column("delivered_at", UTCDateTime(), nullable=True),
    UniqueConstraint("event_id", "endpoint_id"),
    CheckConstraint(
        "status IN ('pending', 'delivered', 'failed', 'gone', 'blocked')", name="status"
    ),
)
Index(None, webhook_deliveries.c.endpoint_id, webhook_deliveries.c.id)

# -- audience (SPEC §4) ------------------------------------------------------------------

newsletters = Table(
    "newsletters",
    metadata,
    Column("id", BigId, primary_key=True, autoincrement=True),
    Column("slug", String(64), nullable=False),
    Column("name", String(200), nullable=False),
    Column("description", Text(), nullable=False, server_default=""),
    Column("sender_name", String(200), nullable=False),
    Column("sender_address", String(320), nullable=False),
    Column("reply_to", String(320), nullable=True),
    Column("double_opt_in", Boolean(), nullable=False, server_default="1"),
    Column("created_at", UTCDateTime(), nullable=False),
    Column("updated_at", UTCDateTime(), nullable=False),
    # An optional welcome email, sent once a person confirms (both set, or neither).
    Column("welcome_subject", String(200), nullable=True),
    Column("welcome_body", Text(), nullable=True),
    # Opt-in public web archive and feed of the sent issues (API-4).
    Column("archive", Boolean(), nullable=False, server_default="0"),
    # Opens and clicks (ENG-1): off (no pixel, no rewritten link), aggregate, per_person;
    # checked by the application (a CHECK would make SQLite rebuild a table others point at).
    Column("tracking", String(16), nullable=False, server_default="off"),
    # The sunset policy (ENG-7), off by default: people tracked per person with no human open
    # or click over `after_days` (and at least `min_sends` tracked campaigns) are asked once
    # whether to stay; no answer in `grace_days` unsubscribes them (reason `inactive`).
    Column("sunset_enabled", Boolean(), nullable=False, server_default="0"),
    Column("sunset_after_days", Integer, nullable=False, server_default="180"),
    Column("sunset_min_sends", Integer, nullable=False, server_default="5"),
    Column("sunset_grace_days", Integer, nullable=False, server_default="30"),
    UniqueConstraint("slug"),
)

subscribers = Table(
    "subscribers",
    metadata,
    Column("id", BigId, primary_key=True, autoincrement=True),
    # Trimmed, domain lower-cased; `email_key` is fully lower-cased and carries the
    # (non-partial) uniqueness, so two spellings of one mailbox are one subscriber (AUD-2).
    Column("email", String(320), nullable=False),
    Column("email_key", String(320), nullable=False),
    # Keyed hash of `email_key`: joins the suppression list, which outlives this row (AUD-8).
    Column("email_hash", String(64), nullable=False),
    Column("name", String(200), nullable=True),
    Column("tier", String(16), nullable=False, server_default="free"),
    Column("attributes", Json, nullable=False),
    Column("created_at", UTCDateTime(), nullable=False),
    Column("updated_at", UTCDateTime(), nullable=False),
    # Consent to per-person open and click tracking (ENG-1): when, and how it was given
    # (signup, preferences, import, api). NULL: not given, or withdrawn.
    Column("tracking_consent_at", UTCDateTime(), nullable=True),
    Column("tracking_consent_source", String(16), nullable=True),
    UniqueConstraint("email_key"),
    CheckConstraint("tier IN ('free', 'paid', 'comped')", name="tier"),
    CheckConstraint("email_key = lower(email_key)", name="email_key_lower"),
)
Index(None, subscribers.c.email_hash)
Index(None, subscribers.c.tier)

labels = Table(
    "labels",
    metadata,
    Column("id", BigId, primary_key=True, autoincrement=True),
    Column("name", String(64), nullable=False),
    Column("created_at", UTCDateTime(), nullable=False),
    UniqueConstraint("name"),
)

subscriber_labels = Table(
    "subscriber_labels",
    metadata,
    Column(
        "subscriber_id",
        BigId,
        ForeignKey("subscribers.id", ondelete="CASCADE"),
        primary_key=True,
    ),
    Column("label_id", BigId, ForeignKey("labels.id", ondelete="CASCADE"), primary_key=True),
)
Index(None, subscriber_labels.c.label_id)

subscriptions = Table(
    "subscriptions",
    metadata,
    Column("id", BigId, primary_key=True, autoincrement=True),
    Column(
        "subscriber_id", BigId, ForeignKey("subscribers.id", ondelete="CASCADE"), nullable=False
    ),
    # RESTRICT: a newsletter with subscriptions cannot be deleted, even by a racing request.
    Column(
        "newsletter_id", BigId, ForeignKey("newsletters.id", ondelete="RESTRICT"), nullable=False
    ),
    Column("source", String(16), nullable=False),
    Column("created_at", UTCDateTime(), nullable=False),
    Column("updated_at", UTCDateTime(), nullable=False),
    Column("confirmed_at", UTCDateTime(), nullable=True),
    # Where consent came from: an IP for a confirmed link, "admin:<key id>" for an assertion.
    Column("consent_evidence", String(200), nullable=True),
    Column("unsubscribed_at", UTCDateTime(), nullable=True),
    Column("unsubscribe_count", Integer, nullable=False, server_default="0"),
    Column("last_unsubscribed_at", UTCDateTime(), nullable=True),
    # The signup form's tracking box was ticked (ENG-1): the consent is recorded on the
    # subscriber only when the person confirms this subscription by their emailed link, since
    # anyone can type someone else's address into a form.
    Column("tracking_consent_asked_at", UTCDateTime(), nullable=True),
    # Not partial: a re-subscribe revives this row, keeping its creation date and history.
    UniqueConstraint("subscriber_id", "newsletter_id"),
    CheckConstraint("source IN ('form', 'api', 'import', 'admin')", name="source"),
    CheckConstraint(
        "unsubscribed_at IS NULL OR (unsubscribe_count >= 1 AND last_unsubscribed_at IS NOT NULL)",
        name="unsubscribed_has_history",
    ),
)
Index(None, subscriptions.c.newsletter_id, subscriptions.c.subscriber_id)

# One row per confirmation link sent (AUD-5, AUD-6): asking again adds a link and leaves the
# earlier ones valid until they expire. Only a hash is kept: the token is a bearer secret, and
# it is minted when the email is rendered for sending, so only the sent mail holds it.
confirmation_tokens = Table(
    "confirmation_tokens",
    metadata,
    Column("token_hash", String(64), primary_key=True),
    Column(
        "subscription_id",
        BigId,
        ForeignKey("subscriptions.id", ondelete="CASCADE"),
        nullable=False,
    ),
    Column("created_at", UTCDateTime(), nullable=False),
    Column("expires_at", UTCDateTime(), nullable=False),
)
Index(None, confirmation_tokens.c.subscription_id)

suppressions = Table(
    "suppressions",
    metadata,
    Column("email_hash", String(64), primary_key=True),
    Column("reason", String(32), nullable=False),
    Column("note", String(500), nullable=True),
    Column("created_by", String(100), nullable=False),
    Column("created_at", UTCDateTime(), nullable=False),
    CheckConstraint(
        "reason IN ('hard_bounce', 'soft_bounce', 'complaint', 'admin', 'unsubscribe_all')",
        name="reason",
    ),
)

suppression_log = Table(
    "suppression_log",
    metadata,
    Column("id", BigId, primary_key=True, autoincrement=True),
    Column("email_hash", String(64), nullable=False),
    Column("action", String(16), nullable=False),
    Column("reason", String(32), nullable=False),
    Column("note", String(500), nullable=True),
    Column("actor", String(100), nullable=False),
    Column("created_at", UTCDateTime(), nullable=False),
    CheckConstraint("action IN ('suppress', 'lift')", name="action"),
)
Index(None, suppression_log.c.email_hash)

rate_limits = Table(
    "rate_limits",
    metadata,
    Column("bucket", String(100), primary_key=True, comment="scope:keyed-hash, never raw PII"),
    Column("window_start", UTCDateTime(), primary_key=True),
    Column("hits", Integer, nullable=False),
)
Index(None, rate_limits.c.window_start)

# One row per provider, shared by every worker (PRV-5): GCRA's theoretical arrival time and the
# end of a cool-down, both in seconds since the Unix epoch on the database's clock.
send_rates = Table(
    "send_rates",
    metadata,
    Column("provider", String(64), primary_key=True),
    Column("theoretical_arrival", Double(), nullable=False),
    Column("cooldown_until", Double(), nullable=False),
)

# -- campaigns (SPEC §5) -------------------------------------------------------------------

campaigns = Table(
    "campaigns",
    metadata,
    Column("id", BigId, primary_key=True, autoincrement=True),
    Column(
        "newsletter_id", BigId, ForeignKey("newsletters.id", ondelete="RESTRICT"), nullable=False
    ),
    Column("status", String(16), nullable=False),
    Column("subject", String(998), nullable=False),
    Column("preheader", String(500), nullable=False, server_default=""),
    Column("body", Text(), nullable=False),
    Column("body_format", String(16), nullable=False),
    Column("audience_filter", String(500), nullable=False, server_default=""),
    Column("sender_name", String(200), nullable=True),
    Column("reply_to", String(320), nullable=True),
    Column("scheduled_at", UTCDateTime(), nullable=True),
    Column("created_at", UTCDateTime(), nullable=False),
    Column("updated_at", UTCDateTime(), nullable=False),
    # In the newsletter's public archive and feeds (API-4): off by default for a filtered
    # audience, so an issue for paid readers is never published without the operator's say.
    Column("archive_public", Boolean(), nullable=False, server_default="0"),
    CheckConstraint(
        "status IN ('draft', 'scheduled', 'pending', 'submitting', 'paused', 'submitted', "
        "'failed', 'cancelled')",
        name="status",
    ),
    CheckConstraint("body_format IN ('markdown', 'html')", name="body_format"),
)
Index(None, campaigns.c.newsletter_id, campaigns.c.id)

# -- sending (SPEC §5.2-5.5) ---------------------------------------------------------------
# The campaign row carries the send's lifecycle; batches are pages of the frozen audience;
# recipients are one row per (campaign, subscriber) with a state. Counts are verified against
# rows, never trusted (PRI-1).

campaign_sends = Table(
    "campaign_sends",
    metadata,
    Column("campaign_id", BigId, ForeignKey("campaigns.id", ondelete="CASCADE"), primary_key=True),
    Column("attempt", Integer, nullable=False, server_default="1"),
    Column("attempt_started_at", UTCDateTime(), nullable=False),
    # The consent-filtered audience size when the send was asked for (SND-1).
    Column("preflight_email_count", Integer, nullable=False),
    # The status lock (SND-2): the claim token of the job holding it. Free when no running
    # job holds that token under a live lease.
    Column("lock_token", String(32), nullable=True),
    Column("candidate_count", Integer, nullable=True),
    Column("preparation_excluded_count", Integer, nullable=True),
    Column("prepared_at", UTCDateTime(), nullable=True),
    Column("email_count", Integer, nullable=True, comment="verified submitted total"),
    Column("excluded_count", Integer, nullable=True),
    Column("failed_count", Integer, nullable=True),
    Column("uncertain_count", Integer, nullable=True),
    Column("cancelled_count", Integer, nullable=True, comment="never handed over (SND-23)"),
    Column("finished_at", UTCDateTime(), nullable=True),
    Column("failed_during", String(16), nullable=True),
    Column("error_code", String(64), nullable=True),
    Column("error", Text(), nullable=True, comment="the admin-facing message; no personal data"),
    Column("retryable", Boolean(), nullable=True),
    Column("created_at", UTCDateTime(), nullable=False),
    Column("updated_at", UTCDateTime(), nullable=False),
    # The newsletter's tracking mode (ENG-1) frozen with the snapshot at `prepared_at`: every
    # batch renders under it, and send again asks it. NULL for sends prepared before 0034.
    Column("tracking", String(16), nullable=True, comment="off, aggregate or per_person"),
    CheckConstraint("failed_during IN ('preparing', 'submitting')", name="failed_during"),
    CheckConstraint("tracking IN ('off', 'aggregate', 'per_person')", name="tracking"),
    CheckConstraint(
        "email_count >= 0 AND excluded_count >= 0 AND failed_count >= 0 AND uncertain_count >= 0"
        " AND (candidate_count IS NULL OR COALESCE(email_count, 0) + COALESCE(excluded_count, 0)"
        " + COALESCE(failed_count, 0) + COALESCE(uncertain_count, 0) <= candidate_count)",
        name="counts_within_candidates",
    ),
)

# The audience selected in one statement (SND-3): positions in segment order. Transient:
# rebuilt by an attempt that finds no `prepared_at`, dropped once preparation is verified.
campaign_candidates = Table(
    "campaign_candidates",
    metadata,
    Column("campaign_id", BigId, primary_key=True, autoincrement=False),
    Column("position", Integer, primary_key=True, autoincrement=False),
    Column("subscriber_id", BigId, nullable=False),
    Column("segment", String(16), nullable=False),
)

campaign_batches = Table(
    "campaign_batches",
    metadata,
    Column("id", BigId, primary_key=True, autoincrement=True),
    Column("campaign_id", BigId, ForeignKey("campaigns.id", ondelete="CASCADE"), nullable=False),
    Column("page", Integer, nullable=False, comment="the page of the candidate list"),
    Column("segment", String(16), nullable=False),
    Column("sending_domain", String(255), nullable=False),
    Column("first_position", Integer, nullable=False),
    Column("last_position", Integer, nullable=False),
    Column("status", String(16), nullable=False),
    Column("recipient_count", Integer, nullable=False),
    Column("submitted_count", Integer, nullable=True),
    Column("submission_excluded_count", Integer, nullable=True),
    Column("failed_count", Integer, nullable=True),
    Column("uncertain_count", Integer, nullable=True),
    Column("provider_message_id", String(255), nullable=True),
    Column("claim_token", String(32), nullable=True),
    Column("claimed_at", UTCDateTime(), nullable=True),
    Column("claimed_by", String(100), nullable=True, comment="host:pid of the worker"),
    # Batch providers: set (under the claim) just before the one call, cleared when the call
    # certainly failed. A claim taken over with it set means the call may have gone out.
    Column(
        "handed_over_at",
        UTCDateTime(),
        nullable=True,
        comment="a batch call may have reached the provider from here on",
    ),
    Column("error_code", String(64), nullable=True),
    Column("error", Text(), nullable=True),
    Column("created_at", UTCDateTime(), nullable=False),
    Column("updated_at", UTCDateTime(), nullable=False),
    Column("finished_at", UTCDateTime(), nullable=True),
    UniqueConstraint("campaign_id", "page"),
    CheckConstraint(
        "status IN ('pending', 'submitting', 'submitted', 'failed', 'cancelled')", name="status"
    ),
    CheckConstraint(
        "status <> 'submitting' OR claim_token IS NOT NULL", name="submitting_has_claim"
    ),
    CheckConstraint("recipient_count >= 0", name="recipient_count"),
    # No code path can write an impossible total (newsletter-backend §4.2; migration 0015).
    CheckConstraint(
        "submitted_count >= 0 AND submission_excluded_count >= 0 AND failed_count >= 0"
        " AND uncertain_count >= 0"
        " AND COALESCE(submitted_count, 0) + COALESCE(submission_excluded_count, 0)"
        " + COALESCE(failed_count, 0) + COALESCE(uncertain_count, 0) <= recipient_count",
        name="counts_within_recipients",
    ),
)
Index(None, campaign_batches.c.campaign_id, campaign_batches.c.status)

# A campaign's A/B test (ENG-8): variants 2.. of one field (variant 1 is the campaign's own),
# the share of the audience tested, the wait and the metric; then, once, the decision and its
# figures. Test recipients' batches carry the segment `<tier>-v<n>`, the remainder the tier.
campaign_ab_tests = Table(
    "campaign_ab_tests",
    metadata,
    Column("campaign_id", BigId, ForeignKey("campaigns.id", ondelete="CASCADE"), primary_key=True),
    Column("field", String(16), nullable=False),
    Column("alternatives", Json, nullable=False, comment="variants 2.., in order"),
    Column("test_share", Integer, nullable=False, comment="percent of the audience"),
    Column("wait_seconds", Integer, nullable=False),
    Column("metric", String(8), nullable=False),
    Column("test_started_at", UTCDateTime(), nullable=True, comment="its batches dispatched"),
    Column("decided_at", UTCDateTime(), nullable=True),
    Column("winner", Integer, nullable=True),
    Column("decided_by", String(16), nullable=True),
    Column("figures", Json, nullable=True, comment="per variant, and the rule applied"),
    CheckConstraint("field IN ('subject', 'preheader', 'sender_name')", name="field"),
    CheckConstraint("metric IN ('clicks', 'opens')", name="metric"),
    CheckConstraint("test_share BETWEEN 1 AND 90", name="test_share"),
    CheckConstraint("wait_seconds > 0", name="wait_seconds"),
    CheckConstraint("decided_by IN ('automatic', 'operator')", name="decided_by"),
    CheckConstraint(
        "(decided_at IS NULL) = (winner IS NULL) AND (winner IS NULL) = (decided_by IS NULL)",
        name="decision_whole",
    ),
)

# Send again (ENG-7): a campaign made from a sent one's recipients (those who did not open,
# did not click, were not delivered, or all who got it), with who was chosen and left out, and
# why; its audience frozen at creation. Preparation selects only these people, and AUD-4's
# consent rule still removes whoever is no longer mailable at send time.
campaign_resends = Table(
    "campaign_resends",
    metadata,
    Column("campaign_id", BigId, ForeignKey("campaigns.id", ondelete="CASCADE"), primary_key=True),
    Column("origin_id", BigId, ForeignKey("campaigns.id", ondelete="RESTRICT"), nullable=False),
    Column("audience", String(16), nullable=False),
    Column("chosen_count", Integer, nullable=False, comment="frozen at creation"),
    Column("left_out", Json, nullable=False, comment="{reason: count}"),
    Column("created_at", UTCDateTime(), nullable=False),
    CheckConstraint(
        "audience IN ('not_opened', 'not_clicked', 'not_delivered', 'all')", name="audience"
    ),
    CheckConstraint("campaign_id <> origin_id", name="not_itself"),
)
Index(None, campaign_resends.c.origin_id)

campaign_frozen_audience = Table(
    "campaign_frozen_audience",
    metadata,
    Column(
        "campaign_id",
        BigId,
        ForeignKey("campaign_resends.campaign_id", ondelete="CASCADE"),
        primary_key=True,
    ),
    Column(
        "subscriber_id", BigId, ForeignKey("subscribers.id", ondelete="CASCADE"), primary_key=True
    ),
)
Index(None, campaign_frozen_audience.c.subscriber_id)

# A recipient row is written at preparation and changed about twice afterwards (its outcome,
# then what the provider reports): a page kept half free holds those versions beside it
# (`tidings bench send`, batch HTTP: WAL per recipient 974 bytes with full pages, 816 at 70,
# 596 at 50, and the database grew less, 411 bytes per recipient against 442).
RECIPIENT_FILLFACTOR = 50

campaign_recipients = Table(
    "campaign_recipients",
    metadata,
    Column("id", BigId, primary_key=True, autoincrement=True),
    Column("campaign_id", BigId, ForeignKey("campaigns.id", ondelete="CASCADE"), nullable=False),
    # NULL for an exclusion made during preparation (it never joined a batch).
    Column("batch_id", BigId, ForeignKey("campaign_batches.id", ondelete="CASCADE"), nullable=True),
    # SET NULL: a privacy delete leaves an anonymous row, so the counts stay verifiable.
    Column(
        "subscriber_id", BigId, ForeignKey("subscribers.id", ondelete="SET NULL"), nullable=True
    ),
    Column("position", Integer, nullable=False),
    Column("state", String(16), nullable=False),
    Column("reason", String(64), nullable=True, comment="a code, never provider text"),
    Column("updated_at", UTCDateTime(), nullable=False),
    # What the provider or the mailbox reported afterwards (PRV-6, SND-27). Each column only
    # moves one way, so events arriving twice or out of order leave the same row.
    Column("delivered_at", UTCDateTime(), nullable=True),
    Column("bounced_at", UTCDateTime(), nullable=True),
    Column("bounce_kind", String(8), nullable=True),
    Column("bounce_code", String(32), nullable=True, comment="e.g. 550 or 5.1.1, no text"),
    Column("complained_at", UTCDateTime(), nullable=True),
    Column("unsubscribed_at", UTCDateTime(), nullable=True, comment="through this campaign"),
    UniqueConstraint("campaign_id", "subscriber_id"),
    CheckConstraint(
        "state IN ('pending', 'sending', 'sent', 'failed', 'excluded', 'uncertain', 'cancelled')",
        name="state",
    ),
    CheckConstraint("bounce_kind IN ('hard', 'soft')", name="bounce_kind"),
    CheckConstraint("batch_id IS NOT NULL OR state = 'excluded'", name="unbatched_is_excluded"),
    # Room on each page for a row's next version: see RECIPIENT_FILLFACTOR.
    postgresql_with={"fillfactor": RECIPIENT_FILLFACTOR},
)
# No index names `state` (nor any column an outcome or an event changes): an update that
# touches no indexed column and finds room on its page is a heap-only tuple on PostgreSQL,
# written once with no index entries, where each state change used to add one to each of
# five indexes. A batch's rows are found by batch_id, a campaign's by the unique
# (campaign_id, subscriber_id), and the state is filtered on those rows.
Index(None, campaign_recipients.c.batch_id)
Index(None, campaign_recipients.c.subscriber_id)

# Transactional mail's outcomes (PRV-6): each mail job's Message-ID (its local part: a digest
# of the job's idempotency key, unique), so a provider event or a bounce about it lands on it.
# Columns move one way, as a recipient's do.
transactional_messages = Table(
    "transactional_messages",
    metadata,
    Column("id", BigId, primary_key=True, autoincrement=True),
    Column("job_id", BigId, ForeignKey("jobs.id", ondelete="CASCADE"), nullable=False),
    Column("message_key", String(255), nullable=False, comment="the Message-ID's local part"),
    Column("created_at", UTCDateTime(), nullable=False),
    Column("delivered_at", UTCDateTime(), nullable=True),
    Column("bounced_at", UTCDateTime(), nullable=True),
    Column("bounce_kind", String(8), nullable=True),
    Column("bounce_code", String(32), nullable=True, comment="e.g. 550 or 5.1.1, no text"),
    Column("complained_at", UTCDateTime(), nullable=True),
    UniqueConstraint("message_key"),
    UniqueConstraint("job_id"),
    CheckConstraint("bounce_kind IN ('hard', 'soft')", name="bounce_kind"),
)

# Every operator intervention in a send (SND-13, SND-19): who retried, reconciled or resent,
# when, why, and how many recipients it moved. Kept with the campaign; never rewritten.
campaign_feedback_counts = Table(
    "campaign_feedback_counts",
    metadata,
    # The auto-pause watch (SND-24): hard bounces and complaints heard for a campaign's
    # recipients, each counted once, and the figures at the operator's last resume after an
    # auto-pause (thresholds apply to what happened since).
    Column("campaign_id", BigId, ForeignKey("campaigns.id", ondelete="CASCADE"), primary_key=True),
    Column("hard_bounced", Integer, nullable=False, server_default="0"),
    Column("complained", Integer, nullable=False, server_default="0"),
    Column("baseline_sent", Integer, nullable=False, server_default="0"),
    Column("baseline_hard_bounced", Integer, nullable=False, server_default="0"),
    Column("baseline_complained", Integer, nullable=False, server_default="0"),
    Column("auto_paused_at", UTCDateTime(), nullable=True),
    Column("auto_pause_reason", String(200), nullable=True, comment="figures only, no address"),
)

domain_send_rates = Table(
    "domain_send_rates",
    metadata,
    # Per recipient domain (SND-25), like send_rates per provider: a GCRA arrival time on the
    # database's clock, and how far a 421/451 slowed the domain down, and when.
    Column("domain", String(255), primary_key=True),
    Column("theoretical_arrival", Double(), nullable=False),
    Column("halvings", Integer, nullable=False, server_default="0"),
    Column("slowed_at", Double(), nullable=False, server_default="0"),
)

send_interventions = Table(
    "send_interventions",
    metadata,
    Column("id", BigId, primary_key=True, autoincrement=True),
    Column("campaign_id", BigId, ForeignKey("campaigns.id", ondelete="CASCADE"), nullable=False),
    Column("action", String(16), nullable=False),
    Column("batch_id", BigId, nullable=True, comment="the batch reconciled"),
    Column(
        "outcome",
        String(16),
        nullable=True,
        comment="reconcile: submitted|failed; resend: the state",
    ),
    Column("recipient_count", Integer, nullable=False, comment="recipients it moved"),
    Column("attempt", Integer, nullable=True, comment="the attempt it started, if any"),
    Column("note", String(500), nullable=True),
    Column("actor", String(100), nullable=False, comment="an API key id, or cli:<login>"),
    Column("created_at", UTCDateTime(), nullable=False),
    CheckConstraint(
        "action IN ('retry', 'reconcile', 'resend', 'pause', 'resume', 'cancel')", name="action"
    ),
)
Index(None, send_interventions.c.campaign_id, send_interventions.c.id)

# Admin UI accounts (UI-1): one row per operator, the password as an argon2id hash only.
admin_accounts = Table(
    "admin_accounts",
    metadata,
    Column("id", BigId, primary_key=True, autoincrement=True),
    Column("email", String(320), nullable=False, comment="lower-cased sign-in name"),
    Column("password_hash", String(255), nullable=False, comment="argon2id, PHC string"),
    Column("created_at", UTCDateTime(), nullable=False),
    Column("last_sign_in_at", UTCDateTime(), nullable=True),
    Column("role", String(16), nullable=False, server_default="owner"),
    Column("disabled_at", UTCDateTime(), nullable=True),
    Column("password_changed_at", UTCDateTime(), nullable=True),
    Column(
        "totp_secret", String(64), nullable=True, comment="base32 TOTP secret, set at enrolment"
    ),
    Column("totp_enabled_at", UTCDateTime(), nullable=True),
    Column(
        "totp_last_step",
        BigInteger(),
        nullable=True,
        comment="the last TOTP time step used: a code is accepted once",
    ),
    UniqueConstraint("email"),
    CheckConstraint(ROLES, name="role"),
)

# Server-side admin sessions: the cookie carries a random token, the table its SHA-256 only,
# so a copy of the database signs nobody in. Deleting the rows signs the operator out.
admin_sessions = Table(
    "admin_sessions",
    metadata,
    Column("token_hash", String(64), primary_key=True),
    Column("admin_id", BigId, ForeignKey("admin_accounts.id", ondelete="CASCADE"), nullable=False),
    Column("csrf_token", String(64), nullable=False, comment="per-session form token"),
    Column("created_at", UTCDateTime(), nullable=False),
    Column("last_seen_at", UTCDateTime(), nullable=False),
)
Index(None, admin_sessions.c.admin_id)

# One-time recovery codes for operators with two-factor sign-in: SHA-256 of each, never clear.
admin_recovery_codes = Table(
    "admin_recovery_codes",
    metadata,
    Column("id", BigId, primary_key=True, autoincrement=True),
    Column("admin_id", BigId, ForeignKey("admin_accounts.id", ondelete="CASCADE"), nullable=False),
    Column("code_hash", String(64), nullable=False, comment="SHA-256 of the code"),
    Column("used_at", UTCDateTime(), nullable=True),
)
Index(None, admin_recovery_codes.c.admin_id)

# Who did what, when, from where (UI-2): operators, API keys and the command line.
audit_log = Table(
    "audit_log",
    metadata,
    Column("id", BigId, primary_key=True, autoincrement=True),
    Column("occurred_at", UTCDateTime(), nullable=False),
    Column("actor", String(100), nullable=False, comment="admin:<id>, key:<id>, cli:<login>"),
    Column("action", String(64), nullable=False),
    Column("target", String(200), nullable=True),
    Column("client_ip", String(64), nullable=True),
    Column("detail", Json, nullable=True),
    Column(
        "occurrences",
        Integer,
        nullable=False,
        server_default="1",
        comment="repeats folded into this entry (failed sign-ins, one row per target and hour)",
    ),
    Column("last_occurred_at", UTCDateTime(), nullable=True, comment="the latest repeat"),
)
Index(None, audit_log.c.occurred_at)
Index(None, audit_log.c.action)

# Recent failed sign-ins per scope (UI-2): an account from new devices, an address over every
# account, one known device of an account. Keyed hashes only; a scope's count is forgotten a
# window after its last failure. The delay before the next attempt grows with the count.
sign_in_failures = Table(
    "sign_in_failures",
    metadata,
    Column("bucket", String(100), primary_key=True, comment="scope:keyed-hash, never raw PII"),
    Column("failures", Integer, nullable=False),
    Column("last_failed_at", UTCDateTime(), nullable=False),
)
Index(None, sign_in_failures.c.last_failed_at)
# -- hearing back (SPEC PRV-6, AUD-13) ------------------------------------------------------

# Every event a provider, a bridge or a mailbox reported, as received: the dedupe (one row per
# source and event id: a repeat changes nothing) and the replay guard (a signature token is
# accepted once). Kept `inbound.retention_days`; unparsed ones hold their raw body for the
# operator. `email_hash` lets a privacy delete find the rows about one person.
INBOUND_STATUSES = ("applied", "unmatched", "unparsed", "ignored", "unverified")
inbound_events = Table(
    "inbound_events",
    metadata,
    Column("id", BigId, primary_key=True, autoincrement=True),
    Column("source", String(32), nullable=False, comment="mailgun, ses, api or smtp"),
    Column("event_key", String(255), nullable=False, comment="the provider's event id"),
    Column("token", String(255), nullable=True, comment="the signature token, seen once"),
    Column("kind", String(16), nullable=True),
    Column("status", String(16), nullable=False),
    Column("email_hash", String(64), nullable=True),
    Column("campaign_id", BigId, nullable=True),
    Column("recipient_id", BigId, nullable=True),
    Column("occurred_at", UTCDateTime(), nullable=True),
    Column("code", String(32), nullable=True),
    Column("diagnostic", Text(), nullable=True, comment="stored for the operator, never logged"),
    Column("payload", Text(), nullable=True, comment="the raw body of an unparsed event"),
    Column("received_at", UTCDateTime(), nullable=False),
    # An unverified report (PRV-6) waits for the operator: applied or discarded, by whom.
    Column("reviewed", String(16), nullable=True),
    Column("reviewed_at", UTCDateTime(), nullable=True),
    Column("reviewed_by", String(100), nullable=True, comment="an audit actor label"),
    UniqueConstraint("source", "event_key"),
    UniqueConstraint("source", "token"),
    CheckConstraint(f"status IN {INBOUND_STATUSES!r}", name="status"),
    CheckConstraint("reviewed IS NULL OR reviewed IN ('applied', 'discarded')", name="reviewed"),
)
Index(None, inbound_events.c.received_at)
Index(None, inbound_events.c.email_hash)
Index(None, inbound_events.c.status, inbound_events.c.id)
Index(None, inbound_events.c.campaign_id, inbound_events.c.occurred_at)

# Per address (keyed hash), what the bounce policy decides from (domain/feedback.py).
address_feedback = Table(
    "address_feedback",
    metadata,
    Column("email_hash", String(64), primary_key=True),
    Column("soft_bounces", Json, nullable=False, comment="[[occurred_at, event key], ...]"),
    Column("last_delivered_at", UTCDateTime(), nullable=True),
    Column("hard_bounced_at", UTCDateTime(), nullable=True),
    Column("complained_at", UTCDateTime(), nullable=True),
    Column("updated_at", UTCDateTime(), nullable=False),
)

# The person's history of what was heard and decided (AUD-13): shown on their admin page and
# in the privacy export; a privacy delete removes it (the suppression's keyed hash stays).
address_history = Table(
    "address_history",
    metadata,
    Column("id", BigId, primary_key=True, autoincrement=True),
    Column("email_hash", String(64), nullable=False),
    Column("event", String(16), nullable=False),
    Column("decision", String(32), nullable=False),
    Column("source", String(32), nullable=False),
    Column("campaign_id", BigId, nullable=True),
    Column("code", String(32), nullable=True),
    Column("diagnostic", Text(), nullable=True),
    Column("occurred_at", UTCDateTime(), nullable=False),
    Column("created_at", UTCDateTime(), nullable=False),
)
Index(None, address_history.c.email_hash, address_history.c.id)

# -- engagement (SPEC §5.9) ------------------------------------------------------------------
# Links rewritten at render time (ENG-2), hits as they arrive (ENG-3), and the counters the
# results are read from (ENG-5). Nothing here holds an IP address or a full user agent (ENG-4);
# only `engagement_person_hits` names a person, and only for consented subscribers (ENG-1, 6).

# One row per tracked link of a campaign's segment, numbered in order of appearance; number 0
# is the segment's open pixel (url empty). A token names (campaign, segment, number), never a
# URL, so no token can redirect anywhere but here (no open redirect).
campaign_links = Table(
    "campaign_links",
    metadata,
    Column("id", BigId, primary_key=True, autoincrement=True),
    Column("campaign_id", BigId, ForeignKey("campaigns.id", ondelete="CASCADE"), nullable=False),
    Column("segment", String(64), nullable=False),
    Column("number", Integer, nullable=False),
    Column("url", Text(), nullable=False),
    # A link no person sees (hidden in the HTML): whoever follows it is a machine (ENG-4).
    Column("hidden", Boolean(), nullable=False, server_default="0"),
    Column("created_at", UTCDateTime(), nullable=False),
    UniqueConstraint("campaign_id", "segment", "number"),
    CheckConstraint("number >= 0", name="number"),
)

# Hits as received: appended by the public endpoints in group commits, applied to the counters
# in set-based batches by the `apply_engagement` job and then deleted. `message_key` is the
# random per-message value of the token: stored nowhere beside the recipient. `recipient_id`
# is set only for a per_person token. No foreign keys: a hit for a campaign deleted meanwhile
# is dropped when applied.
engagement_intake = Table(
    "engagement_intake",
    metadata,
    Column("id", BigId, primary_key=True, autoincrement=True),
    Column("received_at", UTCDateTime(), nullable=False),
    Column("campaign_id", BigInteger, nullable=False),
    Column("segment", String(64), nullable=False),
    Column("number", Integer, nullable=False),
    Column("kind", String(8), nullable=False),
    Column("message_key", String(32), nullable=False),
    Column("recipient_id", BigInteger, nullable=True),
    Column("sent_at", UTCDateTime(), nullable=True, comment="when the message was handed over"),
    Column("verdict", String(8), nullable=False),
    Column("reason", String(32), nullable=False),
    Column("client_family", String(32), nullable=False),
    CheckConstraint("kind IN ('open', 'click')", name="kind"),
    CheckConstraint("verdict IN ('human', 'machine')", name="verdict"),
)

# The first human hit of each (message, link, kind): what makes unique counts count a message
# once, however often its hits are replayed. Number 0 is the segment as a whole (any link for
# clicks, the pixel for opens).
engagement_firsts = Table(
    "engagement_firsts",
    metadata,
    Column("campaign_id", BigId, ForeignKey("campaigns.id", ondelete="CASCADE"), primary_key=True),
    Column("segment", String(64), primary_key=True),
    Column("number", Integer, primary_key=True),
    Column("kind", String(8), primary_key=True),
    Column("message_key", String(32), primary_key=True),
)

# The counters results are read from (ENG-5): per campaign, segment, link (0: the segment as a
# whole), kind and hour. Reading a campaign's results is O(links x hours), never a scan of hits.
engagement_counters = Table(
    "engagement_counters",
    metadata,
    Column("campaign_id", BigId, ForeignKey("campaigns.id", ondelete="CASCADE"), primary_key=True),
    Column("segment", String(64), primary_key=True),
    Column("number", Integer, primary_key=True),
    Column("kind", String(8), primary_key=True),
    Column("hour", UTCDateTime(), primary_key=True),
    Column("human_unique", Integer, nullable=False, server_default="0"),
    Column("human_total", Integer, nullable=False, server_default="0"),
    Column("machine_total", Integer, nullable=False, server_default="0"),
)

# A consented subscriber's hits (ENG-6, per_person only): their activity, in the privacy export,
# gone with a privacy delete (CASCADE) or after tracking.retention_days (the counters above
# already hold them, so that fold loses no figure).
engagement_person_hits = Table(
    "engagement_person_hits",
    metadata,
    Column("id", BigId, primary_key=True, autoincrement=True),
    Column("campaign_id", BigId, ForeignKey("campaigns.id", ondelete="CASCADE"), nullable=False),
    Column(
        "subscriber_id", BigId, ForeignKey("subscribers.id", ondelete="CASCADE"), nullable=False
    ),
    Column("segment", String(64), nullable=False),
    Column("number", Integer, nullable=False),
    Column("kind", String(8), nullable=False),
    Column("verdict", String(8), nullable=False),
    Column("reason", String(32), nullable=False),
    Column("client_family", String(32), nullable=False),
    Column("at", UTCDateTime(), nullable=False),
    CheckConstraint("kind IN ('open', 'click')", name="kind"),
    CheckConstraint("verdict IN ('human', 'machine')", name="verdict"),
)
Index(None, engagement_person_hits.c.subscriber_id, engagement_person_hits.c.at)
Index(None, engagement_person_hits.c.campaign_id)
Index(None, engagement_person_hits.c.at)

# A large campaign's outcome counts (SND-27), counted from its recipient rows by the workers
# and read by its page: {segment: {sent, delivered, ...}} and [[hour, kind, events], ...].
campaign_outcome_counts = Table(
    "campaign_outcome_counts",
    metadata,
    Column("campaign_id", BigId, ForeignKey("campaigns.id", ondelete="CASCADE"), primary_key=True),
    Column("segments", Json, nullable=False),
    Column("hourly", Json, nullable=False),
    Column("counted_at", UTCDateTime(), nullable=False),
    Column("took_ms", Integer, nullable=False),
)

# `subscriber.engaged` goes out at most once per person per campaign (per_person only).
engagement_notices = Table(
    "engagement_notices",
    metadata,
    Column("campaign_id", BigId, ForeignKey("campaigns.id", ondelete="CASCADE"), primary_key=True),
    Column(
        "subscriber_id",
        BigId,
        ForeignKey("subscribers.id", ondelete="CASCADE"),
        primary_key=True,
    ),
    Column("at", UTCDateTime(), nullable=False),
)

# The sunset policy's re-permission requests (ENG-7): one per subscription and inactivity
# period (the unique constraint, not a check, keeps a person from being asked twice in one),
# written in the transaction that queues the email. `outcome`: kept (the button), engaged (a
# human open or click since), unsubscribed (no answer in the grace period: reason inactive),
# gone (left or suppressed meanwhile). Kept as the person's history.
sunset_requests = Table(
    "sunset_requests",
    metadata,
    Column("id", BigId, primary_key=True, autoincrement=True),
    Column(
        "subscription_id",
        BigId,
        ForeignKey("subscriptions.id", ondelete="CASCADE"),
        nullable=False,
    ),
    Column(
        "newsletter_id", BigId, ForeignKey("newsletters.id", ondelete="CASCADE"), nullable=False
    ),
    Column(
        "subscriber_id", BigId, ForeignKey("subscribers.id", ondelete="CASCADE"), nullable=False
    ),
    Column("period", Integer, nullable=False, comment="days since 1970 // after_days, at asking"),
    Column("asked_at", UTCDateTime(), nullable=False),
    Column("outcome", String(16), nullable=True),
    Column("resolved_at", UTCDateTime(), nullable=True),
    UniqueConstraint("subscription_id", "period"),
    CheckConstraint("outcome IN ('kept', 'engaged', 'unsubscribed', 'gone')", name="outcome"),
)
Index(None, sunset_requests.c.newsletter_id, sunset_requests.c.outcome, sunset_requests.c.asked_at)
Index(None, sunset_requests.c.subscriber_id)

# -- feed-to-email (AUT-2) ------------------------------------------------------------------
# A newsletter follows at most one feed: where, on which schedule (text, read in the site's
# zone), and whether its digest waits as a draft or is sent. The row also keeps the feed's
# conditional-request validators and the state an operator needs: last success, last error
# (safe to show: never the body), consecutive failures and when it is read next.
newsletter_feeds = Table(
    "newsletter_feeds",
    metadata,
    Column(
        "newsletter_id",
        BigId,
        ForeignKey("newsletters.id", ondelete="CASCADE"),
        primary_key=True,
        autoincrement=False,
    ),
    Column("url", String(2000), nullable=False),
    Column("schedule", String(100), nullable=False),
    Column("mode", String(8), nullable=False),
    # Items dated before this are not news: following a feed does not mail its back catalogue.
    Column("followed_at", UTCDateTime(), nullable=False),
    Column("etag", String(500), nullable=True),
    Column("last_modified", String(100), nullable=True),
    Column("next_run_at", UTCDateTime(), nullable=False),
    Column("last_run_at", UTCDateTime(), nullable=True),
    Column("last_success_at", UTCDateTime(), nullable=True),
    Column("last_error", String(500), nullable=True),
    Column("failures", Integer, nullable=False, server_default="0"),
    Column(
        "last_campaign_id", BigId, ForeignKey("campaigns.id", ondelete="SET NULL"), nullable=True
    ),
    Column("created_at", UTCDateTime(), nullable=False),
    Column("updated_at", UTCDateTime(), nullable=False),
    CheckConstraint("mode IN ('draft', 'send')", name="mode"),
)
Index(None, newsletter_feeds.c.next_run_at)

# Every item a digest took, one row per (newsletter, item): the unique key is the whole
# never-twice guarantee. Rows are written in the transaction that creates the digest
# campaign, so both exist or neither; they outlive the feed's configuration (following it
# again sends nothing already sent) and the draft (deleting it does not put items back).
feed_items = Table(
    "feed_items",
    metadata,
    Column("id", BigId, primary_key=True, autoincrement=True),
    Column(
        "newsletter_id", BigId, ForeignKey("newsletters.id", ondelete="CASCADE"), nullable=False
    ),
    Column("key_hash", String(64), nullable=False, comment="sha256 of the guid, else the link"),
    Column("item_key", String(2000), nullable=False),
    Column("title", String(500), nullable=False, server_default=""),
    Column("link", String(2000), nullable=True),
    Column("campaign_id", BigId, ForeignKey("campaigns.id", ondelete="SET NULL"), nullable=True),
    Column("recorded_at", UTCDateTime(), nullable=False),
    UniqueConstraint("newsletter_id", "key_hash"),
)
Index(None, feed_items.c.campaign_id)

# The media library (CMP-6): one row per distinct upload (`source_sha256`, so the same file
# uploaded twice is stored once). The files themselves live in the media store (a directory),
# named by the hash of their own bytes: `file_1x` at most the layout's content width, `file_2x`
# at most twice it (the same file when the original is no wider).
media = Table(
    "media",
    metadata,
    Column("id", BigId, primary_key=True, autoincrement=True),
    Column("source_sha256", String(64), nullable=False, comment="of the bytes uploaded"),
    Column("filename", String(255), nullable=False, comment="the upload's own name, shown"),
    Column("alt", String(500), nullable=False),
    Column("format", String(8), nullable=False),
    Column("original_width", Integer, nullable=False),
    Column("original_height", Integer, nullable=False),
    Column("frames", Integer, nullable=False, server_default="1"),
    Column("file_1x", String(64), nullable=False),
    Column("width_1x", Integer, nullable=False),
    Column("height_1x", Integer, nullable=False),
    Column("bytes_1x", Integer, nullable=False),
    Column("file_2x", String(64), nullable=False),
    Column("width_2x", Integer, nullable=False),
    Column("height_2x", Integer, nullable=False),
    Column("bytes_2x", Integer, nullable=False),
    Column("created_at", UTCDateTime(), nullable=False),
    Column("created_by", String(100), nullable=False, comment="the audit actor: ids, no emails"),
    UniqueConstraint("source_sha256"),
    CheckConstraint("format IN ('png', 'jpeg', 'gif', 'webp')", name="format"),
)
Index(None, media.c.file_1x)
Index(None, media.c.file_2x)
