"""The batch-provider dev server speaks Mailgun's send API, stores what it accepts and injects
the faults it is told to (PRV-4, `tidings dev-provider`).

These drive it with a bare httpx client, so a fault that silently stopped working shows up
here and not as a provider test that passes for the wrong reason.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from email.message import EmailMessage
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.cli import clean_env, tidings
from tests.support.waiting import wait_until
from tidings.delivery.form_data import FilePart, encode_multipart
from tidings.devservers.dev_faults import Action, Fault, FaultPlan
from tidings.devservers.dev_server import DevProviderServer, run_dev_provider

SEND = "/v3/mg.example.com/messages"
SEND_MIME = "/v3/mg.example.com/messages.mime"


def form(*recipients: str, **extra: str) -> list[tuple[str, str]]:
    fields = [("from", "news@example.com"), *(("to", address) for address in recipients)]
    fields += [("subject", "Hi %recipient.name%"), ("text", "Hello %recipient.name%")]
    variables = {address: {"name": address.split("@")[0].upper()} for address in recipients}
    fields.append(("recipient-variables", json.dumps(variables)))
    fields += list(extra.items())
    return fields


def mime_message(message_id: str = "<welcome-1@example.com>") -> bytes:
    message = EmailMessage()
    message["From"] = "News <news@example.com>"
    message["To"] = "ann@example.com"
    message["Subject"] = "Café au lait"  # non-ASCII: sent as an encoded word
    message["Message-ID"] = message_id
    message.set_content("Hello Ann")
    message.add_alternative("<p>Hello Ann</p>", subtype="html")
    return message.as_bytes()


def mime_form(*recipients: str, message: bytes | None = None) -> list[tuple[str, str | FilePart]]:
    data = mime_message() if message is None else message
    fields: list[tuple[str, str | FilePart]] = [("to", address) for address in recipients]
    fields.append(("message", FilePart("message.mime", "message/rfc822", data)))
    return fields


async def post(
    client: httpx.AsyncClient, fields: list[tuple[str, str | FilePart]], path: str = SEND
) -> httpx.Response:
    content_type, body = encode_multipart(fields)
    return await client.post(path, content=body, headers={"content-type": content_type})


@pytest.fixture
async def client(dev_provider: DevProviderServer) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=dev_provider.base_url, timeout=5) as http:
        yield http


async def test_port_zero_binds_a_free_port(dev_provider: DevProviderServer) -> None:
    """Parallel tests and benchmarks each need their own server without choosing ports."""
    assert dev_provider.port > 0
    assert dev_provider.base_url == f"http://127.0.0.1:{dev_provider.port}"


async def test_a_send_is_answered_like_mailgun_and_stored_per_recipient(
    dev_provider: DevProviderServer, client: httpx.AsyncClient
) -> None:
    """Clients written against Mailgun must work unchanged against the dev server."""
    response = await post(client, form("ann@example.com", "bob@example.com"))
    assert response.status_code == 200
    answer = response.json()
    assert answer["message"] == "Queued. Thank you."
    assert answer["id"].endswith("@mg.example.com>")
    listed = (await client.get("/_dev/messages")).json()
    assert listed["count"] == 2
    assert [(m["address"], m["subject"]) for m in listed["messages"]] == [
        ("ann@example.com", "Hi ANN"),
        ("bob@example.com", "Hi BOB"),
    ]
    assert all(m["domain"] == "mg.example.com" for m in listed["messages"])
    assert listed["messages"][0]["message_id"] != listed["messages"][1]["message_id"]


async def test_a_urlencoded_form_like_curls_is_accepted(client: httpx.AsyncClient) -> None:
    """`curl -d` and several SDKs send urlencoded forms; Mailgun takes them, so must we."""
    response = await client.post(
        SEND, data={"from": "a@example.com", "to": ["c@example.com", "d@example.com"], "text": "x"}
    )
    assert response.status_code == 200
    assert (await client.get("/_dev/stats")).json()["accepted_recipients"] == 2


async def test_messages_can_be_filtered_and_cleared(
    dev_provider: DevProviderServer, client: httpx.AsyncClient
) -> None:
    """A test looks up the message it sent by Message-ID or address, then starts clean."""
    await post(client, form("ann@example.com", **{"h:Message-Id": "<%recipient.name%@x.org>"}))
    await client.post(
        "/v3/other.example.com/messages",
        data={"from": "a@example.com", "to": "bob@example.com", "text": "x"},
    )
    by_id = (await client.get("/_dev/messages", params={"message_id": "<ANN@x.org>"})).json()
    assert [m["address"] for m in by_id["messages"]] == ["ann@example.com"]
    by_domain = (await client.get("/_dev/messages", params={"domain": "other.example.com"})).json()
    assert [m["address"] for m in by_domain["messages"]] == ["bob@example.com"]
    page = (await client.get("/_dev/messages", params={"limit": 1, "offset": 1})).json()
    assert page["count"] == 2
    assert [m["address"] for m in page["messages"]] == ["bob@example.com"]
    assert (await client.delete("/_dev/messages")).json() == {"deleted": 2}
    assert dev_provider.store.recipients == []


async def test_a_mime_message_is_stored_per_recipient_with_its_own_message_id_and_subject(
    dev_provider: DevProviderServer, client: httpx.AsyncClient
) -> None:
    """Transactional mail goes out as a finished message; tests find it by its Message-ID."""
    response = await post(client, mime_form("ann@example.com", "bob@example.com"), SEND_MIME)
    assert response.status_code == 200
    assert response.json() == {"id": "<welcome-1@example.com>", "message": "Queued. Thank you."}
    stored = dev_provider.store.recipients
    assert [r.address for r in stored] == ["ann@example.com", "bob@example.com"]
    assert {(r.message_id, r.subject, r.domain) for r in stored} == {
        ("<welcome-1@example.com>", "Café au lait", "mg.example.com")
    }
    assert stored[0].text().strip() == "Hello Ann"
    assert stored[0].html().strip() == "<p>Hello Ann</p>"
    assert stored[0].headers()["From"] == "News <news@example.com>"
    assert dev_provider.stats["mime_requests"] == 1
    listed = (await client.get("/_dev/messages", params={"address": "bob@example.com"})).json()
    assert [m["message_id"] for m in listed["messages"]] == ["<welcome-1@example.com>"]


@pytest.mark.parametrize(
    ("fields", "problem"),
    [
        (mime_form(), "to parameter is missing"),
        ([("to", "a@example.com")], "message parameter is missing"),
        (mime_form("a@example.com", message=b""), "message parameter is missing"),
        ([("to", "a@example.com"), ("message", "From: a@example.com\n\nx")], "file upload"),
        ([*mime_form("a@example.com"), ("attachment", FilePart("a", "text/plain", b"x"))], "file"),
        (mime_form(*(f"r{n}@example.com" for n in range(1001))), "too many recipients"),
    ],
    ids=["no-to", "no-message", "empty-message", "message-as-text", "other-file", "1001"],
)
async def test_mime_requests_mailgun_would_refuse_get_400_and_store_nothing(
    dev_provider: DevProviderServer,
    client: httpx.AsyncClient,
    fields: list[tuple[str, str | FilePart]],
    problem: str,
) -> None:
    """The double must refuse a malformed MIME send, or client bugs would surface in production."""
    response = await post(client, fields, SEND_MIME)
    assert response.status_code == 400
    assert problem in response.json()["message"]
    assert dev_provider.store.recipients == []


@pytest.mark.parametrize(
    ("fault", "stored"),
    [
        (Fault(action="status", status=429, retry_after="5", times=1), 0),
        (Fault(action="drop_before_accept", times=1), 0),
        (Fault(action="drop_after_accept", times=1), 1),
        (Fault(action="reject", reject_fraction=1.0, times=1), 0),
        (Fault(action="accept", delay_seconds=0.2, times=1), 1),
    ],
    ids=["status", "drop-before", "drop-after", "reject", "slow"],
)
async def test_the_fault_plan_applies_to_mime_sends_too(
    dev_provider: DevProviderServer, client: httpx.AsyncClient, fault: Fault, stored: int
) -> None:
    """Transactional sends must be testable against every fault a batch can meet."""
    dev_provider.faults.replace([fault])
    try:
        response: httpx.Response | None = await post(client, mime_form("a@example.com"), SEND_MIME)
    except httpx.RemoteProtocolError:
        response = None
    assert (response is None) == fault.action.startswith("drop")
    if fault.action == "status":
        assert response is not None
        assert (response.status_code, response.headers["retry-after"]) == (429, "5")
    if fault.action == "reject":
        assert response is not None
        assert [item["address"] for item in response.json()["rejected"]] == ["a@example.com"]
    if fault.action == "accept":
        assert response is not None
        assert response.status_code == 200
        assert dev_provider.stats["delayed"] == 1
    assert len(dev_provider.store.recipients) == stored
    # The fault struck once; the next MIME send is accepted.
    assert (await post(client, mime_form("b@example.com"), SEND_MIME)).status_code == 200


@pytest.mark.parametrize(
    ("fields", "problem"),
    [
        ([("to", "a@example.com"), ("text", "x")], "from parameter is missing"),
        ([("from", "a@example.com"), ("text", "x")], "to parameter is missing"),
        ([("from", "a@example.com"), ("to", "b@example.com")], "at least one of"),
        (form("a@example.com", **{"recipient-variables": "{not json"}), "not a valid JSON"),
        (form(*(f"r{n}@example.com" for n in range(1001))), "too many recipients"),
        (form("a@example.com", **{"o:deliverytime": "tomorrow"}), "RFC 2822"),
        (form("a@example.com", **{"o:deliverytime-optimize-period": "12h"}), "24h to 72h"),
        (form("a@example.com", **{"o:tracking-opens": "maybe"}), "o:tracking-opens must be"),
    ],
    ids=["no-from", "no-to", "no-body", "bad-json", "1001", "bad-time", "bad-period", "bad-track"],
)
async def test_requests_mailgun_would_refuse_get_400_and_store_nothing(
    dev_provider: DevProviderServer,
    client: httpx.AsyncClient,
    fields: list[tuple[str, str]],
    problem: str,
) -> None:
    """A double that accepts what Mailgun refuses would hide client bugs until production."""
    response = await post(client, fields)
    assert response.status_code == 400
    assert problem in response.json()["message"]
    assert dev_provider.store.recipients == []


async def test_faults_strike_the_next_n_requests_then_stop(client: httpx.AsyncClient) -> None:
    """Tests script "fail twice, then succeed" to exercise retries deterministically."""
    programmed = await client.post(
        "/_dev/faults", json={"action": "status", "status": 503, "retry_after": "3", "times": 2}
    )
    assert programmed.json()["faults"][0]["times_left"] == 2
    statuses = [(await post(client, form("a@example.com"))).status_code for _ in range(3)]
    assert statuses == [503, 503, 200]
    assert (await client.get("/_dev/faults")).json() == {"faults": []}
    stats = (await client.get("/_dev/stats")).json()
    assert stats["status_503"] == 2
    assert stats["requests"] == 3


async def test_injected_status_carries_retry_after(client: httpx.AsyncClient) -> None:
    """Retry-After handling can only be tested against a server that sends it."""
    await client.post("/_dev/faults", json={"action": "status", "status": 429, "retry_after": "9"})
    response = await post(client, form("a@example.com"))
    assert response.status_code == 429
    assert response.headers["retry-after"] == "9"


def test_a_rate_strikes_about_that_fraction_of_requests() -> None:
    """Benchmarks inject a few percent of failures; the rate must mean what it says."""
    plan = FaultPlan([Fault(action="status", rate=0.25)], seed=7)
    struck = sum(plan.pick() is not None for _ in range(4000))
    assert 850 < struck < 1150


async def test_invalid_faults_are_refused_naming_the_field(client: httpx.AsyncClient) -> None:
    """A typo in a fault must fail loudly, not leave a test running without its fault."""
    response = await client.post("/_dev/faults", json={"action": "status", "statu": 503})
    assert response.status_code == 400
    assert "statu" in response.json()["message"]
    response = await client.post("/_dev/faults", json=[{"action": "explode"}])
    assert response.status_code == 400
    assert (await client.get("/_dev/faults")).json() == {"faults": []}


@pytest.mark.parametrize(
    ("action", "stored"), [("drop_after_accept", 1), ("drop_before_accept", 0)]
)
async def test_a_dropped_connection_gets_no_answer_at_all(
    dev_provider: DevProviderServer, client: httpx.AsyncClient, action: Action, stored: int
) -> None:
    """The client must see a vanished connection, not a 500, to exercise the uncertain path."""
    dev_provider.faults.replace([Fault(action=action, times=1)])
    with pytest.raises(httpx.RemoteProtocolError, match="without sending a response"):
        await post(client, form("a@example.com"))
    assert len(dev_provider.store.recipients) == stored
    assert (await post(client, form("b@example.com"))).status_code == 200


async def test_recipient_markers_are_rejected_inside_an_accepted_batch(
    dev_provider: DevProviderServer, client: httpx.AsyncClient
) -> None:
    """Per-recipient refusals must be testable from any process, without programming faults."""
    response = await post(
        client, form("ok@example.com", "x+reject550@example.com", "y+defer451@example.com")
    )
    assert response.status_code == 200
    rejected = {item["address"]: item for item in response.json()["rejected"]}
    assert rejected["x+reject550@example.com"]["status"] == 550
    assert rejected["x+reject550@example.com"]["permanent"] is True
    assert rejected["y+defer451@example.com"]["permanent"] is False
    assert [r.address for r in dev_provider.store.recipients] == ["ok@example.com"]


async def test_an_api_key_is_required_when_set() -> None:
    """Clients must be shown to send Mailgun's basic auth, or production would answer 401."""
    async with (
        run_dev_provider(api_key="key-1") as server,
        httpx.AsyncClient(base_url=server.base_url) as http,
    ):
        content_type, body = encode_multipart(form("a@example.com"))
        headers = {"content-type": content_type}
        assert (await http.post(SEND, content=body, headers=headers)).status_code == 401
        wrong = await http.post(SEND, content=body, headers=headers, auth=("api", "key-2"))
        assert wrong.status_code == 401
        right = await http.post(SEND, content=body, headers=headers, auth=("api", "key-1"))
        assert right.status_code == 200


async def test_store_dir_gets_json_lines_of_batches_and_recipients(tmp_path: Path) -> None:
    """`--store DIR` keeps what was accepted for a developer to read after the server stops."""
    async with (
        run_dev_provider(store_dir=tmp_path) as server,
        httpx.AsyncClient(base_url=server.base_url) as http,
    ):
        await post(http, form("a@example.com", "b@example.com"))
    [batch] = [json.loads(line) for line in (tmp_path / "batches.jsonl").read_text().splitlines()]
    assert batch["recipient_count"] == 2
    assert batch["text"] == "Hello %recipient.name%"
    lines = (tmp_path / "recipients.jsonl").read_text().splitlines()
    assert [json.loads(line)["subject"] for line in lines] == ["Hi A", "Hi B"]


def test_cli_help_describes_faults() -> None:
    """`tidings dev-provider --help` is where a developer learns what it can do."""
    result = tidings("dev-provider", "--help", env=clean_env() | {"COLUMNS": "200"})
    assert result.returncode == 0
    for flag in ("--fail-status", "--drop-after-accept-rate", "--reject-rate", "--slow"):
        assert flag in result.stdout


def unused_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture
def cli_server() -> Iterator[tuple[str, subprocess.Popen[str]]]:
    port = unused_port()
    env = {key: value for key, value in os.environ.items() if not key.startswith("TIDINGS_")}
    process = subprocess.Popen(
        [sys.executable, "-m", "tidings", "dev-provider", "--port", str(port),
         "--fail-status", "503", "--fail-times", "1"],
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )  # fmt: skip
    base_url = f"http://127.0.0.1:{port}"
    try:

        def answering() -> bool:
            assert process.poll() is None, "the dev provider exited"
            try:
                httpx.get(f"{base_url}/_dev/stats", timeout=1)
            except httpx.TransportError:
                return False
            return True

        wait_until(answering, message="the dev provider never answered")
        yield base_url, process
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGINT)
            process.wait(timeout=30)


@pytest.mark.slow
def test_cli_server_accepts_a_message_with_its_start_up_fault(
    cli_server: tuple[str, subprocess.Popen[str]],
) -> None:
    """Benchmarks and manual checks run it as a process; flags must program its faults."""
    base_url, process = cli_server
    content_type, body = encode_multipart(form("ann@example.com"))
    headers = {"content-type": content_type}
    with httpx.Client(base_url=base_url, timeout=5) as http:
        assert http.post(SEND, content=body, headers=headers).status_code == 503
        assert http.post(SEND, content=body, headers=headers).status_code == 200
        listed: dict[str, Any] = http.get("/_dev/messages").json()
    assert [m["address"] for m in listed["messages"]] == ["ann@example.com"]
    process.send_signal(signal.SIGINT)
    _, stderr = process.communicate(timeout=30)
    assert process.returncode == 0
    assert "Accepted 1 recipient(s) in 1 request(s)." in stderr
