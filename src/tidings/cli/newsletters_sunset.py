"""`tidings newsletters sunset`: the sunset policy's settings and its dry run (ENG-7)."""

from __future__ import annotations

import getpass
import json

import typer

from tidings.cli.context import container_for, out_console, run
from tidings.domain.audit import Actor


def register(app: typer.Typer) -> None:
    @app.command("sunset")
    def sunset(
        ctx: typer.Context,
        slug: str = typer.Argument(..., help="The newsletter's slug."),
        enabled: bool | None = typer.Option(
            None, "--on/--off", help="Turn the policy on or off (off by default)."
        ),
        after_days: int | None = typer.Option(
            None, "--after-days", help="Days with no human open or click before asking (180)."
        ),
        min_sends: int | None = typer.Option(
            None,
            "--min-sends",
            help="Tracked campaigns a person must have been sent in that span (5).",
        ),
        grace_days: int | None = typer.Option(
            None, "--grace-days", help="Days to answer before being unsubscribed (30)."
        ),
        dry_run: bool = typer.Option(
            False, "--dry-run", help="List who would be asked and unsubscribed now; change nothing."
        ),
        as_json: bool = typer.Option(False, "--json", help="Print JSON."),
    ) -> None:
        """Show or set the newsletter's sunset policy: subscribers tracked per person with no
        human open or click for --after-days (and at least --min-sends tracked campaigns) get
        an email asking whether to stay; without an answer in --grace-days they are
        unsubscribed (reason inactive; subscribing again brings them back). Changes are
        recorded in the audit log; --dry-run lists the addresses a run would ask and
        unsubscribe now."""

        async def go() -> None:
            async with container_for(ctx) as container:
                policy = container.sunset
                changes = {
                    "enabled": enabled,
                    "after_days": after_days,
                    "min_sends": min_sends,
                    "grace_days": grace_days,
                }
                if any(value is not None for value in changes.values()):
                    rules = await policy.configure(slug, **changes)
                    await container.audit.record(
                        Actor.command_line(getpass.getuser()),
                        "newsletter.sunset",
                        f"newsletter:{slug}",
                        {key: value for key, value in changes.items() if value is not None},
                    )
                else:
                    rules = await policy.settings(slug)
                preview = await policy.dry_run(slug) if dry_run else None
            if as_json:
                shown: dict[str, object] = {
                    "enabled": rules.enabled,
                    "after_days": rules.after_days,
                    "min_sends": rules.min_sends,
                    "grace_days": rules.grace_days,
                }
                if preview is not None:
                    shown["would_ask"] = preview.asked
                    shown["would_unsubscribe"] = preview.unsubscribed
                print(json.dumps(shown, indent=2))
                return
            state = "on" if rules.enabled else "off"
            out_console.print(
                f"{slug}: sunset {state}; ask after {rules.after_days} days without a human "
                f"open or click (at least {rules.min_sends} tracked campaigns), unsubscribe "
                f"after {rules.grace_days} more days without an answer."
            )
            if preview is not None:
                out_console.print(f"Would ask {len(preview.asked)}:", highlight=False)
                for email in preview.asked:
                    out_console.print(f"  {email}", highlight=False)
                out_console.print(
                    f"Would unsubscribe {len(preview.unsubscribed)}:", highlight=False
                )
                for email in preview.unsubscribed:
                    out_console.print(f"  {email}", highlight=False)

        run(go)
