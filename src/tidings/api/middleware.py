"""ASGI middleware: request ids, request logging and metrics, and the body size limit."""

from __future__ import annotations

import re
import time
import uuid
from collections.abc import Callable, Iterable

import structlog
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from tidings.api.errors import problem
from tidings.domain.errors import InvalidInput, PayloadTooLarge
from tidings.observability.logging import get_logger
from tidings.observability.metrics import Metrics

log = get_logger("tidings.http")


class BodySizeLimit:
    """Refuse bodies over `max_bytes`: by Content-Length at once, else while streaming."""

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        for name, value in scope["headers"]:
            if name == b"content-length" and value.isdigit() and int(value) > self.max_bytes:
                await self._too_large(scope, receive, send)
                return
        received = 0
        exceeded = False

        async def limited_receive() -> Message:
            nonlocal received, exceeded
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.max_bytes:
                    exceeded = True
                    raise PayloadTooLarge(f"the limit is {self.max_bytes} bytes")
            return message

        async def guarded_send(message: Message) -> None:
            # Frameworks turn errors raised while reading the body into their own 400; once
            # the limit is passed, whatever the app answers is replaced by one 413.
            if not exceeded:
                await send(message)
            elif message["type"] == "http.response.start":
                await self._too_large(scope, receive, send)

        await self.app(scope, limited_receive, guarded_send)

    async def _too_large(self, scope: Scope, receive: Receive, send: Send) -> None:
        response = problem(
            413, PayloadTooLarge.code, PayloadTooLarge.title, f"the limit is {self.max_bytes} bytes"
        )
        await response(scope, receive, send)


_NUL_IN_URL = (b"%00", b"\x00")
_NUL_IN_BODY = (b"\x00", b"\\u0000")


class RefuseNul:
    """Refuse requests carrying NUL characters (in the URL, or raw or JSON-escaped in the
    body): no field of tidings accepts one, and PostgreSQL cannot store one, so they are
    turned away at the door with a 400 instead of failing deep inside (PRI-8)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        url = scope.get("raw_path", b"") + b"?" + scope.get("query_string", b"")
        if any(marker in url.lower() for marker in _NUL_IN_URL):
            await _nul_problem(scope, receive, send)
            return
        found = False
        tail = b""

        async def checked_receive() -> Message:
            nonlocal found, tail
            message = await receive()
            if message["type"] == "http.request":
                chunk = tail + message.get("body", b"")
                if any(marker in chunk for marker in _NUL_IN_BODY):
                    found = True
                    raise InvalidInput("the request contains a NUL character")
                tail = chunk[-5:]  # a marker split across two chunks is still seen
            return message

        async def guarded_send(message: Message) -> None:
            if not found:
                await send(message)
            elif message["type"] == "http.response.start":
                await _nul_problem(scope, receive, send)

        await self.app(scope, checked_receive, guarded_send)


async def _nul_problem(scope: Scope, receive: Receive, send: Send) -> None:
    response = problem(400, "bad_request", "The request contains a NUL character")
    await response(scope, receive, send)


class RouteTemplates:
    """Map a raw path to its route template (`/unsubscribe/{token}`), so tokens in paths
    never reach logs or metric labels. Built lazily from the OpenAPI document's paths."""

    def __init__(self, paths: Callable[[], Iterable[str]]) -> None:
        self._paths = paths
        self._compiled: list[tuple[re.Pattern[str], str]] | None = None

    def template_for(self, path: str) -> str:
        if self._compiled is None:
            self._compiled = [
                (re.compile("^" + re.sub(r"\\{[^/]+?\\}", "[^/]+", re.escape(t)) + "$"), t)
                for t in self._paths()
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
                elapsed = time.perf_counter() - started
                self.metrics.http_requests.labels(scope["method"], route, str(status)).inc()
                self.metrics.http_duration.labels(route).observe(elapsed)
                log.info(
                    "http.request",
                    method=scope["method"],
                    route=route,
                    status=status,
                    duration_ms=round(elapsed * 1000, 1),
                )
