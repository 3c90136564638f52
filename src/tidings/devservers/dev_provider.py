"""The batch-provider dev server's ASGI app (PRV-4, `tidings dev-provider`): Mailgun's send
endpoints, `POST /v3/{domain}/messages` and `/messages.mime`, storing what they accept and
misbehaving on demand.

It takes the request exactly as Mailgun does (multipart or urlencoded form, repeated `to`,
`recipient-variables` JSON, `h:` headers, `v:` variables, `o:` options; for `messages.mime`,
`to` and the serialised message as the file part `message`; basic auth `api:KEY` when a key
is set) and answers `{"id": ..., "message": "Queued. Thank you."}`. Both endpoints share the
fault plan, the store and the answer. With an `EventPoster` set (`--events-url`), accepted
recipients hear back as Mailgun's webhooks do (`dev_events.py`). One extension:
an answer may carry `"rejected": [{"address", "status", "permanent", "reason"}]` for
recipients refused in an otherwise accepted batch (Mailgun reports those later, as events).
Inspection and fault control live under `/_dev/`, which is not part of Mailgun's API.

The app is plain ASGI, not a framework's router: the send endpoint is what benchmarks measure,
so it does nothing per request beyond parsing, substituting and storing. A dropped connection
is the transport closed under uvicorn's HTTP protocol, found through its `send` callable: an
exception would make uvicorn answer 500, which is exactly what a drop must not do.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import hmac
import json
import secrets
from collections import Counter
from collections.abc import Awaitable, Callable, Mapping
from datetime import UTC, datetime
from typing import Any
from urllib.parse import parse_qs

from starlette.responses import JSONResponse
from starlette.types import Receive, Scope, Send

from tidings.devservers.dev_events import EventPoster
from tidings.devservers.dev_faults import Fault, FaultPlan, marker_rejection, parse_faults
from tidings.devservers.dev_store import AcceptedBatch, AcceptedRecipient, DevStore, Template
from tidings.devservers.dev_submission import (
    Submission,
    SubmissionError,
    parse_mime_submission,
    parse_submission,
)

MAX_BODY_BYTES = 32 * 1024 * 1024  # Mailgun takes messages up to 25 MB, plus form overhead
QUEUED = "Queued. Thank you."
# The send endpoints, `/v3/{domain}/<endpoint>`, and how each reads its request.
SEND_ENDPOINTS: dict[str, Callable[[str, bytes], Submission]] = {
    "messages": parse_submission,
    "messages.mime": parse_mime_submission,
}


class DevProviderApp:
    """The ASGI app. `faults` and `store` may be changed while it runs."""

    def __init__(self, store: DevStore, faults: FaultPlan, *, api_key: str | None = None) -> None:
        self.store = store
        self.faults = faults
        self.stats: Counter[str] = Counter()
        self.events: EventPoster | None = None  # posts signed events back, when set
        self._api_key = api_key
        self._routes: dict[tuple[str, str], Callable[[Scope, Receive], Awaitable[JSONResponse]]]
        self._routes = {
            ("GET", "/_dev/messages"): self._list_messages,
            ("DELETE", "/_dev/messages"): self._clear_messages,
            ("GET", "/_dev/batches"): self._list_batches,
            ("GET", "/_dev/faults"): self._list_faults,
            ("POST", "/_dev/faults"): self._set_faults,
            ("DELETE", "/_dev/faults"): self._clear_faults,
            ("GET", "/_dev/stats"): self._show_stats,
        }

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await _lifespan(receive, send)
            return
        if scope["type"] != "http":
            return
        path: str = scope["path"]
        domain, _, endpoint = path.removeprefix("/v3/").rpartition("/")
        if path.startswith("/v3/domains/") and scope["method"] == "GET":
            response = self._domain(scope, path.removeprefix("/v3/domains/"))
        elif path.startswith("/v3/") and endpoint in SEND_ENDPOINTS:
            if scope["method"] != "POST":
                response = _error(405, "method not allowed")
            elif not domain or "/" in domain:
                response = _error(404, "domain not found")
            else:
                await self._messages(scope, receive, send, domain, endpoint)
                return
        else:
            route = self._routes.get((scope["method"], path))
            response = _error(404, "not found") if route is None else await route(scope, receive)
        await response(scope, receive, send)

    async def _messages(
        self, scope: Scope, receive: Receive, send: Send, domain: str, endpoint: str
    ) -> None:
        self.stats["requests"] += 1
        if endpoint == "messages.mime":
            self.stats["mime_requests"] += 1
        if self._api_key is not None and not _authorised(scope, self._api_key):
            self.stats["unauthorised"] += 1
            await _error(401, "Invalid private key")(scope, receive, send)
            return
        body = await _read_body(receive, MAX_BODY_BYTES)
        if body is None:
            self.stats["too_large"] += 1
            await _error(413, "request entity too large")(scope, receive, send)
            return
        fault = self.faults.pick()
        if fault is not None and fault.delay_seconds > 0:
            self.stats["delayed"] += 1
            await asyncio.sleep(fault.delay_seconds)
        action = "accept" if fault is None else fault.action
        if action == "status" and fault is not None:
            self.stats[f"status_{fault.status}"] += 1
            retry_after = {"Retry-After": fault.retry_after} if fault.retry_after else None
            await _error(fault.status, f"injected {fault.status}", retry_after)(
                scope, receive, send
            )
            return
        if action == "drop_before_accept":
            self.stats["dropped_before_accept"] += 1
            await _drop(send, receive)
            return
        try:
            submission = SEND_ENDPOINTS[endpoint](_header(scope, b"content-type"), body)
        except SubmissionError as exc:
            self.stats["invalid"] += 1
            await _error(400, str(exc))(scope, receive, send)
            return
        answer = await self._accept(domain, submission, fault)
        if action == "drop_after_accept":
            self.stats["dropped_after_accept"] += 1
            await _drop(send, receive)
            return
        await JSONResponse(answer)(scope, receive, send)

    async def _accept(
        self, domain: str, submission: Submission, fault: Fault | None
    ) -> dict[str, Any]:
        now = datetime.now(UTC)
        batch_id = f"<{now:%Y%m%d%H%M%S}.{secrets.token_hex(8)}@{domain}>"
        headers = {name: Template(value) for name, value in submission.headers.items()}
        message_id = next(
            (value for name, value in headers.items() if name.lower() == "message-id"), None
        )
        batch = AcceptedBatch(
            batch_id=batch_id,
            domain=domain,
            sender=submission.sender,
            subject=Template(submission.subject),
            html=Template(submission.html),
            text=Template(submission.text),
            headers=headers,
            options=submission.options,
            user_variables=submission.user_variables,
            accepted_at=now,
            recipient_count=len(submission.addresses),
        )
        accepted: list[AcceptedRecipient] = []
        rejected: list[dict[str, Any]] = []
        for address in submission.addresses:
            refusal = _refusal(address, fault)
            if refusal is not None:
                status, permanent = refusal
                rejected.append(
                    {"address": address, "status": status, "permanent": permanent,
                     "reason": f"{status} rejected by the dev provider"}
                )  # fmt: skip
                continue
            variables = submission.recipient_variables.get(address, {})
            accepted.append(
                AcceptedRecipient(
                    address=address,
                    message_id=(
                        message_id.render(variables)
                        if message_id is not None
                        else f"<{now:%Y%m%d%H%M%S}.{secrets.token_hex(8)}@{domain}>"
                    ),
                    subject=batch.subject.render(variables),
                    variables=variables,
                    batch=batch,
                )
            )
        await self.store.add(batch, accepted)
        if self.events is not None:
            self.events.enqueue([(r.address, r.message_id) for r in accepted])
        self.stats["accepted_requests"] += 1
        self.stats["accepted_recipients"] += len(accepted)
        self.stats["rejected_recipients"] += len(rejected)
        # Like Mailgun, the id is the Message-Id header as submitted (templates and all).
        answer: dict[str, Any] = {
            "id": message_id.source if message_id is not None else batch_id,
            "message": QUEUED,
        }
        if rejected:
            answer["rejected"] = rejected
        return answer

    async def _list_messages(self, scope: Scope, receive: Receive) -> JSONResponse:
        query = _query(scope)
        found = self.store.find(
            domain=query.get("domain"),
            message_id=query.get("message_id"),
            address=query.get("address"),
            batch_id=query.get("batch_id"),
        )
        offset, limit = _page(query)
        page = [recipient.to_json() for recipient in found[offset : offset + limit]]
        return JSONResponse({"count": len(found), "messages": page})

    async def _clear_messages(self, scope: Scope, receive: Receive) -> JSONResponse:
        deleted = len(self.store.recipients)
        self.store.clear()
        return JSONResponse({"deleted": deleted})

    async def _list_batches(self, scope: Scope, receive: Receive) -> JSONResponse:
        offset, limit = _page(_query(scope))
        batches = self.store.batches[offset : offset + limit]
        return JSONResponse(
            {"count": len(self.store.batches), "batches": [b.to_json() for b in batches]}
        )

    async def _list_faults(self, scope: Scope, receive: Receive) -> JSONResponse:
        return JSONResponse({"faults": self.faults.to_json()})

    async def _set_faults(self, scope: Scope, receive: Receive) -> JSONResponse:
        body = await _read_body(receive, 1024 * 1024)
        try:
            faults = parse_faults(json.loads(body or b"null"))
        except ValueError as exc:
            return _error(400, f"invalid faults: {exc}")
        self.faults.replace(faults)
        return JSONResponse({"faults": self.faults.to_json()})

    async def _clear_faults(self, scope: Scope, receive: Receive) -> JSONResponse:
        self.faults.clear()
        return JSONResponse({"faults": []})

    def _domain(self, scope: Scope, domain: str) -> JSONResponse:
        """`GET /v3/domains/{domain}`, as `tidings mailgun check` reads it: every well-formed
        domain is on the dev provider's account, and active."""
        if self._api_key is not None and not _authorised(scope, self._api_key):
            return _error(401, "Invalid private key")
        if not domain or "/" in domain:
            return _error(404, "Domain not found")
        return JSONResponse({"domain": {"name": domain, "state": "active"}})

    async def _show_stats(self, scope: Scope, receive: Receive) -> JSONResponse:
        return JSONResponse(
            {
                **self.stats,
                "stored_batches": len(self.store.batches),
                "stored_recipients": len(self.store.recipients),
                "events": dict(self.events.stats) if self.events is not None else {},
            }
        )


def _refusal(address: str, fault: Fault | None) -> tuple[int, bool] | None:
    marked = marker_rejection(address)
    if marked is not None:
        return marked
    if fault is not None and fault.action == "reject" and fault.rejects(address):
        permanent = fault.reject_permanent
        return fault.reject_status, fault.reject_status >= 500 if permanent is None else permanent
    return None


async def _drop(send: Send, receive: Receive) -> None:
    """Close the connection without a word and wait until the server has noticed."""
    transport = getattr(getattr(send, "__self__", None), "transport", None)
    if transport is None:
        raise RuntimeError("dropping a connection needs uvicorn's HTTP protocol")
    transport.close()
    while (await receive())["type"] != "http.disconnect":
        pass


async def _read_body(receive: Receive, limit: int) -> bytes | None:
    """The whole request body, or None once it grows past `limit`."""
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            break
        chunk: bytes = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            return None
        chunks.append(chunk)
        if not message.get("more_body", False):
            break
    return b"".join(chunks)


def _authorised(scope: Scope, api_key: str) -> bool:
    scheme, _, encoded = _header(scope, b"authorization").partition(" ")
    if scheme.lower() != "basic":
        return False
    try:
        user, _, key = base64.b64decode(encoded, validate=True).decode().partition(":")
    except (binascii.Error, UnicodeDecodeError):
        return False
    return user == "api" and hmac.compare_digest(key.encode(), api_key.encode())


def _header(scope: Scope, name: bytes) -> str:
    for key, value in scope["headers"]:
        if key == name:
            return bytes(value).decode("latin-1")
    return ""


def _query(scope: Scope) -> dict[str, str]:
    parsed = parse_qs(scope["query_string"].decode("latin-1"))
    return {key: values[-1] for key, values in parsed.items()}


def _page(query: Mapping[str, str]) -> tuple[int, int]:
    try:
        offset = max(int(query.get("offset", "0")), 0)
        limit = max(int(query.get("limit", "10000")), 0)
    except ValueError:
        return 0, 10000
    return offset, limit


def _error(status: int, message: str, headers: Mapping[str, str] | None = None) -> JSONResponse:
    return JSONResponse({"message": message}, status_code=status, headers=headers)


async def _lifespan(receive: Receive, send: Send) -> None:
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            await send({"type": "lifespan.shutdown.complete"})
            return
