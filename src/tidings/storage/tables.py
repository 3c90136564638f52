"""Every table, on one MetaData. Migrations must produce exactly these definitions."""

from __future__ import annotations

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    CheckConstraint,
    Column,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Table,
    Text,
    UniqueConstraint,
)
from sqlalchemy.dialects.postgresql import JSONB

from tidings.storage.types import UTCDateTime

# 64-bit ids on PostgreSQL; SQLite only auto-increments a column declared INTEGER.
BigId = BigInteger().with_variant(Integer(), "sqlite")
Json = JSON().with_variant(JSONB(), "postgresql")

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
)

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
Index(None, jobs.c.status, jobs.c.run_at)
Index(None, jobs.c.status, jobs.c.locked_until)
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
