"""`tidings bench tracking` runs end to end and reports JSON figures (ENG-3, ENG-5). Never
timed: it checks the figures come from hits that were really taken, classified and counted."""

import json

from tidings.bench.tracking import bench_tracking


async def test_bench_tracking_reports_hits_latency_and_the_report_beside_a_bare_insert(
    database_url: str,
) -> None:
    """Every hit sent must have been answered and applied, the people's clicks counted as
    human and the burst as a machine's, and the ratio the one the two rates imply."""
    result = await bench_tracking(database_url, hits=300, connections=4, report_recipients=50)
    assert json.loads(json.dumps(result)) == result
    people = result["people_clicks"]
    assert result["answers"]["people_302"] == people > 0
    assert sum(result["answers"].values()) == result["hits"]
    assert result["applied_hits"] == result["hits"] + 200  # the warm-up's hits are applied too
    assert result["counted"]["clicks"]["human_total"] == people
    assert result["counted"]["opens"]["human_total"] == 0  # the proxy's opens are machine
    assert result["counted"]["opens"]["machine_total"] > 0
    ratio = result["hits_per_second"] / result["bare_insert_rows_per_second"]
    assert abs(result["ratio_to_bare_insert"] - ratio) < 0.01
    latency = result["redirect_latency_ms"]
    assert 0 < latency["p50"] <= latency["p99"] <= latency["max"]
    assert result["report_ms"] >= result["report_engagement_ms"] > 0  # the page reads both
    assert result["report_count_ms"] > 0  # the workers' count of the 50 rows, stored first
    assert result["report"]["tracking"] == "aggregate"
