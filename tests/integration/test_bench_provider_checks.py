"""`tidings bench send` checks what its provider accepted in SQL, not in memory (issue 42)."""

from pathlib import Path

import pytest

from tidings.bench import provider_checks
from tidings.bench.provider_checks import accepted_at_provider, log_size


async def test_accepted_at_provider_counts_a_reader_accepted_twice(
    database_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The duplicate check at the provider must catch a reader accepted twice and count only
    the part of the log the send wrote, however the log is cut while it is streamed into the
    database (chunks here end inside addresses)."""
    monkeypatch.setattr(provider_checks, "CHUNK_BYTES", 5)
    log = tmp_path / "accepted.txt"
    log.write_text("before@example.test\n")
    start = log_size(log)
    with log.open("a") as file:
        file.write("reader-1@example.test\nreader-2@example.test\nreader-1@example.test\n")
    end = log_size(log)
    with log.open("a") as file:
        file.write("after@example.test\n")
    counted = await accepted_at_provider(database_url, log, start, end)
    assert counted == {"accepted": 3, "distinct": 2, "duplicates": 1}
