"""`tidings bench events` runs end to end and reports JSON figures (PRV-6). Never timed."""

import json

from tidings.bench.event_intake import bench_events


async def test_bench_events_reports_throughput_beside_a_bare_insert(database_url: str) -> None:
    """The figures must come from events that were really applied: every event posted is an
    applied row, and the ratio is the one the two rates imply."""
    result = await bench_events(database_url, events=40, connections=4)
    assert json.loads(json.dumps(result)) == result
    assert result["outcomes"] == {"applied": 40}
    assert result["applied_rows"] == 40
    assert result["events_per_second"] > 0
    assert result["bare_insert_rows_per_second"] > 0
    assert result["api_cpu_ms_per_event"] > 0  # the API process's CPU was read (Linux)
    ratio = result["events_per_second"] / result["bare_insert_rows_per_second"]
    assert abs(result["ratio_to_bare_insert"] - ratio) < 0.01
    assert result["within_target"] == (
        result["events_per_second"] >= result["target_events_per_second"]
        and result["ratio_to_bare_insert"] >= result["target_ratio"]
    )
