"""`tidings bench subscribe` runs end to end and reports JSON figures (AUD-5). Never timed."""

import json

from tidings.bench.subscribe import CASES, bench_subscribe


async def test_bench_subscribe_reports_a_median_per_address_state(database_url: str) -> None:
    """Timing equality is shown by this command, not asserted by a test: the test checks that
    every address state is measured and the ratio is the one the figures imply."""
    result = await bench_subscribe(database_url, requests=3)
    assert json.loads(json.dumps(result)) == result
    assert result["database"] in ("sqlite", "postgresql")
    assert result["requests_per_case"] == 3
    medians = result["median_ms"]
    assert (
        set(medians)
        == set(CASES)
        == {
            "new",
            "pending",
            "confirmed",
            "unsubscribed",
            "suppressed",
        }
    )
    assert all(value > 0 for value in medians.values())
    ratio = max(medians.values()) / min(medians.values())
    assert abs(result["slowest_to_fastest_ratio"] - ratio) < 0.01
    assert result["within_target"] == (result["slowest_to_fastest_ratio"] < result["target_ratio"])
