"""ASGI middleware: request ids, request logging and metrics, and the body size limit."""

from __future__ import annotations

import re
import time
import uuid
from collections.abc import Callable, Iterable, Mapping

import structlog
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from tidings.api.errors import problem
from tidings.domain.errors import InvalidInput, PayloadTooLarge
from tidings.observability.logging import get_logger
from tidings.observability.metrics import Metrics

log = get_logger("tidings.http")


_NUL_IN_URL = (b"%00", b"\x00")
# Reader pages answer a mangled token with their own HTML 404 (the token never reaches storage).
_READER_PAGES = (b"/confirm/", b"/unsubscribe/", b"/preferences/", b"/keep/")
_NUL_IN_BODY = (b"\x00", b"\\u0000")


class RequestGuard:
    """Refuse, before the app reads them, bodies over `max_bytes` (413: by Content-Length at
    once, else while streaming) and NUL characters in the URL or body, raw or JSON-escaped
    (400: no field accepts one and PostgreSQL cannot store one; PRI-8). The paths in
    `uploads` take binary files (NUL bytes are theirs): their own limit, no NUL check."""

    def __init__(self, app: ASGIApp, max_bytes: int, uploads: Mapping[str, int] | None = None):
        self.app = app
        self.max_bytes = max_bytes
        self.uploads = dict(uploads or {})

    def _too_large(self, limit: int, *, upload: bool) -> Response:
        detail = f"the limit is {limit} bytes"
        if not upload:
            return problem(413, PayloadTooLarge.code, PayloadTooLarge.title, detail)
        detail = f"the upload is larger than {limit} bytes (media.max_upload_bytes, with its form)"
        errors = [{"field": "file", "message": detail}]
        return problem(413, PayloadTooLarge.code, PayloadTooLarge.title, detail, errors=errors)

    def _refusal_before_body(self, scope: Scope, upload_limit: int | None) -> Response | None:
        limit = self.max_bytes if upload_limit is None else upload_limit
        path = scope.get("raw_path", b"")
        url = (
            (b"" if path.startswith(_READER_PAGES) else path)
            + b"?"
            + scope.get("query_string", b"")
        )
        if any(marker in url.lower() for marker in _NUL_IN_URL):
            return _nul_problem()
        for name, value in scope["headers"]:
            if name == b"content-length" and value.isdigit() and int(value) > limit:
                return self._too_large(limit, upload=upload_limit is not None)
        return None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        upload_limit = self.uploads.get(scope["path"])
        limit = self.max_bytes if upload_limit is None else upload_limit
        refusal = self._refusal_before_body(scope, upload_limit)
        if refusal is not None:
            await refusal(scope, receive, send)
            return
        received = 0
        tail = b""

        async def checked_receive() -> Message:
            nonlocal received, tail, refusal
            message = await receive()
            if message["type"] == "http.request":
                body = message.get("body", b"")
                received += len(body)
                if received > limit:
                    refusal = self._too_large(limit, upload=upload_limit is not None)
                    raise PayloadTooLarge(f"the limit is {limit} bytes")
                if upload_limit is None and any(marker in tail + body for marker in _NUL_IN_BODY):
                    refusal = _nul_problem()
                    raise InvalidInput("the request contains a NUL character")
                tail = (tail + body)[-5:]  # a marker split across two chunks is still seen
            return message

        async def guarded_send(message: Message) -> None:
            # Frameworks turn errors raised while reading the body into their own 400; once a
            # body is refused, whatever the app answers is replaced by the refusal.
            if refusal is None:
                await send(message)
            elif message["type"] == "http.response.start":
                await refusal(scope, receive, send)

        await self.app(scope, checked_receive, guarded_send)


def _nul_problem() -> Response:
    return problem(400, "bad_request", "The request contains a NUL character")


class RouteTemplates:
    """Map a raw path to its route template (`/unsubscribe/{token}`), so tokens in paths
    never reach logs or metric labels. Built on first use from `paths`, in routing order (the
    first template that matches wins, as the first route does)."""

    def __init__(self, paths: Callable[[], Iterable[str]]) -> None:
        self._paths = paths
        self._compiled: list[tuple[re.Pattern[str], str]] | None = None

    def template_for(self, path: str) -> str:
        if self._compiled is None:
            self._compiled = [
                (re.compile("^" + re.sub(r"\\{[^/]+?\\}", "[^/]+", re.escape(t)) + "$"), t)
                for t in dict.fromkeys(self._paths())
            ]
        for pattern, template in self._compiled:
            if pattern.match(path):
                return template
        return "unmatched"


class RequestContext:
    """Give each request an id, log it by route template (never the raw path), count it."""

    def __init__(self, app: ASGIApp, metrics: Metrics, routes: RouteTemplates) -> None:
        self.app = app
        self.metrics = metrics
        self.routes = routes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request_id = uuid.uuid4().hex
        started = time.perf_counter()
        status = 500

        async def send_with_id(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                message.setdefault("headers", [])
                message["headers"] = [*message["headers"], (b"x-request-id", request_id.encode())]
            await send(message)

        with structlog.contextvars.bound_contextvars(request_id=request_id):
            try:
                await self.app(scope, receive, send_with_id)
            finally:
                route = self.routes.template_for(scope["path"])
                count_request(self.metrics, scope["method"], route, status, started)
                # Who made the request (bound by authentication) ends with it.
                structlog.contextvars.unbind_contextvars("admin_id", "api_key_id")


def count_request(metrics: Metrics, method: str, route: str, status: int, started: float) -> None:
    """Count and log one answered request by its route template (never the raw path)."""
    elapsed = time.perf_counter() - started
    metrics.http_requests.labels(method, route, str(status)).inc()
    metrics.http_duration.labels(route).observe(elapsed)
    log.info(
        "http.request",
        method=method,
        route=route,
        status=status,
        duration_ms=round(elapsed * 1000, 1),
    )
