"""The click and open endpoints (ENG-2, ENG-3): `GET|HEAD /c/{link}/{message}` redirects to
the stored URL, `GET|HEAD /o/{link}/{message}` answers a transparent GIF.

Public, unauthenticated, no cookies, no CSRF: served by `TrackingFirst` ahead of the whole
stack, like provider events, because a campaign's first minutes bring thousands of them a
second (privacy proxies fetch every pixel on delivery). Anything that does not verify (forged,
altered, truncated, enormous, binary, a deleted campaign's) gets the same small 404 page and
records nothing; never a redirect to anywhere a token does not name. A Range header is ignored.
"""

from __future__ import annotations

import time
from urllib.parse import quote

from starlette.types import ASGIApp, Receive, Scope, Send

from tidings.api.middleware import count_request
from tidings.bootstrap import Container
from tidings.domain.errors import TidingsError
from tidings.domain.tracking import CLICK_PATH, MAX_TOKEN_LENGTH, OPEN_PATH, HitKind

CLICK_ROUTE = "/c/{link}/{message}"
OPEN_ROUTE = "/o/{link}/{message}"
# The longest path worth reading: two tokens and their slashes. Longer is refused unread.
MAX_PATH = len(CLICK_PATH) + 2 * MAX_TOKEN_LENGTH + 1
# The smallest transparent GIF (1x1, 43 bytes).
PIXEL = bytes.fromhex(
    "47494638396101000100800000000000ffffff21f90401000000002c00000000010001000002024401003b"
)
NOT_FOUND = (
    b"<!doctype html><meta charset=utf-8><title>Link not found</title>"
    b"<p>This link is not known here. It may have been mistyped or cut short.</p>"
)
# Keep every reserved and unreserved character of a URL; escape the rest (non-ASCII, spaces,
# CR and LF: nothing a stored URL holds can split the header).
URL_SAFE = ":/?#[]@!$&'()*+,;=%~-._"
_COMMON = [
    (b"cache-control", b"no-store, private"),
    (b"referrer-policy", b"no-referrer"),
    (b"x-content-type-options", b"nosniff"),
]
_NOT_FOUND_HEADERS = [
    (b"content-type", b"text/html; charset=utf-8"),
    (b"content-length", str(len(NOT_FOUND)).encode()),
    *_COMMON,
]
_PIXEL_HEADERS = [
    (b"content-type", b"image/gif"),
    (b"content-length", str(len(PIXEL)).encode()),
    *_COMMON,
]


def _header(scope: Scope, name: bytes) -> str:
    for key, value in scope["headers"]:
        if key == name:
            return str(value.decode("latin-1"))
    return ""


class TrackingFirst:
    """Serve the two tracking routes before the rest of the app (see the module)."""

    def __init__(self, app: ASGIApp, container: Container) -> None:
        self.app = app
        self._container = container

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path: str = scope.get("path", "") if scope["type"] == "http" else ""
        kind = (
            HitKind.CLICK
            if path.startswith(CLICK_PATH)
            else HitKind.OPEN
            if path.startswith(OPEN_PATH)
            else None
        )
        method = scope.get("method", "")
        if kind is None or method not in ("GET", "HEAD"):
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status, headers, body = await self._answer(scope, kind, path, method)
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": b"" if method == "HEAD" else body})
        route = CLICK_ROUTE if kind is HitKind.CLICK else OPEN_ROUTE
        count_request(self._container.metrics, method, route, status, started)

    async def _answer(
        self, scope: Scope, kind: HitKind, path: str, method: str
    ) -> tuple[int, list[tuple[bytes, bytes]], bytes]:
        parts = path[len(CLICK_PATH) :].split("/") if len(path) <= MAX_PATH else []
        if len(parts) != 2:
            return 404, _NOT_FOUND_HEADERS, NOT_FOUND
        client = scope.get("client")
        try:
            url = await self._container.intake.take(
                kind,
                parts[0],
                parts[1],
                method=method,
                user_agent=_header(scope, b"user-agent"),
                address=client[0] if client else None,
            )
        except TidingsError:  # the database is unreachable or busy, and the link not cached
            headers = [(b"retry-after", b"5"), (b"content-length", b"0"), *_COMMON]
            return 503, headers, b""
        if url is None:
            return 404, _NOT_FOUND_HEADERS, NOT_FOUND
        if kind is HitKind.OPEN:
            return 200, _PIXEL_HEADERS, PIXEL
        location = quote(url, safe=URL_SAFE).encode("ascii")
        return 302, [(b"location", location), (b"content-length", b"0"), *_COMMON], b""
