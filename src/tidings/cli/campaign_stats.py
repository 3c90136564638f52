"""`tidings campaign stats`: a campaign's results (SND-27), from the events providers and
mailboxes reported back (PRV-6), and its opens and clicks (ENG-5)."""

from __future__ import annotations

import json
from typing import Any

import typer
from rich.table import Table

from tidings.api.admin.send_views import CampaignStatsPublic, engagement_reach
from tidings.campaigns.send_again import SendAgainLinks
from tidings.campaigns.statistics import COUNTS, CampaignStatistics, Counts
from tidings.cli.campaign_ab import ab_tables
from tidings.cli.context import container_for, out_console, run
from tidings.domain.engagement_figures import Figures
from tidings.engagement.results import NOT_TRACKED, TURN_ON, CampaignEngagement

FIGURE_COLUMNS = ("people, unique", "people, all hits", "machines")
MACHINES = "machines: privacy proxies and security scanners, counted apart, never in the rates"


def _row(name: str, counts: Counts, *, delivery_reported: bool) -> list[str]:
    """A segment's row; delivered reads "not reported" when the provider never reported a
    delivery (a plain SMTP relay never does), rather than a 0.0% that was never measured."""
    rates = counts.rates()
    cells = [name, str(counts.sent)]
    cells += [
        "not reported"
        if key == "delivered" and not delivery_reported
        else f"{getattr(counts, key)} ({rates[key]:.1%})"
        for key in COUNTS[1:]
    ]
    return cells


def _figures(name: str, figures: Figures) -> list[str]:
    return [name, str(figures.human_unique), str(figures.human_total), str(figures.machine_total)]


def engagement_tables(engagement: CampaignEngagement) -> list[Table | str]:
    """Opens and clicks as the terminal shows them: people's figures, machines' in their own
    labelled column, the rates with their denominator, and the links."""
    if not engagement.measured:
        return [f"{NOT_TRACKED}: turn it on with `{TURN_ON}`."]
    rate = f"rates are shares of {engagement.denominator}"
    figures = Table(title=f"opens and clicks (tracking {engagement.tracking}; {rate})")
    for column in ("", *FIGURE_COLUMNS):
        figures.add_column(column)
    for name, (opens, clicks) in engagement.segments.items():
        figures.add_row(*_figures(f"{name} opens", opens))
        figures.add_row(*_figures(f"{name} clicks", clicks))
    figures.add_row(*_figures("total opens", engagement.opens))
    figures.add_row(*_figures("total clicks", engagement.clicks))
    open_rate, click_rate = engagement.rate(engagement.opens), engagement.rate(engagement.clicks)
    shown: list[Table | str] = [
        figures,
        f"open rate {_percent(open_rate)}, click-through rate {_percent(click_rate)} "
        f"(people's unique opens and clicks / {engagement.denominator}); {MACHINES}",
    ]
    if engagement.links:
        links = Table(title="clicks per link")
        for column in ("url", *FIGURE_COLUMNS):
            links.add_column(column)
        for link in engagement.links:
            links.add_row(*_figures(link.url, link.clicks))
        shown.append(links)
    return shown


def send_again_lines(links: SendAgainLinks) -> list[str]:
    """The campaign's send-again links (ENG-7) as the terminal shows them."""
    lines = []
    if links.origin is not None:
        origin = links.origin
        lines.append(
            f"sent again from campaign {origin.origin_id} to {origin.audience.label}: "
            f"{origin.chosen_count} chosen, {origin.left_out_count} left out"
        )
    lines += [
        f"sent again as campaign {link.campaign_id} to {link.audience.label} "
        f"({link.chosen_count} chosen)"
        for link in links.resends
    ]
    return lines


def _percent(rate: float | None) -> str:
    return "—" if rate is None else f"{rate:.1%}"


def register(app: typer.Typer) -> None:
    @app.command("stats")
    def stats(
        ctx: typer.Context,
        campaign_id: int = typer.Argument(..., help="The campaign's id."),
        as_json: bool = typer.Option(False, "--json", help="Print JSON."),
    ) -> None:
        """Show a campaign's results: sent, delivered, hard and soft bounced, complained and
        unsubscribed (with rates of sent), in total and per segment; then its opens and
        clicks, people's and machines' apart, with the clicks per link."""

        async def go() -> tuple[
            CampaignStatistics, CampaignEngagement, dict[str, Any] | None, SendAgainLinks
        ]:
            async with container_for(ctx) as container:
                found = await container.statistics.statistics(campaign_id)
                engagement = await container.engagement_results.campaign(
                    campaign_id, reach=engagement_reach(found)
                )
                ab = await container.ab_tests.summary(campaign_id, found)
                return found, engagement, ab, await container.send_again.links(campaign_id)

        found, engagement, ab, send_again = run(go)
        if as_json:
            stats = CampaignStatsPublic.of(found, engagement, ab, send_again.public())
            print(json.dumps(stats.model_dump(mode="json")))
            return
        table = Table(title=f"campaign {campaign_id}")
        for column in ("segment", *COUNTS):
            table.add_column(column.replace("_", " "))
        reported = found.total.delivered > 0
        for name, counts in found.segments.items():
            table.add_row(*_row(name, counts, delivery_reported=reported))
        table.add_row(*_row("total", found.total, delivery_reported=reported))
        out_console.print(table)
        if found.counted_at is not None:
            out_console.print(f"counted by the workers at {found.counted_at:%Y-%m-%d %H:%M:%S} UTC")
        for shown in engagement_tables(engagement):
            out_console.print(shown, soft_wrap=isinstance(shown, str))
        if ab is not None:
            for shown in ab_tables(ab):
                out_console.print(shown, soft_wrap=isinstance(shown, str))
        for line in send_again_lines(send_again):
            out_console.print(line, markup=False, soft_wrap=True)
