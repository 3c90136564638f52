"""`tidings campaign resend-to` (ENG-7): a sent campaign again, as a new draft for those who
did not open, did not click, were not delivered, or all who got it."""

from __future__ import annotations

import getpass
import json

import typer

from tidings.campaigns.send_again import link_json
from tidings.cli.context import container_for, fail, out_console, run
from tidings.cli.options import header_text
from tidings.domain.audit import Actor
from tidings.domain.send_again import ResendAudience, ResendLink

CHOICES = {
    "not_opened": ResendAudience.NOT_OPENED,
    "not_clicked": ResendAudience.NOT_CLICKED,
    "not_delivered": ResendAudience.NOT_DELIVERED,
    "all": ResendAudience.ALL,
}


def chosen_audience(flags: dict[str, bool]) -> ResendAudience:
    """The one audience flag given; a clear error for none or several."""
    given = [name for name, on in flags.items() if on]
    if len(given) != 1:
        options = "--not-opened, --not-clicked, --not-delivered or --all"
        fail(f"give exactly one of {options}" + (f" (got {len(given)})" if given else ""))
    return CHOICES[given[0]]


def summary_lines(origin_id: int, campaign_id: int, link: ResendLink) -> list[str]:
    lines = [
        f"campaign {campaign_id}: a draft sending campaign {origin_id} again to "
        f"{link.audience.label}; audience {link.chosen_count} (frozen now; anyone no longer "
        f"mailable at send time is left out then), left out {link.left_out_count}",
        *(f"  left out: {line}" for line in link.left_out_lines()),
        f"Review it, then send it: tidings campaign send {campaign_id}",
    ]
    return lines


def register(app: typer.Typer) -> None:
    @app.command("resend-to")
    def resend_to(
        ctx: typer.Context,
        campaign_id: int = typer.Argument(..., help="The sent campaign to send again."),
        not_opened: bool = typer.Option(
            False,
            "--not-opened",
            help="Those with no human open or click of it (needs per_person tracking).",
        ),
        not_clicked: bool = typer.Option(
            False, "--not-clicked", help="Those with no human click (needs per_person tracking)."
        ),
        not_delivered: bool = typer.Option(
            False,
            "--not-delivered",
            help="Those it failed for, was cancelled before, bounced, or (when the provider "
            "reports deliveries) was never reported delivered to.",
        ),
        everyone: bool = typer.Option(False, "--all", help="All who got it (sent, not bounced)."),
        subject: str | None = typer.Option(
            None, "--subject", callback=header_text, help="A new subject (default: the same)."
        ),
        as_json: bool = typer.Option(False, "--json", help="Print JSON."),
    ) -> None:
        """Make a new draft from a sent campaign, with its content and settings, for part of
        its recipients: the audience is frozen now (a later open or unsubscribe does not change
        who is in it; the no longer mailable are still left out at send time). Recipients not
        tracked per person (no consent when it was sent) or whose opens may have been deleted
        by tracking.retention_days are left out and counted, never guessed. Prints the new
        draft's id, its audience and how many were left out, and why."""
        audience = chosen_audience(
            {
                "not_opened": not_opened,
                "not_clicked": not_clicked,
                "not_delivered": not_delivered,
                "all": everyone,
            }
        )

        async def go() -> tuple[int, ResendLink]:
            async with container_for(ctx) as container:
                draft, link = await container.send_again.create(
                    campaign_id, audience, subject=subject
                )
                await container.audit.record(Actor.command_line(getpass.getuser()), *link.audit())
                return draft.campaign.id, link

        new_id, link = run(go)
        if as_json:
            print(json.dumps({"id": new_id, **link_json(link)}))
            return
        for line in summary_lines(campaign_id, new_id, link):
            out_console.print(line, markup=False, soft_wrap=True)
