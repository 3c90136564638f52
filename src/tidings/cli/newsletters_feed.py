"""`tidings newsletters feed` and `feed-run`: a newsletter's feed-to-email digest (AUT-2)."""

from __future__ import annotations

import getpass
import json
from datetime import UTC, datetime

import typer

from tidings.cli.context import container_for, fail, out_console, run
from tidings.domain.audit import Actor

EVERY_HELP = (
    "When to make a digest, in the site's time zone (site.timezone): days and a time, such as "
    '"mon 09:00", "mon,thu 07:30", "weekdays 08:00" or "daily 18:00".'
)
MODE_HELP = "draft: leave each digest as a draft to review and send; send: send it at once."


def _when(moment: datetime | None) -> str:
    return "never" if moment is None else f"{moment.astimezone(UTC):%Y-%m-%d %H:%M} UTC"


def register(app: typer.Typer) -> None:
    @app.command("feed")
    def feed(
        ctx: typer.Context,
        slug: str = typer.Argument(..., help="The newsletter's slug."),
        url: str | None = typer.Argument(
            None, help="The RSS or Atom feed to follow; omit it to show the current one."
        ),
        every: str = typer.Option("mon 09:00", "--every", help=EVERY_HELP),
        mode: str = typer.Option("draft", "--mode", help=MODE_HELP),
        off: bool = typer.Option(False, "--off", help="Stop following the feed."),
        as_json: bool = typer.Option(False, "--json", help="Print JSON."),
    ) -> None:
        """Follow an RSS or Atom feed: on its schedule, the items not yet sent become a digest
        campaign (title, summary, link and image of each), left as a draft or sent. The feed
        is read once now to check it; a URL that gives no feed is refused and nothing
        changes. Items published before you follow the feed are not sent; an item is never
        sent twice, also after following the feed again. Without URL: show the feed, its
        last success or error and the next read."""
        if off and url is not None:
            fail("give a URL to follow, or --off to stop following; not both")

        async def go() -> None:
            async with container_for(ctx) as container:
                actor = Actor.command_line(getpass.getuser())
                if off:
                    stopped = await container.feeds.stop(slug)
                    if stopped:
                        await container.audit.record(
                            actor, "newsletter.feed_off", f"newsletter:{slug}", {}
                        )
                    out_console.print(
                        f"{slug}: {'stopped following its feed' if stopped else 'follows no feed'}."
                    )
                    return
                if url is not None:
                    await container.feeds.follow(slug, url, every, mode)
                    await container.audit.record(
                        actor,
                        "newsletter.feed",
                        f"newsletter:{slug}",
                        {"url": url, "every": every, "mode": mode},
                    )
                view = await container.feeds.get(slug)
            if view is None:
                out_console.print(f"{slug} follows no feed.")
                return
            shown = view.feed
            if as_json:
                print(
                    json.dumps(
                        {
                            "url": shown.url,
                            "every": shown.schedule,
                            "mode": shown.mode,
                            "next_run_at": shown.next_run_at.isoformat(),
                            "last_success_at": (
                                shown.last_success_at and shown.last_success_at.isoformat()
                            ),
                            "last_error": shown.last_error,
                            "failures": shown.failures,
                            "last_campaign_id": shown.last_campaign_id,
                        },
                        indent=2,
                    )
                )
                return
            out_console.print(
                f"{slug} follows {shown.url}\n  every {shown.schedule} ({shown.mode}); "
                f"next read {_when(shown.next_run_at)}\n  last success "
                f"{_when(shown.last_success_at)}",
                highlight=False,
                soft_wrap=True,
            )
            if shown.last_error:
                out_console.print(
                    f"  [red]failing[/] ({shown.failures} in a row): {shown.last_error}",
                    highlight=False,
                    soft_wrap=True,
                )

        run(go)

    @app.command("feed-run")
    def feed_run(
        ctx: typer.Context,
        slug: str = typer.Argument(..., help="The newsletter's slug."),
    ) -> None:
        """Read the newsletter's feed now, outside its schedule, and make a digest of the
        items not yet sent (a draft, or sent by the workers in send mode). Nothing new: no
        campaign. A feed that cannot be read is recorded as failing, with its next try."""

        async def go() -> None:
            async with container_for(ctx) as container:
                result = await container.feeds.run_now(slug)
            if result.campaign_id is None:
                why = "the feed is unchanged" if result.not_modified else "no new items"
                out_console.print(f"{slug}: {why}; no campaign made.")
                return
            what = "queued to send" if result.feed.mode == "send" else "left as a draft"
            out_console.print(
                f"{slug}: digest campaign {result.campaign_id} with {result.item_count} "
                f"item{'s' if result.item_count != 1 else ''}, {what}."
            )

        run(go)
