"""Settings for the database and the job queue."""

from __future__ import annotations

from pathlib import Path

from pydantic import Field, field_validator, model_validator

from tidings.config.base import Section


class DatabaseSettings(Section):
    url: str = Field(
        default="sqlite:///./tidings.db",
        description=(
            "Database URL. `sqlite:///path/to/file.db` (the default, one machine) or "
            "`postgresql://user:password@host:5432/dbname` (many workers, many machines)."
        ),
    )
    sqlite_busy_timeout_ms: int = Field(
        default=30_000,
        ge=0,
        description="SQLite only: how long a writer waits for the write lock before failing.",
    )
    pool_size: int = Field(
        default=10, ge=1, le=200, description="PostgreSQL only: connections kept per process."
    )

    @field_validator("url")
    @classmethod
    def _known_backend(cls, value: str) -> str:
        scheme = value.split("://", 1)[0].split("+", 1)[0]
        if "://" not in value or scheme not in {"sqlite", "postgresql", "postgres"}:
            raise ValueError("expected sqlite:///FILE or postgresql://USER@HOST/DB")
        return value

    @property
    def sqlite_file(self) -> Path | None:
        """The SQLite database's file as the URL names it (`sqlite:///FILE`); None for
        PostgreSQL and for an in-memory SQLite database."""
        scheme, _, rest = self.url.partition("://")
        if scheme.split("+", 1)[0] != "sqlite":
            return None
        path = rest.split("?", 1)[0].removeprefix("/")
        return Path(path) if path and path != ":memory:" else None


class QueueSettings(Section):
    lease_seconds: float = Field(
        default=60.0,
        gt=0,
        description="How long a claimed job is reserved before another worker may reclaim it.",
    )
    poll_interval_seconds: float = Field(
        default=1.0,
        gt=0,
        le=300,
        description="How often an idle worker looks for due jobs (PostgreSQL also uses NOTIFY).",
    )
    max_attempts: int = Field(
        default=12, ge=1, le=100, description="Attempts before a job is `dead`."
    )
    backoff_base_seconds: float = Field(
        default=5.0, gt=0, description="First retry waits up to this long (doubling each time)."
    )
    backoff_max_seconds: float = Field(
        default=3600.0, gt=0, description="Longest wait between two attempts."
    )
    shutdown_grace_seconds: float = Field(
        default=30.0, ge=0, description="On SIGTERM, how long in-flight jobs may take to finish."
    )
    prune_interval_seconds: float = Field(
        default=3600.0, gt=0, description="How often finished jobs and old attempts are pruned."
    )
    retention_days: float = Field(
        default=7.0,
        gt=0,
        description="Finished and dead jobs, and finished webhook deliveries, older than this "
        "are pruned.",
    )
    email_concurrency: int = Field(
        default=8, ge=1, le=1000, description="Transactional emails sent at once per worker."
    )
    webhook_concurrency: int = Field(
        default=16, ge=1, le=1000, description="Webhook requests in flight at once per worker."
    )

    @model_validator(mode="after")
    def _backoff_range(self) -> QueueSettings:
        if self.backoff_max_seconds < self.backoff_base_seconds:
            raise ValueError("backoff_max_seconds must be at least backoff_base_seconds")
        return self


class MediaSettings(Section):
    """The media library (CMP-6): uploaded images, re-encoded and served from the public site."""

    directory: Path = Field(
        default=Path("./media"),
        description=(
            "Where uploaded images are stored (created on first upload). Back it up with the "
            "database: campaigns link to the files in it by name."
        ),
    )
    max_upload_bytes: int = Field(
        default=10_485_760,
        ge=1024,
        le=104_857_600,
        description="Largest image file accepted; reading stops at this size and it is refused.",
    )
    max_pixels: int = Field(
        default=40_000_000,
        ge=10_000,
        le=89_478_485,  # Pillow's own decompression-bomb limit
        description=(
            "Most pixels an image may have (width × height; for an animated image, every "
            "frame's together), read from its header before it is decoded: larger ones are "
            "refused as possible decompression bombs."
        ),
    )
