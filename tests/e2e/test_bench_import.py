"""`tidings bench import` runs end to end and reports JSON figures (AUD-9). Never timed."""

import csv
import io
import json

import pytest

from tidings.bench.importing import bench_import, generate_csv


async def test_bench_import_returns_well_formed_json(sqlite_url: str) -> None:
    """The figures are for people; the test checks only that they are there and consistent."""
    result = await bench_import(sqlite_url, rows=300)
    assert json.loads(json.dumps(result)) == result
    assert result["database"] == "sqlite"
    assert (result["rows"], result["created"], result["errors"]) == (300, 300, 0)
    assert result["reimport_unchanged"] == 300, "the second run of the same file is a no-op"
    for key in ("seconds", "rows_per_second", "reimport_seconds", "peak_rss_mib"):
        assert result[key] > 0


def test_generated_file_is_valid_and_repeatable() -> None:
    """A bench over a file the importer rejects, or one that changes between runs, measures nothing
    comparable."""
    text = generate_csv(200)
    rows = list(csv.DictReader(io.StringIO(text, newline="")))
    assert len(rows) == 200
    assert len({row["email"] for row in rows}) == 200
    assert {row["status"] for row in rows} == {"pending", "confirmed", "unsubscribed"}
    assert generate_csv(200) == text


async def test_bench_import_with_webhooks_reports_the_ratio_against_none(sqlite_url: str) -> None:
    """The webhook figure is only meaningful beside the plain import of the same file in the
    same run, and only if every new subscriber really queued a delivery per endpoint."""
    result = await bench_import(sqlite_url, rows=200, webhooks=2)
    hooked = result["webhooks"]
    assert (hooked["endpoints"], hooked["created"]) == (2, 200)
    assert hooked["deliveries_queued"] == 200 * 2, "one subscriber.created per row, per endpoint"
    assert hooked["ratio"] == pytest.approx(hooked["seconds"] / result["seconds"], rel=0.05)
