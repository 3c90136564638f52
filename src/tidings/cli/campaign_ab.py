"""`tidings campaign pick-winner`, and the A/B options of `campaign create` (ENG-8)."""

from __future__ import annotations

import getpass
import json
from typing import Any

import typer
from rich.table import Table

from tidings.cli.context import container_for, out_console, run
from tidings.domain.ab_tests import AbTest, build_test
from tidings.domain.audit import Actor
from tidings.domain.edits import UNSET, Unset
from tidings.domain.errors import InvalidInput

DEFAULT_SHARE, DEFAULT_WAIT, DEFAULT_METRIC = 20, "4h", "clicks"
VARIANT_HELP = (
    "An alternative {what} for an A/B test (repeatable, up to 3): the campaign's own is "
    "variant A, the default; these are B, C and D."
)


def ab_test(
    subjects: list[str] | None,
    preheaders: list[str] | None,
    sender_names: list[str] | None,
    *,
    test_share: int,
    test_wait: str,
    test_metric: str,
) -> AbTest | None:
    """The options of `campaign create` as a test, or None when no variant was given."""
    return build_test(
        {
            "subject": subjects or [],
            "preheader": preheaders or [],
            "sender_name": sender_names or [],
        },
        test_share=test_share,
        test_wait=test_wait,
        metric=test_metric,
    )


def edited_test(
    current: AbTest | None,
    variants: dict[str, list[str] | None],
    *,
    test_share: int | None,
    test_wait: str | None,
    test_metric: str | None,
    remove: bool,
) -> AbTest | Unset | None:
    """`campaign edit`'s A/B options as the change to make: UNSET when none was given, None
    for --no-ab-test; new variants replace the test (share, wait and metric kept from the
    current test unless given); --test-share, --test-wait or --test-metric alone change the
    current test."""
    given = {name: values for name, values in variants.items() if values}
    settings = {"test_share": test_share, "test_wait": test_wait, "test_metric": test_metric}
    if remove:
        if given or any(value is not None for value in settings.values()):
            raise InvalidInput(
                "--no-ab-test removes the test: give it without variant or test options",
                field="no_ab_test",
            )
        return None
    if not given and all(value is None for value in settings.values()):
        return UNSET
    if not given:
        if current is None:
            named = next(name for name, value in settings.items() if value is not None)
            raise InvalidInput(
                "the campaign has no A/B test to change: give --variant-subject (or "
                "--variant-preheader, --variant-sender-name) to start one",
                field=named,
            )
        given = {current.field.value: list(current.alternatives)}
    return build_test(
        dict(given),
        test_share=test_share
        if test_share is not None
        else (current.test_share if current else DEFAULT_SHARE),
        test_wait=test_wait
        if test_wait is not None
        else (current.wait if current else DEFAULT_WAIT),
        metric=test_metric
        if test_metric is not None
        else (current.metric.value if current else DEFAULT_METRIC),
    )


def ab_summary(test: AbTest | None) -> dict[str, Any] | None:
    """A campaign's A/B test as `campaign create|edit --json` show it (None: no test)."""
    if test is None:
        return None
    return {
        "field": test.field.value,
        "variants": list(test.alternatives),
        "test_share": test.test_share,
        "wait_seconds": int(test.wait.total_seconds()),
        "metric": test.metric.value,
    }


def ab_line(test: AbTest) -> str:
    """One line for the terminal, e.g. `A/B test of the subject: 3 variants, 20% for 4:00:00
    by clicks`."""
    return (
        f"A/B test of the {test.field.value}: {test.variant_count} variants "
        f"(B: {', '.join(repr(value) for value in test.alternatives)} after the campaign's own "
        f"A), {test.test_share}% of the audience for {test.wait}, winner by unique "
        f"{test.metric.value}"
    )


def ab_tables(ab: dict[str, Any]) -> list[Table | str]:
    """An A/B test as the terminal shows it: its state and rule, then each variant."""
    figures = ab["figures"]
    if ab["state"] == "decided":
        how = "picked by the operator" if ab["decided_by"] == "operator" else "chosen"
        verdict = f"winner {ab['winner']}, {how} at {ab['decided_at']}" + (
            ""
            if ab["decided_by"] == "operator"
            else (
                f" (cleared {ab['confidence']:.0%} confidence)"
                if ab["significant"]
                else f" (no variant cleared {ab['confidence']:.0%} confidence: A, the default, won)"
            )
        )
    else:
        verdict = f"{ab['state']}; decides at {ab['decides_at'] or 'the end of the wait'}"
    table = Table(title=f"A/B test of the {ab['field']} by people's unique {ab['metric']}")
    for column in ("variant", "value", "sent", "delivered", "opens", "clicks", "rate", "z", "p"):
        table.add_column(column)
    for row in figures["variants"]:
        table.add_row(
            row["variant"],
            str(row["value"]),
            str(row["sent"]),
            "—" if row.get("delivered") is None else str(row["delivered"]),
            str(row["human_unique_opens"]),
            str(row["human_unique_clicks"]),
            f"{row['rate']:.1%}",
            "" if row["z"] is None else f"{row['z']:.2f}",
            "" if row["p"] is None else f"{row['p']:.4f}",
        )
    counted = ab["accounting"]
    split = ", ".join(f"{name} {count}" for name, count in counted["variants"].items())
    return [
        table,
        f"{verdict}; recipients: {split}, remainder {counted['remainder']} "
        f"(total {counted['total']}); test share {ab['test_share']}%",
    ]


def register(app: typer.Typer) -> None:
    @app.command("pick-winner")
    def pick_winner(
        ctx: typer.Context,
        campaign_id: int = typer.Argument(..., help="The campaign's id."),
        variant: str = typer.Argument(..., help="The variant to send to the rest: A, B, C or D."),
        as_json: bool = typer.Option(False, "--json", help="Print JSON."),
    ) -> None:
        """Choose an A/B test's winner by hand, before its wait is over: the rest of the
        audience gets it at once (if the test share is being sent) and the automatic decision
        is not made. Recorded with the figures so far, and in the audit log."""

        async def go() -> dict[str, object] | None:
            async with container_for(ctx) as container:
                await container.ab_tests.pick(campaign_id, variant)
                await container.audit.record(
                    Actor.command_line(getpass.getuser()),
                    "campaign.ab_winner_picked",
                    target=f"campaign:{campaign_id}",
                    detail={"variant": variant.strip().upper()},
                )
                return await container.ab_tests.summary(campaign_id)

        summary = run(go)
        assert summary is not None
        if as_json:
            print(json.dumps(summary))
            return
        out_console.print(
            f"campaign {campaign_id}: variant {summary['winner']} picked; the rest of the "
            "audience gets it.",
            markup=False,
        )
