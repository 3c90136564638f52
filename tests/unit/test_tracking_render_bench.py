"""`tidings bench render` reports the tracked variant beside the untracked one (ENG-2)."""

import json

from tests.support.clock import START
from tidings.bench.render import run_render_benchmark


def test_the_render_benchmark_reports_the_tracked_variant_and_its_ratio() -> None:
    """Issue 36 asks that tracking keep the substitution speed: the report must carry the
    tracked figures and their ratio to the untracked run, or nobody can check it."""
    report = run_render_benchmark(50, now=START, comparison_sample=3)
    tracked = json.loads(json.dumps(report))["tracked"]
    assert tracked["tracked_links"] == 2  # the sample's paid segment links two pages
    assert tracked["messages_per_second"] > 0
    assert tracked["message_token_microseconds"] > 0
    assert tracked["ratio_to_untracked"] > 0
    assert tracked["speedup"] > 0
    # The tracked message is the longer one: its links carry tokens and it has a pixel.
    assert tracked["average_message_bytes"] > report["average_message_bytes"]  # type: ignore[operator]
