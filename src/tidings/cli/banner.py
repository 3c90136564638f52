"""What `serve`, `api` and `worker` say when they have started: where the data is, where mail
goes, what runs in the process, and the addresses to open."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from tidings import __version__
from tidings.config import Settings, mask_url_password, placeholder_identity

if TYPE_CHECKING:
    from tidings.bootstrap.schema import SchemaRevision

CAPTURE_NOTE = "mail is captured locally; see `tidings outbox`"
METRICS_OFF = "off (metrics.enabled, or metrics.port for a port of their own)"


def say(lines: list[str]) -> None:
    """Print a banner on stdout, as it is, at once (plain print: Rich's rendering would load
    half a megabyte of its modules into a worker for these few lines)."""
    print("\n".join(lines), flush=True)


def database_line(settings: Settings) -> str:
    """The SQLite file's path, or the URL with its password masked."""
    sqlite_file = settings.database.sqlite_file
    if sqlite_file is not None:
        return f"SQLite {sqlite_file.resolve()}"
    return f"PostgreSQL {mask_url_password(settings.database.url)}"


def email_line(settings: Settings) -> str:
    provider = settings.email.provider
    if provider == "capture":
        return f"capture: {CAPTURE_NOTE}"
    if provider == "smtp":
        smtp = settings.smtp
        return f"SMTP relay {smtp.host}:{smtp.port} ({smtp.security})"
    base_url = mask_url_password(str(settings.mailgun.api_base_url))
    return f"Mailgun, domain {settings.mailgun.domain} ({base_url})"


def real_mail_line(settings: Settings) -> str:
    """What still stands between this configuration and mail to real readers: the identity
    settings at their placeholders (sends are refused under them), and the site's name."""
    missing = [key.split()[0] for key in placeholder_identity(settings)]
    if settings.site.name == type(settings.site).model_fields["name"].default:
        missing.append("site.name")
    if not missing:
        return "ready: the identity settings are set (docs/going-live.md)"
    return f"blocked until you set {', '.join(missing)} (docs/going-live.md)"


def workers_line(settings: Settings) -> str:
    queue, bulk = settings.queue, settings.bulk_email
    return (
        f"started in this process: email ×{queue.email_concurrency}, "
        f"webhooks ×{queue.webhook_concurrency}, campaign batches ×{bulk.concurrency}"
    )


def base_url(host: str, port: int) -> str:
    """The address to open for a server listening on `host` (all addresses: this machine)."""
    if host in {"0.0.0.0", ""}:  # noqa: S104 - naming the wildcard, not binding to it
        host = "127.0.0.1"
    elif host == "::":
        host = "::1"
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


@dataclass(frozen=True)
class ServerBanner:
    """Everything `tidings serve` / `tidings api` reports once it listens."""

    settings: Settings
    revision: SchemaRevision
    url: str
    embedded: bool
    metrics_url: str | None

    def lines(self) -> list[str]:
        what = "API and workers in one process" if self.embedded else "API only"
        rows = [
            ("database", f"{database_line(self.settings)}, {self.revision.describe()}"),
            ("email", email_line(self.settings)),
            ("real mail", real_mail_line(self.settings)),
            (
                "workers",
                workers_line(self.settings)
                if self.embedded
                else "none in this process: run `tidings worker` beside it",
            ),
            ("subscribe", f"{self.url}/subscribe"),
            ("API docs", f"{self.url}/docs"),
            ("admin", f"{self.url}/admin (operators sign in; `tidings admins create EMAIL`)"),
        ]
        rows.append(("metrics", self.metrics_url or METRICS_OFF))
        public_url = str(self.settings.site.public_url).rstrip("/")
        if public_url != self.url:
            rows.append(("in emails", f"links point at {public_url} (site.public_url)"))
        return [f"tidings {__version__}: {what}, listening on {self.url}", *_table(rows)]


def worker_lines(
    settings: Settings, revision: SchemaRevision, metrics_url: str | None
) -> list[str]:
    rows = [
        ("database", f"{database_line(settings)}, {revision.describe()}"),
        ("email", email_line(settings)),
        ("real mail", real_mail_line(settings)),
        ("workers", workers_line(settings)),
    ]
    if metrics_url:
        rows.append(("metrics", metrics_url))
    return [f"tidings {__version__}: worker", *_table(rows)]


def _table(rows: list[tuple[str, str]]) -> list[str]:
    width = max(len(name) for name, _ in rows)
    return [f"  {name.ljust(width)}  {value}" for name, value in rows]
