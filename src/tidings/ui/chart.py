"""Line charts as inline SVG geometry: pure arithmetic, no chart library. The SVG stretches to
its box (its stroke does not), and the numbers are HTML text beside it, so the chart fills any
width and its labels stay legible at 375 px."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

WIDTH = 600
HEIGHT = 160
PADDING = 2  # room for the stroke at the top and bottom of the plot
NICE_STEPS = (1, 2, 4, 5, 6, 8)


@dataclass(frozen=True, slots=True)
class LineChart:
    width: int
    height: int
    points: str  # an SVG polyline's `points`
    peak: int  # the value at the top of the scale: a round number at or above the data's
    middle: str  # the value half-way up, when it is a whole number ("" otherwise)
    middle_y: float  # where the half-way line is drawn
    first_label: str
    middle_label: str
    last_label: str
    summary: str  # the same numbers in words, for screen readers


def nice_ceiling(value: int) -> int:
    """The smallest of 1, 2, 4, 5, 6, 8, 10, 20, 40, … that is at least `value` (and 1)."""
    scale = 1
    while True:
        for step in NICE_STEPS:
            if step * scale >= value:
                return step * scale
        scale *= 10


def line_chart(
    labels: Sequence[str], values: Sequence[int], *, what: str, unit: str = "days"
) -> LineChart:
    """Plot `values` (one per label, oldest first) across the chart; the scale starts at 0 and
    ends at a round number just above the largest value, so the line uses the height."""
    peak = nice_ceiling(max([*values, 1]))
    step = WIDTH / max(len(values) - 1, 1)
    usable = HEIGHT - 2 * PADDING
    points = " ".join(
        f"{index * step:.1f},{HEIGHT - PADDING - usable * value / peak:.1f}"
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
        middle=str(peak // 2) if peak % 2 == 0 else "",
        middle_y=HEIGHT / 2,
        first_label=labels[0] if labels else "",
        middle_label=labels[len(labels) // 2] if len(labels) > 2 else "",
        last_label=labels[-1] if len(labels) > 1 else "",
        summary=summary,
    )
