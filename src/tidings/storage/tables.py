"""Every table, on one MetaData. Migrations must produce exactly these definitions."""

from __future__ import annotations

from sqlalchemy import Column, Index, MetaData, String, Table, Text

from tidings.storage.types import UTCDateTime

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
