"""`tidings campaign stats`: a campaign's results (SND-27), from the events providers and
mailboxes reported back (PRV-6)."""

from __future__ import annotations

import json

import typer
from rich.table import Table

from tidings.api.admin.send_views import CampaignStatsPublic
from tidings.campaigns.statistics import COUNTS, CampaignStatistics, Counts
from tidings.cli.context import container_for, out_console, run


def _row(name: str, counts: Counts) -> list[str]:
    rates = counts.rates()
    cells = [name, str(counts.sent)]
    cells += [f"{getattr(counts, key)} ({rates[key]:.1%})" for key in COUNTS[1:]]
    return cells


def register(app: typer.Typer) -> None:
    @app.command("stats")
    def stats(
        ctx: typer.Context,
        campaign_id: int = typer.Argument(..., help="The campaign's id."),
        as_json: bool = typer.Option(False, "--json", help="Print JSON."),
    ) -> None:
        """Show a campaign's results: sent, delivered, hard and soft bounced, complained and
        unsubscribed (with rates of sent), in total and per segment."""

        async def go() -> CampaignStatistics:
            async with container_for(ctx) as container:
                return await container.statistics.statistics(campaign_id)

        found = run(go)
        if as_json:
            print(json.dumps(CampaignStatsPublic.of(found).model_dump()))
            return
        table = Table(title=f"campaign {campaign_id}")
        for column in ("segment", *COUNTS):
            table.add_column(column.replace("_", " "))
        for name, counts in found.segments.items():
            table.add_row(*_row(name, counts))
        table.add_row(*_row("total", found.total))
        out_console.print(table)
