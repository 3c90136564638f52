"""`tidings campaign create|edit|clone|list|preview|check|test-send` (compose and check campaigns),
`send|schedule|cancel` from `campaign_send`, `status|recipients` from `campaign_status` and
`retry|reconcile|resend` from `campaign_repair` and `resend-to` from `campaign_resend_to`."""

from __future__ import annotations

import getpass
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer
from rich.table import Table

from tidings.campaigns.commands import DraftChanges, DraftFields
from tidings.campaigns.copy_outcome import CopyOutcome, await_outcome
from tidings.campaigns.drafts import CampaignDraft
from tidings.cli import (
    campaign_ab,
    campaign_repair,
    campaign_resend_to,
    campaign_send,
    campaign_stats,
    campaign_status,
)
from tidings.cli.context import container_for, err_console, fail, out_console, run
from tidings.cli.options import email_address, header_text
from tidings.domain.audit import Actor
from tidings.domain.presend import CheckReport
from tidings.rendering import Preview

if TYPE_CHECKING:
    from tidings.bootstrap import Container

app = typer.Typer(
    help="Campaigns: drafts, previews, test sends, and sending.", no_args_is_help=True
)

FromFile = typer.Option(
    None, "--from-file", "-f", help="Body file (.md for Markdown, .html for HTML)."
)


def _archive_option(help_text: str) -> Any:
    return typer.Option(None, "--archive/--no-archive", help=help_text)


async def _audit_archive(container: Container, draft: CampaignDraft) -> None:
    """The audit log's entry for an archive decision taken here, as the API and UI record."""
    await container.audit.record(Actor.command_line(getpass.getuser()), *draft.archive_audit())


def _body(path: Path | None) -> dict[str, Any]:
    if path is None:
        return {}
    if not path.is_file():
        fail(f"--from-file: no such file: {path}")
    body_format = "html" if path.suffix.lower() in (".html", ".htm") else "markdown"
    return {"body": path.read_text(encoding="utf-8"), "body_format": body_format}


def _show(draft: Any, as_json: bool) -> None:
    row = draft.campaign
    if as_json:
        print(
            json.dumps(
                {
                    "id": row.id,
                    "status": row.status,
                    "newsletter": draft.newsletter.slug,
                    "subject": row.subject,
                    "audience_filter": row.audience_filter,
                    "segments": list(draft.segments),
                    "archive_public": row.archive_public,
                    "ab_test": campaign_ab.ab_summary(draft.ab.test if draft.ab else None),
                }
            )
        )
        return
    out_console.print(
        f"campaign {row.id} ({row.status}) {draft.newsletter.slug}: {row.subject}", markup=False
    )
    out_console.print(
        f"audience: {row.audience_filter or 'everyone'}; versions: {', '.join(draft.segments)}"
    )
    out_console.print(
        "archive: " + ("public" if row.archive_public else "not in the archive"), markup=False
    )
    if draft.ab is not None:
        out_console.print(campaign_ab.ab_line(draft.ab.test), markup=False)


@app.command("create")
def create(
    ctx: typer.Context,
    newsletter: str = typer.Option(..., "--newsletter", "-n", help="Newsletter slug."),
    subject: str = typer.Option(..., "--subject", "-s", help="Subject line.", callback=header_text),
    from_file: Path | None = FromFile,
    preheader: str = typer.Option(
        "", "--preheader", help="Preview text shown after the subject.", callback=header_text
    ),
    audience: str = typer.Option(
        "", "--audience", help="Filter, e.g. tier:paid, label:beta, attr:city=Paris or engaged:90."
    ),
    archive: bool | None = _archive_option(
        "Publish in the newsletter's archive and feeds (--no-archive: keep it out). "
        "Default: public only when --audience is empty."
    ),
    variant_subject: list[str] | None = typer.Option(
        None, "--variant-subject", help=campaign_ab.VARIANT_HELP.format(what="subject")
    ),
    variant_preheader: list[str] | None = typer.Option(
        None, "--variant-preheader", help=campaign_ab.VARIANT_HELP.format(what="preheader")
    ),
    variant_sender_name: list[str] | None = typer.Option(
        None, "--variant-sender-name", help=campaign_ab.VARIANT_HELP.format(what="sender name")
    ),
    test_share: int = typer.Option(
        campaign_ab.DEFAULT_SHARE,
        "--test-share",
        help="A/B test: percent of the audience in the test (1-90).",
    ),
    test_wait: str = typer.Option(
        campaign_ab.DEFAULT_WAIT,
        "--test-wait",
        help="A/B test: how long to wait before choosing (30m, 4h, 1d).",
    ),
    test_metric: str = typer.Option(
        campaign_ab.DEFAULT_METRIC,
        "--test-metric",
        help="A/B test: the winner by people's unique clicks or opens (clicks|opens).",
    ),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """Create a draft campaign from a Markdown or HTML file; with --variant-subject (or
    --variant-preheader, --variant-sender-name) an A/B test: --test-share of the audience gets
    the variants, and after --test-wait the rest gets the winner (docs/engagement.md)."""
    body = _body(from_file)
    if not body:
        fail("--from-file is required to create a campaign")

    async def go() -> None:
        async with container_for(ctx) as container:
            draft = await container.campaigns.create(
                newsletter,
                DraftFields(
                    subject=subject,
                    preheader=preheader,
                    audience_filter=audience,
                    archive_public=archive,
                    ab=campaign_ab.ab_test(
                        variant_subject,
                        variant_preheader,
                        variant_sender_name,
                        test_share=test_share,
                        test_wait=test_wait,
                        test_metric=test_metric,
                    ),
                    **body,
                ),
            )
            if archive is not None:
                await _audit_archive(container, draft)
        _show(draft, as_json)

    run(go)


@app.command("edit")
def edit(
    ctx: typer.Context,
    campaign_id: int = typer.Argument(..., help="The campaign's id."),
    subject: str | None = typer.Option(
        None, "--subject", "-s", help="New subject line.", callback=header_text
    ),
    from_file: Path | None = FromFile,
    preheader: str | None = typer.Option(
        None, "--preheader", help="New preview text.", callback=header_text
    ),
    audience: str | None = typer.Option(None, "--audience", help="New audience filter."),
    archive: bool | None = _archive_option(
        "Publish in the newsletter's archive and feeds (--no-archive: withdraw); alone, in any "
        "state. Not given with a new --audience: public only when the audience is empty."
    ),
    variant_subject: list[str] | None = typer.Option(
        None,
        "--variant-subject",
        help=campaign_ab.VARIANT_HELP.format(what="subject") + " Replaces the current test.",
    ),
    variant_preheader: list[str] | None = typer.Option(
        None,
        "--variant-preheader",
        help=campaign_ab.VARIANT_HELP.format(what="preheader") + " Replaces the current test.",
    ),
    variant_sender_name: list[str] | None = typer.Option(
        None,
        "--variant-sender-name",
        help=campaign_ab.VARIANT_HELP.format(what="sender name") + " Replaces the current test.",
    ),
    test_share: int | None = typer.Option(
        None, "--test-share", help="A/B test: percent of the audience in the test (1-90)."
    ),
    test_wait: str | None = typer.Option(
        None, "--test-wait", help="A/B test: how long to wait before choosing (30m, 4h, 1d)."
    ),
    test_metric: str | None = typer.Option(
        None, "--test-metric", help="A/B test: the winner by unique clicks or opens."
    ),
    no_ab_test: bool = typer.Option(False, "--no-ab-test", help="Remove the A/B test."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """Change a draft (only drafts can be edited), or any campaign's place in the archive.
    A/B options not given keep the current test: --test-share, --test-wait or --test-metric
    alone change it, new variants replace it, --no-ab-test removes it."""
    changes: dict[str, Any] = {**_body(from_file)}
    for key, value in (
        ("subject", subject),
        ("preheader", preheader),
        ("audience_filter", audience),
        ("archive_public", archive),
    ):
        if value is not None:
            changes[key] = value

    async def go() -> None:
        async with container_for(ctx) as container:
            current = (await container.campaigns.get(campaign_id)).ab
            ab = campaign_ab.edited_test(
                current.test if current else None,
                {
                    "subject": variant_subject,
                    "preheader": variant_preheader,
                    "sender_name": variant_sender_name,
                },
                test_share=test_share,
                test_wait=test_wait,
                test_metric=test_metric,
                remove=no_ab_test,
            )
            draft = await container.campaigns.update(campaign_id, DraftChanges(**changes, ab=ab))
            if archive is not None:
                await _audit_archive(container, draft)
        _show(draft, as_json)

    run(go)


@app.command("clone")
def clone(
    ctx: typer.Context,
    campaign_id: int = typer.Argument(..., help="The campaign to copy, in any state."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """Copy a campaign (content, audience, sender) into a new draft: the usual start of the
    next issue, or of a corrected resend of a cancelled one."""

    async def go() -> None:
        async with container_for(ctx) as container:
            draft = await container.campaigns.clone(campaign_id)
        _show(draft, as_json)

    run(go)


@app.command("list")
def list_campaigns(
    ctx: typer.Context,
    newsletter: str | None = typer.Option(None, "--newsletter", "-n", help="Only this newsletter."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """List campaigns, newest first."""

    async def go() -> None:
        async with container_for(ctx) as container:
            rows = await container.campaigns.list_campaigns(newsletter=newsletter, limit=200)
        if as_json:
            print(
                json.dumps([{"id": r.id, "status": r.status, "subject": r.subject} for r in rows])
            )
            return
        table = Table("id", "status", "subject", "audience", "updated")
        for r in rows:
            table.add_row(
                str(r.id),
                r.status,
                r.subject,
                r.audience_filter or "everyone",
                f"{r.updated_at:%Y-%m-%d %H:%M}",
            )
        out_console.print(table)

    run(go)


@app.command("preview")
def preview(
    ctx: typer.Context,
    campaign_id: int = typer.Argument(..., help="The campaign's id."),
    segment: str | None = typer.Option(None, "--segment", help="free, paid or comped."),
    text: bool = typer.Option(False, "--text", help="The plain-text version instead of HTML."),
    out: Path | None = typer.Option(None, "--out", "-o", help="Write to this file (else stdout)."),
) -> None:
    """Render a segment's version with a sample reader's values."""

    async def go() -> Preview:
        async with container_for(ctx) as container:
            return await container.campaigns.preview(campaign_id, segment)

    shown = run(go)
    rendered = shown.text if text else shown.html
    for warning in shown.warnings:
        err_console.print(f"[yellow]warning:[/] {warning}")
    if out is None:
        print(rendered)
    else:
        out.write_text(rendered, encoding="utf-8")
        out_console.print(f"Wrote the {shown.segment} version to {out}.")


@app.command("check")
def check(
    ctx: typer.Context,
    campaign_id: int = typer.Argument(..., help="The campaign's id."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """Checks before sending (CMP-8): HTML Gmail would clip, images without alt text, links
    and images that are not https, merge tags without a fallback that recipients lack
    (counted), a long subject or preheader, a missing postal address or unsubscribe link.
    Warnings: the exit status is 0 either way."""

    async def go() -> CheckReport:
        async with container_for(ctx) as container:
            return await container.checks.check(campaign_id)

    report = run(go)
    if as_json:
        print(json.dumps(report.public()))
        return
    if not report.findings:
        out_console.print(f"campaign {campaign_id}: no warnings.")
        return
    out_console.print(f"campaign {campaign_id}: {len(report.findings)} warning(s)")
    for finding in report.findings:
        where = f"[{', '.join(finding.segments)}] " if finding.segments else ""
        out_console.print(f"  {where}{finding.code}: {finding.message}", markup=False)


@app.command("test-send")
def send_test(
    ctx: typer.Context,
    campaign_id: int = typer.Argument(..., help="The campaign's id."),
    to: list[str] = typer.Option(
        ..., "--to", help="Recipient (repeat for up to 10).", callback=email_address
    ),
    segment: str | None = typer.Option(None, "--segment", help="free, paid or comped."),
    wait: float = typer.Option(
        0.0,
        "--wait",
        min=0,
        max=60,
        help="Seconds to wait for a worker to send them, then say what happened (exit 1 if "
        "any failed or is still queued).",
    ),
) -> None:
    """Send a segment's real message to test addresses; the campaign is left untouched."""

    async def go() -> CopyOutcome | None:
        async with container_for(ctx) as container:
            job_ids = await container.campaigns.test_send(campaign_id, to, segment)
            out_console.print(
                f"Queued {len(job_ids)} test message(s): jobs "
                f"{', '.join(map(str, job_ids))}. A worker (or `tidings serve`) sends them."
            )
            if not wait:
                return None
            return await await_outcome(container.queue, job_ids, within_seconds=wait)

    outcome = run(go)
    if outcome is not None:
        (out_console if outcome.ok else err_console).print(outcome.message(), markup=False)
        if not outcome.ok:
            raise typer.Exit(1)


campaign_send.register(app)
campaign_status.register(app)
campaign_stats.register(app)
campaign_ab.register(app)
campaign_repair.register(app)
campaign_resend_to.register(app)
