"""Transport and browser hardening for every response (UI-2): HSTS on an https site, the admin
UI moved to https before any form is shown, and a strict policy on the pages readers open
from an email (no framing, no sniffing, no referrer). A page may widen one directive of the
policy by sending it itself: the embeddable signup form names who may frame it."""

from __future__ import annotations

from starlette.datastructures import MutableHeaders
from starlette.responses import RedirectResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

HSTS = "max-age=31536000"
# The reader-facing pages: a form and a button, styled inline, no script, never framed.
PUBLIC_PAGE_POLICY = {
    "default-src": "'none'",
    "style-src": "'unsafe-inline'",
    "img-src": "https: data:",
    "form-action": "'self'",
    "frame-ancestors": "'none'",
    "base-uri": "'none'",
}
# With audience.altcha on, the signup forms carry one inline script that fetches a challenge.
FORM_SCRIPT_POLICY = {"script-src": "'unsafe-inline'", "connect-src": "'self'"}
PUBLIC_PAGE_HEADERS = {
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",
}
# The public archive and its feeds (API-4) show authors' content: the same policy keeps any
# markup that got through from running, loading from elsewhere or being framed.
PUBLIC_PAGE_PREFIXES = (
    "/subscribe",
    "/confirm/",
    "/unsubscribe/",
    "/preferences/",
    "/keep/",
    "/archive",
)


def _under(path: str, prefix: str) -> bool:
    return path == prefix or path.startswith(prefix.rstrip("/") + "/")


class SiteHardening:
    """`public_origin` is site.public_url without a trailing slash; an https one turns on
    HSTS and the redirect of plain-http admin requests (after uvicorn has applied the
    trusted proxies' X-Forwarded-Proto to the scope's scheme)."""

    def __init__(self, app: ASGIApp, public_origin: str, form_scripts: bool = False) -> None:
        self.app = app
        self.origin = public_origin.rstrip("/")
        self.https_site = self.origin.startswith("https://")
        self.policy = PUBLIC_PAGE_POLICY | (FORM_SCRIPT_POLICY if form_scripts else {})

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path: str = scope["path"]
        if self.https_site and scope.get("scheme") == "http" and _under(path, "/admin"):
            # Never show the sign-in form (or take a password) over plain http. The target
            # is built from the configured origin, never from the request's Host header.
            query = scope.get("query_string", b"").decode("latin-1")
            target = self.origin + path + (f"?{query}" if query else "")
            await RedirectResponse(target, status_code=308)(scope, receive, send)
            return
        public_page = any(_under(path, prefix) for prefix in PUBLIC_PAGE_PREFIXES)

        async def hardened(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                if self.https_site:
                    headers["strict-transport-security"] = HSTS
                if public_page:
                    for name, value in PUBLIC_PAGE_HEADERS.items():
                        headers[name] = value
                    policy = self.policy | _directives(headers.get("content-security-policy", ""))
                    headers["content-security-policy"] = "; ".join(
                        f"{name} {value}" for name, value in policy.items()
                    )
                    if policy["frame-ancestors"] == "'none'":
                        headers["x-frame-options"] = "DENY"
            await send(message)

        await self.app(scope, receive, hardened)


def _directives(policy: str) -> dict[str, str]:
    """A Content-Security-Policy header as {directive: its sources}."""
    found: dict[str, str] = {}
    for part in policy.split(";"):
        name, _, sources = part.strip().partition(" ")
        if name:
            found[name.lower()] = sources.strip()
    return found
