"""The Mailgun-compatible provider (PRV-2): one `POST /v3/{domain}/messages` per batch, one
`POST /v3/{domain}/messages.mime` per transactional message.

A batch of up to 1,000 recipients goes out as one multipart form: a `to` field per recipient,
`recipient-variables` (JSON, keyed by address) holding each recipient's variables, and
`h:Message-Id: <%recipient.message_id%>`, which Mailgun fills in per recipient from the
`message_id` variable, so every recipient gets the Message-ID the caller chose (CMP-4).
Mailgun substitutes `%recipient.NAME%` in the subject, the bodies and `h:` headers alike.

A transactional message (`send`, the per-recipient protocol) is already serialised: it goes to
`messages.mime` byte for byte, as the file part `message`, with a `to` field per envelope
recipient, so what was built and signed is what Mailgun sends.

Both calls' outcomes are classified at the boundary, in one place (HOUSE rule 8), by status
and by how far the request got, never by reading text:

- 2xx: accepted; an answer's `rejected` list (a dev-provider extension) names recipients
  refused inside an accepted batch.
- 429, 408, 500, 502, 503 and other 5xx: `TemporaryFailure` (Retry-After honoured).
- 504: `UncertainDelivery`. A gateway timed out waiting for Mailgun, which may still accept.
- 401, 403: `SenderRefused`. The key or the sending domain was refused: every call fails the
  same way until the settings change, and no recipient is to blame.
- other 4xx (and 3xx: redirects are not followed): `PermanentFailure`.
- nothing sent yet: cannot connect or no pooled connection free (`ProviderUnreachable`), or the
  request body never left because the connection broke (`TemporaryFailure`); safe to retry.
- the body went out (or may still be leaving a closing socket) and then the connection dropped
  or the answer did not come in time: `UncertainDelivery` (SND-13).

How far the request got comes from httpcore's `trace` extension, which reports the start, end
or failure of sending the request body on the connection actually used. Logs carry status
codes, counts and ids, never addresses or response text (PRI-5).
"""

from __future__ import annotations

import asyncio
import json
import ssl
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import format_datetime
from typing import Any, Literal

import httpcore
import httpx
import structlog

from tidings.delivery.form_data import FilePart, encode_multipart
from tidings.delivery.provider import (
    BatchMessage,
    DeliveryFailure,
    Envelope,
    PermanentFailure,
    ProviderUnreachable,
    Rejection,
    SenderRefused,
    SendResult,
    TemporaryFailure,
    UncertainDelivery,
)
from tidings.delivery.webhook_client import parse_retry_after

# Mailgun's own open and click tracking, off for every message whatever the domain's setting:
# tidings counts opens and clicks itself, only as the newsletter's tracking mode and the
# reader's consent allow (ENG-1); Mailgun's would rewrite every link with a redirect naming
# the recipient, and add a pixel, in mail sent with tracking `off`.
NO_PROVIDER_TRACKING = (
    ("o:tracking", "no"),
    ("o:tracking-clicks", "no"),
    ("o:tracking-opens", "no"),
)

log = structlog.get_logger("tidings.delivery")

MAILGUN_MAX_RECIPIENTS = 1000
MESSAGE_ID_VARIABLE = "message_id"
# A JSON string literal, as `json.dumps(value, ensure_ascii=False)` writes it (C-accelerated).
_json_string: Callable[[str], str] = json.encoder.encode_basestring
BATCH_VARIABLE = "tidings-batch"
MAX_RESPONSE_BYTES = 1024 * 1024
MAX_RETRY_AFTER_SECONDS = 3600.0
MAX_REJECTION_DETAIL = 300
MIME_FILENAME = "message.mime"
MIME_CONTENT_TYPE = "message/rfc822"
TEMPORARY_STATUSES = frozenset({408, 429})
# The key or the sending domain refused (not any recipient): named, and the send pauses.
SENDER_REFUSED_STATUSES = {401: "API key refused", 403: "sending domain not allowed"}
UNCERTAIN_STATUSES = frozenset({504})
NOTHING_SENT = (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout)
# Our request was refused by our own HTTP stack or URL before a byte left: retrying is futile.
CANNOT_SEND = (httpx.UnsupportedProtocol, httpx.LocalProtocolError)
BodyState = Literal["unsent", "sending", "sent", "broken"]


@dataclass(frozen=True, slots=True)
class _Call:
    """One of the two calls: its endpoint and the log events of its outcome."""

    endpoint: str
    accepted_event: str
    failed_event: str


BATCH_CALL = _Call("messages", "provider.batch.accepted", "provider.batch.failed")
MESSAGE_CALL = _Call("messages.mime", "provider.message.accepted", "provider.message.failed")


class MailgunProvider:
    """Sends batches and single messages through Mailgun's messages API (or `tidings
    dev-provider`): both a `BatchProvider` and a `PerRecipientProvider`.

    `timeout_seconds` bounds the whole request: connecting, sending and the answer.
    `send_time_optimization_hours` (24-72) asks Mailgun to deliver each message within that
    many hours, at the time its recipient usually reads mail (`o:deliverytime-optimize-period`).
    """

    name = "mailgun"

    def __init__(
        self,
        *,
        api_key: str,
        domain: str,
        base_url: str = "https://api.mailgun.net",
        timeout_seconds: float = 20.0,
        max_batch_size: int = MAILGUN_MAX_RECIPIENTS,
        max_connections: int = 10,
        send_time_optimization_hours: int | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
        tls_context: ssl.SSLContext | None = None,
    ) -> None:
        if not 1 <= max_batch_size <= MAILGUN_MAX_RECIPIENTS:
            raise ValueError(f"max_batch_size must be 1 to {MAILGUN_MAX_RECIPIENTS}")
        if (
            send_time_optimization_hours is not None
            and not 24 <= send_time_optimization_hours <= 72
        ):
            raise ValueError("send_time_optimization_hours must be 24 to 72")
        if not domain or "/" in domain:
            raise ValueError("domain must be a sending domain, e.g. mg.example.com")
        self.max_batch_size = max_batch_size
        self._domain = domain
        self._base_url = httpx.URL(base_url)
        self._timeout = timeout_seconds
        self._optimize_hours = send_time_optimization_hours
        # Loading the trust store costs a context 0.8 MB: clients of one process share one
        # (given here); without it the client loads httpx's default.
        self.tls_context = tls_context
        self._client = httpx.AsyncClient(
            base_url=base_url.rstrip("/"),
            auth=("api", api_key),
            timeout=httpx.Timeout(timeout_seconds),
            limits=httpx.Limits(
                max_connections=max_connections, max_keepalive_connections=max_connections
            ),
            follow_redirects=False,
            headers={"user-agent": "tidings"},
            transport=transport,
            verify=True if tls_context is None else tls_context,
        )

    @property
    def endpoint(self) -> str:
        """host:port of the API, to name it when it fails (SND-26); no credentials."""
        url = self._base_url
        port = url.port or (443 if url.scheme == "https" else 80)
        return f"{url.host}:{port}"

    async def send_batch(self, batch: BatchMessage) -> SendResult:
        if not batch.recipients:
            return SendResult(accepted=[])
        addresses = [recipient.address for recipient in batch.recipients]
        return await self._submit(BATCH_CALL, lambda: self.form_fields(batch), addresses)

    async def send(self, envelope: Envelope) -> SendResult:
        """One serialised message to its envelope recipients, through `messages.mime`."""
        return await self._submit(MESSAGE_CALL, lambda: _mime_fields(envelope), envelope.recipients)

    async def close(self) -> None:
        await self._client.aclose()

    def form_fields(self, batch: BatchMessage) -> list[tuple[str, str]]:
        """The form, after refusing (before any call) a batch Mailgun would mangle."""
        if len(batch.recipients) > self.max_batch_size:
            raise PermanentFailure(
                f"a batch of {len(batch.recipients)} recipients is over this provider's "
                f"maximum of {self.max_batch_size}"
            )
        names = tuple(batch.variable_names)
        if MESSAGE_ID_VARIABLE in names:
            raise PermanentFailure(f"the variable {MESSAGE_ID_VARIABLE!r} is reserved")
        # `recipient-variables` is written as JSON text recipient by recipient, each value
        # through the json module's own string encoder: no dict is built per recipient.
        keys = [f"{_json_string(name)}:" for name in (*names, MESSAGE_ID_VARIABLE)]
        addresses: set[str] = set()
        variables: list[str] = []
        for address, bracketed_id, own in batch.recipients:  # up to 1,000 times per call
            if address in addresses:
                raise PermanentFailure("two recipients of the batch share one address")
            addresses.add(address)
            message_id = bracketed_id.strip().removeprefix("<").removesuffix(">")
            if not message_id or _has_line_break(message_id):
                raise PermanentFailure("a recipient's Message-ID is empty or holds a line break")
            if len(own) != len(names):
                raise PermanentFailure("a recipient's variables do not match the batch's names")
            values = (*own, message_id)
            pairs = ",".join(
                [key + _json_string(value) for key, value in zip(keys, values, strict=True)]
            )
            variables.append(f"{_json_string(address)}:{{{pairs}}}")
        fields = [("from", batch.sender)]
        fields.extend(("to", recipient.address) for recipient in batch.recipients)
        fields.append(("subject", batch.subject))
        fields.append(("text", batch.text))
        if batch.html:
            fields.append(("html", batch.html))
        fields.append(("recipient-variables", "{" + ",".join(variables) + "}"))
        fields.append(("h:Message-Id", f"<%recipient.{MESSAGE_ID_VARIABLE}%>"))
        fields.extend(_header_fields(batch.headers))
        fields.append((f"v:{BATCH_VARIABLE}", batch.idempotency_key))
        if batch.deliver_at is not None:
            if batch.deliver_at.tzinfo is None:
                raise PermanentFailure("deliver_at must carry a time zone")
            when = format_datetime(batch.deliver_at.astimezone(UTC), usegmt=True)
            fields.append(("o:deliverytime", when))
        if self._optimize_hours is not None:
            fields.append(("o:deliverytime-optimize-period", f"{self._optimize_hours}h"))
        fields.extend(NO_PROVIDER_TRACKING)
        return fields

    async def _submit(
        self,
        call: _Call,
        fields: Callable[[], Sequence[tuple[str, str | FilePart]]],
        addresses: Sequence[str],
    ) -> SendResult:
        """One POST of the form `fields()` builds, its outcome classified and logged."""
        if self._client.is_closed:
            raise TemporaryFailure("the provider is closed")
        started = time.monotonic()
        try:
            content_type, body = encode_multipart(fields())
            status, headers, answer = await self._post(call.endpoint, content_type, body)
            result = _outcome(addresses, status, headers, answer)
        except DeliveryFailure as failure:
            log.warning(
                call.failed_event,
                provider=self.name,
                outcome=_outcome_name(failure),
                status=failure.status,
                recipient_count=len(addresses),
                elapsed_ms=_elapsed_ms(started),
            )
            raise
        log.info(
            call.accepted_event,
            provider=self.name,
            status=status,
            recipient_count=len(addresses),
            rejected_count=len(result.rejected),
            provider_message_id=result.provider_message_id,
            elapsed_ms=_elapsed_ms(started),
        )
        return result

    async def _post(
        self, endpoint: str, content_type: str, body: bytes
    ) -> tuple[int, httpx.Headers, dict[str, Any] | None]:
        """Status, headers and JSON answer of one POST; failures before a status are raised."""
        progress = _Progress()
        deadline = asyncio.get_running_loop().time() + self._timeout
        request = self._client.build_request(
            "POST",
            f"/v3/{self._domain}/{endpoint}",
            content=body,
            headers={"content-type": content_type},
            extensions={"trace": progress.trace},
        )
        try:
            async with asyncio.timeout_at(deadline):
                response = await self._client.send(request, stream=True)
        except TimeoutError:
            raise progress.lost("no answer within the timeout") from None
        except NOTHING_SENT as exc:
            raise ProviderUnreachable(
                f"cannot reach the provider ({type(exc).__name__})", cause=type(exc).__name__
            ) from None
        except CANNOT_SEND as exc:
            raise PermanentFailure(f"the request cannot be sent ({type(exc).__name__})") from None
        except httpx.TransportError as exc:
            raise progress.lost(f"connection lost ({type(exc).__name__})") from None
        # The status is in; a body that fails to arrive does not change what it says.
        try:
            async with asyncio.timeout_at(deadline):
                answer = await _read_json(response)
        except (TimeoutError, httpx.HTTPError):
            answer = None
        finally:
            await response.aclose()
        return response.status_code, response.headers, answer


class _Progress:
    """How far the request body got, from httpcore's trace events."""

    __slots__ = ("body",)

    def __init__(self) -> None:
        self.body: BodyState = "unsent"

    async def trace(self, event: str, info: Mapping[str, Any]) -> None:
        if event.endswith("send_request_body.started"):
            self.body = "sending"
        elif event.endswith("send_request_body.complete"):
            self.body = "sent"
        elif event.endswith("send_request_body.failed") and isinstance(
            info.get("exception"), httpcore.WriteError
        ):
            # The connection broke mid-body: what was still buffered is discarded with it, so
            # the provider never had the whole request and cannot have acted on it.
            self.body = "broken"

    def lost(self, what: str) -> DeliveryFailure:
        if self.body in ("unsent", "broken"):
            return TemporaryFailure(f"{what}; the request was not sent")
        # "sending": a socket being closed still flushes what it buffered, so even a request
        # cut short mid-body may arrive whole.
        return UncertainDelivery(f"{what}; the provider may have accepted the request")


async def _read_json(response: httpx.Response) -> dict[str, Any] | None:
    chunks: list[bytes] = []
    size = 0
    async for chunk in response.aiter_bytes():
        size += len(chunk)
        if size > MAX_RESPONSE_BYTES:
            return None
        chunks.append(chunk)
    try:
        parsed = json.loads(b"".join(chunks))
    except ValueError:
        return None
    return parsed if isinstance(parsed, dict) else None


def _outcome(
    addresses: Sequence[str], status: int, headers: httpx.Headers, answer: dict[str, Any] | None
) -> SendResult:
    if 200 <= status < 300:
        rejected = _rejections(addresses, answer)
        return SendResult(
            accepted=[address for address in addresses if address not in rejected],
            rejected=rejected,
            provider_message_id=_provider_message_id(answer),
        )
    detail = f"the provider answered {status}"
    if status in UNCERTAIN_STATUSES:
        raise UncertainDelivery(f"{detail}; it may still accept the request", status=status)
    if status in TEMPORARY_STATUSES or status >= 500:
        retry_after = parse_retry_after(
            headers.get("retry-after"), now=datetime.now(UTC), cap_seconds=MAX_RETRY_AFTER_SECONDS
        )
        raise TemporaryFailure(detail, status=status, retry_after_seconds=retry_after)
    if status in SENDER_REFUSED_STATUSES:
        cause = f"{SENDER_REFUSED_STATUSES[status]}, reply {status}"
        raise SenderRefused(detail, cause=cause, status=status)
    raise PermanentFailure(detail, status=status)


def _rejections(addresses: Sequence[str], answer: dict[str, Any] | None) -> dict[str, Rejection]:
    """The answer's `rejected` list (a dev-provider extension), limited to this request's."""
    listed = (answer or {}).get("rejected")
    if not isinstance(listed, list):
        return {}
    sent = set(addresses)
    rejected: dict[str, Rejection] = {}
    for item in listed:
        if not isinstance(item, dict) or item.get("address") not in sent:
            continue
        status = item.get("status")
        status = status if isinstance(status, int) else None
        permanent = item.get("permanent")
        if not isinstance(permanent, bool):
            permanent = status is None or status >= 500
        reason = item.get("reason")
        detail = reason[:MAX_REJECTION_DETAIL] if isinstance(reason, str) else ""
        rejected[item["address"]] = Rejection(permanent=permanent, status=status, detail=detail)
    return rejected


def _provider_message_id(answer: dict[str, Any] | None) -> str | None:
    """Mailgun's id for the batch; None when it only echoes our per-recipient template."""
    provider_id = (answer or {}).get("id")
    if not isinstance(provider_id, str) or not provider_id or "%recipient." in provider_id:
        return None
    return provider_id


def _mime_fields(envelope: Envelope) -> list[tuple[str, str | FilePart]]:
    """The `messages.mime` form, after refusing (before any call) what Mailgun would refuse."""
    if not envelope.recipients:
        raise PermanentFailure("the message has no recipients")
    if len(envelope.recipients) > MAILGUN_MAX_RECIPIENTS:
        raise PermanentFailure(f"a message goes to at most {MAILGUN_MAX_RECIPIENTS} recipients")
    if any(_has_line_break(address) for address in envelope.recipients):
        raise PermanentFailure("a recipient's address holds a line break")
    fields: list[tuple[str, str | FilePart]] = [("to", address) for address in envelope.recipients]
    fields.append(("message", FilePart(MIME_FILENAME, MIME_CONTENT_TYPE, envelope.data)))
    fields.extend(NO_PROVIDER_TRACKING)
    return fields


def _header_fields(headers: Mapping[str, str]) -> list[tuple[str, str]]:
    """`h:` fields; folded values are unfolded (Mailgun folds), any other line break refused."""
    fields = []
    for name, value in headers.items():
        if name.lower() == "message-id":
            raise PermanentFailure("the Message-ID header is set per recipient by the provider")
        unfolded = value.replace("\r\n ", " ").replace("\r\n\t", " ")
        if _has_line_break(unfolded) or _has_line_break(name):
            raise PermanentFailure(f"the {name} header holds a line break")
        fields.append((f"h:{name}", unfolded))
    return fields


def _has_line_break(value: str) -> bool:
    return "\r" in value or "\n" in value or "\x00" in value


def _outcome_name(failure: DeliveryFailure) -> str:
    if isinstance(failure, UncertainDelivery):
        return "uncertain"
    if isinstance(failure, SenderRefused):
        return "sender_refused"
    return "temporary" if isinstance(failure, TemporaryFailure) else "permanent"


def _elapsed_ms(started: float) -> int:
    return round((time.monotonic() - started) * 1000)
