"""The dashboard's growth chart as inline SVG geometry: pure arithmetic, no chart library."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

WIDTH = 600
HEIGHT = 160
PADDING = 24


@dataclass(frozen=True, slots=True)
class LineChart:
    width: int
    height: int
    points: str  # an SVG polyline's `points`
    peak: int  # the value at the top of the scale
    first_label: str
    last_label: str
    summary: str  # the same numbers in words, for screen readers


def line_chart(
    labels: Sequence[str], values: Sequence[int], *, what: str, unit: str = "days"
) -> LineChart:
    """Plot `values` (one per label, oldest first) across the chart; the scale starts at 0."""
    peak = max([*values, 1])
    step = (WIDTH - 2 * PADDING) / max(len(values) - 1, 1)
    usable = HEIGHT - 2 * PADDING
    points = " ".join(
        f"{PADDING + index * step:.1f},{HEIGHT - PADDING - usable * value / peak:.1f}"
        for index, value in enumerate(values)
    )
    total = sum(values)
    summary = (
        f"{total} {what} over {len(values)} {unit}, at most {max([*values, 0])} in one "
        f"{unit.removesuffix('s')}"
        if values
        else f"no {what}"
    )
    return LineChart(
        width=WIDTH,
        height=HEIGHT,
        points=points,
        peak=peak,
        first_label=labels[0] if labels else "",
        last_label=labels[-1] if labels else "",
        summary=summary,
    )
