"""`tidings bench send`'s reference clients never hold a large campaign (issue 42)."""

import pytest

from tidings.bench import bare_clients
from tidings.devservers.dev_server import run_dev_provider


@pytest.mark.parametrize("build_while_sending", [False, True])
async def test_bare_http_client_runs_on_a_sample_of_a_large_campaign(
    build_while_sending: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A client whose requests or readers are made before its clock starts would need a whole
    ten-million campaign in memory: past its sample it posts the campaign's first readers
    only, and its figures say so."""
    monkeypatch.setattr(bare_clients, "SAMPLE_RECIPIENTS", 2000)
    async with run_dev_provider() as server:
        figures = await bare_clients.bare_http_client(
            server.port, 5000, concurrency=2, build_while_sending=build_while_sending
        )
        addresses = sorted(recipient.address for recipient in server.store.recipients)
    assert (figures["messages"], figures["batches"]) == (2000, 2)
    assert figures["sampled"] == {"rows": 2000, "of": 5000}
    assert addresses == sorted(f"reader{number}@example.org" for number in range(2000))
