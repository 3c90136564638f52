"""Who may read the API's documentation (`admin_ui.api_docs`): anyone, only a signed-in
operator (others are sent to the sign-in form), or nobody (404)."""

from __future__ import annotations

from urllib.parse import quote

from starlette.requests import Request
from starlette.responses import RedirectResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from tidings.api.errors import problem
from tidings.bootstrap import Container
from tidings.ui.guard import session_cookie_name

DOCS_PATHS = ("/docs", "/redoc", "/openapi.json")


def is_docs_path(path: str) -> bool:
    return any(path == docs or path.startswith(docs + "/") for docs in DOCS_PATHS)


class DocsGate:
    def __init__(self, app: ASGIApp, container: Container) -> None:
        self.app = app
        self.container = container

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        mode = self.container.settings.admin_ui.api_docs
        if scope["type"] != "http" or mode == "public" or not is_docs_path(scope["path"]):
            await self.app(scope, receive, send)
            return
        if mode == "off":
            refusal = problem(404, "not_found", "Not Found")
            await refusal(scope, receive, send)
            return
        request = Request(scope)
        token = request.cookies.get(session_cookie_name(self.container), "")
        if token and await self.container.admins.session(token) is not None:
            await self.app(scope, receive, send)
            return
        back = quote(scope["path"], safe="/")
        await RedirectResponse(f"/admin/sign-in?next={back}", status_code=303)(scope, receive, send)
