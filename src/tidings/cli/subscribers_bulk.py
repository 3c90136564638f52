"""`tidings subscribers bulk ACTION`: label, unlabel, unsubscribe, delete or ask to confirm
many subscribers at once, chosen by ids or by the search filter; it states the count and
asks before acting (`--yes` skips the question), and the audit log records it with the
count, as the admin UI and `POST /api/admin/subscribers/bulk` do."""

from __future__ import annotations

import getpass
import json

import typer

from tidings.audience.bulk import BulkAction, BulkRequest, Selection
from tidings.cli.context import container_for, out_console, run
from tidings.domain.audit import Actor
from tidings.domain.consent import SubscriptionState


def bulk(
    ctx: typer.Context,
    action: BulkAction = typer.Argument(
        ..., help="label, unlabel, unsubscribe, delete, or confirm (email the pending ones)."
    ),
    label: str | None = typer.Option(None, "--label", help="The label to add or remove."),
    target_newsletter: str | None = typer.Option(
        None, "--target-newsletter", help="For unsubscribe and confirm: which newsletter."
    ),
    ids: list[int] = typer.Option(
        [],
        "--id",
        min=1,
        max=2**62,
        help="A subscriber id; repeat for several. Without: all that match.",
    ),
    newsletter: str | None = typer.Option(None, "--newsletter", help="Filter: newsletter slug."),
    state: SubscriptionState | None = typer.Option(None, "--state", help="Filter: state."),
    tier: str | None = typer.Option(None, "--tier", help="Filter: tier."),
    with_label: str | None = typer.Option(None, "--with-label", help="Filter: has this label."),
    text: str | None = typer.Option(None, "--search", help="Filter: email or name contains."),
    yes: bool = typer.Option(False, "--yes", help="Do it without asking (scripts)."),
    as_json: bool = typer.Option(False, "--json", help="Print the result as JSON."),
) -> None:
    """Act on many subscribers: those given by --id, or every one matching the filter
    options. Prints how many it will change and asks first; recorded in the audit log."""
    selection = Selection(
        newsletter=newsletter,
        state=state,
        tier=tier,
        label=with_label,
        text=text,
        picked=tuple(ids) if ids else None,
    )
    request = BulkRequest(action, selection, label, target_newsletter)

    async def count() -> int:
        async with container_for(ctx) as container:
            return await container.bulk.count(selection)

    if not yes:
        found = run(count)
        if not typer.confirm(f"{action.value}: {found} subscriber(s) selected. Go ahead?"):
            raise typer.Exit(1)

    async def apply() -> int:
        async with container_for(ctx) as container:
            return await container.bulk.apply_by(request, Actor.command_line(getpass.getuser()))

    changed = run(apply)
    if as_json:
        print(json.dumps({"action": action.value, "count": changed}))
    else:
        out_console.print(f"{action.value}: {changed} subscriber(s) changed.")
