"""`tidings newsletters create|list|welcome|archive|tracking|sunset`: the lists people
subscribe to."""

from __future__ import annotations

import getpass
import json
from pathlib import Path

import typer
from rich.table import Table

from tidings.access.audit import newsletter_entries
from tidings.audience.newsletters import TRACKING_MEANINGS, NewsletterChanges, NewsletterFields
from tidings.cli import newsletters_feed, newsletters_sunset
from tidings.cli.context import EXIT_CONFIG, container_for, fail, out_console, run
from tidings.cli.options import email_address, header_text
from tidings.domain.audit import Actor
from tidings.domain.edits import UNSET
from tidings.domain.tracking import TRACKING_MODES, TrackingMode

app = typer.Typer(help="Manage newsletters (lists).", no_args_is_help=True)


@app.command("create")
def create(
    ctx: typer.Context,
    slug: str = typer.Argument(..., help="URL name: lowercase letters, digits, dashes."),
    name: str = typer.Option(..., "--name", help="Display name.", callback=header_text),
    sender_name: str = typer.Option(
        ..., "--sender-name", help="From: display name.", callback=header_text
    ),
    sender_address: str = typer.Option(
        ..., "--sender-address", help="From: address.", callback=email_address
    ),
    reply_to: str | None = typer.Option(
        None, "--reply-to", help="Reply-To address.", callback=email_address
    ),
    description: str = typer.Option("", "--description", help="Shown on signup pages."),
    single_opt_in: bool = typer.Option(
        False, "--single-opt-in", help="Skip the confirmation email (not recommended)."
    ),
    welcome_subject: str | None = typer.Option(
        None,
        "--welcome-subject",
        help="Send a welcome email with this subject on confirming.",
        callback=header_text,
    ),
    welcome_file: Path | None = typer.Option(
        None, "--welcome-file", help="The welcome email's text (paragraphs of plain text)."
    ),
    archive: bool = typer.Option(
        False, "--archive", help="Publish sent issues at /archive/SLUG with Atom and RSS feeds."
    ),
    tracking: str = typer.Option(
        TrackingMode.OFF.value,
        "--tracking",
        help="Open and click tracking: off, aggregate or per_person (see `tracking`).",
    ),
) -> None:
    """Create a newsletter (double opt-in unless --single-opt-in), optionally with a welcome
    email sent to each person once they confirm."""
    welcome_body = _read_text(welcome_file)
    _check_mode(tracking, "--tracking")

    async def go() -> None:
        async with container_for(ctx) as container:
            row = await container.newsletters.create(
                NewsletterFields(
                    slug=slug,
                    name=name,
                    sender_name=sender_name,
                    sender_address=sender_address,
                    reply_to=reply_to,
                    description=description,
                    double_opt_in=not single_opt_in,
                    welcome_subject=welcome_subject,
                    welcome_body=welcome_body,
                    archive=archive,
                    tracking=tracking,
                )
            )
            await container.audit.record_entries(_actor(), newsletter_entries(row))
        out_console.print(f"Created newsletter {row.slug} ({row.name}).")

    run(go)


def _actor() -> Actor:
    return Actor.command_line(getpass.getuser())


def _read_text(path: Path | None) -> str | None:
    if path is None:
        return None
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        fail(f"--welcome-file: cannot read {path}: {exc}", code=EXIT_CONFIG)


@app.command("welcome")
def welcome(
    ctx: typer.Context,
    slug: str = typer.Argument(..., help="The newsletter's slug."),
    subject: str | None = typer.Option(
        None, "--subject", help="The welcome email's subject.", callback=header_text
    ),
    file: Path | None = typer.Option(
        None, "--file", help="The welcome email's text (paragraphs of plain text)."
    ),
    off: bool = typer.Option(False, "--off", help="Send no welcome email any more."),
) -> None:
    """Set (or with --off, remove) the email a person gets once they confirm their
    subscription. It carries a link to their preferences; it is not sent to imported or
    admin-confirmed subscribers."""
    if off == bool(subject or file):
        fail("give --subject and/or --file, or --off", code=EXIT_CONFIG)
    if off:
        changes = NewsletterChanges(welcome_subject=None, welcome_body=None)
    else:  # an option not given keeps that half as it is
        body = _read_text(file)
        changes = NewsletterChanges(
            welcome_subject=UNSET if subject is None else subject,
            welcome_body=UNSET if body is None else body,
        )

    async def go() -> None:
        async with container_for(ctx) as container:
            row = await container.newsletters.update(slug, changes)
        state = (
            f"welcome email: {row.welcome_subject}" if row.welcome_subject else "no welcome email"
        )
        out_console.print(f"{row.slug}: {state}.")

    run(go)


@app.command("archive")
def archive(
    ctx: typer.Context,
    slug: str = typer.Argument(..., help="The newsletter's slug."),
    off: bool = typer.Option(False, "--off", help="Take the archive and its feeds down."),
) -> None:
    """Publish the newsletter's sent issues (the free edition, no personal data) at
    /archive/SLUG with Atom and RSS feeds, and add a "view in your browser" link to the
    issues sent from now on; --off takes the archive down (links in sent mail then 404)."""

    async def go() -> None:
        async with container_for(ctx) as container:
            before = await container.newsletters.get(slug)
            row = await container.newsletters.update(slug, NewsletterChanges(archive=not off))
            await container.audit.record_entries(_actor(), newsletter_entries(row, before))
            url = f"{container.audience.public_url.rstrip('/')}/archive/{row.slug}"
        out_console.print(f"{row.slug}: archive {'on at ' + url if row.archive else 'off'}.")

    run(go)


def _check_mode(mode: str, name: str) -> None:
    if mode not in TRACKING_MODES:
        fail(
            f"{name} (tracking) must be one of {', '.join(TRACKING_MODES)}, not {mode!r}",
            code=EXIT_CONFIG,
        )


@app.command("tracking")
def tracking(
    ctx: typer.Context,
    slug: str = typer.Argument(..., help="The newsletter's slug."),
    mode: str = typer.Argument(..., help="off, aggregate or per_person."),
) -> None:
    """Set the newsletter's open and click tracking (ENG-1) for the issues sent from now on:
    off (no pixel, no rewritten link), aggregate (counts only: nothing ties a hit to a person)
    or per_person (each person's own opens and clicks, only for subscribers who ticked the
    consent box; everyone else as in aggregate). Recorded in the audit log."""
    _check_mode(mode, "MODE")

    async def go() -> None:
        async with container_for(ctx) as container:
            before = await container.newsletters.get(slug)
            row = await container.newsletters.update(slug, NewsletterChanges(tracking=mode))
            await container.audit.record_entries(_actor(), newsletter_entries(row, before))
        meaning = TRACKING_MEANINGS[row.tracking]
        out_console.print(f"{row.slug}: tracking {row.tracking} ({meaning}).")

    run(go)


@app.command("list")
def list_newsletters(
    ctx: typer.Context, as_json: bool = typer.Option(False, "--json", help="Print JSON.")
) -> None:
    """List newsletters."""

    async def go() -> None:
        async with container_for(ctx) as container:
            rows = await container.newsletters.list()
        if as_json:
            print(
                json.dumps(
                    [
                        {
                            "slug": r.slug,
                            "name": r.name,
                            "sender": r.sender_address,
                            "double_opt_in": r.double_opt_in,
                            "tracking": r.tracking,
                        }
                        for r in rows
                    ]
                )
            )
            return
        table = Table("slug", "name", "sender", "double opt-in", "tracking")
        for r in rows:
            table.add_row(
                r.slug,
                r.name,
                f"{r.sender_name} <{r.sender_address}>",
                "yes" if r.double_opt_in else "no",
                r.tracking,
            )
        out_console.print(table)

    run(go)


newsletters_sunset.register(app)
newsletters_feed.register(app)
