"""`run_render_benchmark` reports well-formed figures (its speed is not a test's business)."""

import json

from tests.support.clock import START
from tidings.bench.render import run_render_benchmark


def test_the_render_benchmark_reports_both_paths_as_json() -> None:
    """The CLI prints this as JSON; a missing or non-numeric figure breaks its readers."""
    report = run_render_benchmark(50, now=START, comparison_sample=3)
    assert json.loads(json.dumps(report)) == report
    assert report["recipients"] == 50
    assert report["template_renders"] == 1
    for key in ("personalised", "full_render_per_recipient"):
        figures = report[key]
        assert isinstance(figures, dict)
        assert figures["messages_per_second"] > 0
        assert figures["microseconds_per_message"] > 0
    assert report["full_render_per_recipient"]["sample"] == 3  # type: ignore[index]
    assert isinstance(report["average_message_bytes"], int)
    assert report["average_message_bytes"] > 0
