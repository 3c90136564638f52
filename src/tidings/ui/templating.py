"""Rendering admin pages: the UI's Jinja environment (autoescaped), the site's theme, and the
route class that turns a missing session, a bad CSRF token or a refused use case into a page."""

from __future__ import annotations

from collections.abc import Callable, Coroutine, Sequence
from datetime import datetime
from typing import Any, TypeVar
from zoneinfo import ZoneInfo

from fastapi import Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from fastapi.routing import APIRoute
from jinja2 import Environment, PackageLoader, StrictUndefined, select_autoescape

from tidings.access.admins import AdminSession
from tidings.bootstrap import theme_from
from tidings.domain.errors import TidingsError
from tidings.domain.roles import required_role
from tidings.error_status import retry_after, status_for
from tidings.ui.guard import (
    CSRF_FIELD,
    CsrfRejected,
    SignInRequired,
    TwoFactorSetupRequired,
    container_of,
)

T = TypeVar("T")
_environment = Environment(
    loader=PackageLoader("tidings.ui", "templates"),
    autoescape=select_autoescape(enabled_extensions=("html", "svg"), default=True),
    undefined=StrictUndefined,
    trim_blocks=True,
    lstrip_blocks=True,
)
# Pages hold personal data: never cached, never framed, no referrer, scripts from here only.
SECURITY_HEADERS = {
    "Cache-Control": "no-store",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "SAMEORIGIN",
    "X-Content-Type-Options": "nosniff",
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
        "img-src 'self' https: data:; connect-src 'self'; frame-src 'self'; "
        "form-action 'self'; frame-ancestors 'self'; base-uri 'none'"
    ),
}


def _when(value: datetime | None) -> str:
    return "—" if value is None else value.strftime("%Y-%m-%d %H:%M UTC")


def _when_in(value: datetime | None, zone: str) -> str:
    """A time in the site's zone and in UTC (`2026-12-02 09:00 Europe/Paris, 08:00 UTC`), or
    UTC alone when the site keeps UTC."""
    if value is None or zone == "UTC":
        return _when(value)
    local = value.astimezone(ZoneInfo(zone))
    return f"{local:%Y-%m-%d %H:%M} {zone}, {value.astimezone(ZoneInfo('UTC')):%H:%M} UTC"


# What people read for a campaign's state; the API keeps `submitted` (docs/api.md): every
# recipient was handed to the provider, which is what an operator calls sent.
STATUS_WORDS = {"submitted": "sent"}


def status_word(status: str) -> str:
    return STATUS_WORDS.get(str(status), str(status))


_environment.filters["when"] = _when
_environment.filters["when_in"] = _when_in
_environment.filters["status_word"] = status_word


def render(
    request: Request,
    name: str,
    *,
    status_code: int = 200,
    csrf_token: str | None = None,
    **context: Any,
) -> HTMLResponse:
    """A full admin page. `csrf_token` goes into every form; pages with a session pass it."""
    container = container_of(request)
    html = _environment.get_template(name).render(
        theme=theme_from(container.settings),
        site_name=container.settings.site.name,
        site_timezone=container.settings.site.timezone,
        path=request.url.path,
        csrf_field=CSRF_FIELD,
        csrf_token=csrf_token,
        **context,
    )
    return HTMLResponse(html, status_code=status_code, headers=SECURITY_HEADERS)


class UiRoute(APIRoute):
    """Answers in HTML: 303 to sign-in without a session, 403 for a missing or wrong CSRF
    token, and an error page for a refused use case or a malformed parameter."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def handle(request: Request) -> Response:
            response = await answer(request)
            for name in ("Cache-Control", "Referrer-Policy", "X-Content-Type-Options"):
                response.headers.setdefault(name, SECURITY_HEADERS[name])
            return response

        async def answer(request: Request) -> Response:
            try:
                return await handler(request)
            except SignInRequired as needed:
                return RedirectResponse(f"/admin/sign-in?next={needed.return_to}", status_code=303)
            except TwoFactorSetupRequired:
                return RedirectResponse("/admin/account", status_code=303)
            except CsrfRejected:
                return _error_page(
                    request, 403, "The form had expired. Go back, reload the page and try again."
                )
            except RequestValidationError as invalid:
                fields = ", ".join(
                    str(error["loc"][-1]) for error in invalid.errors() if error.get("loc")
                )
                return _error_page(request, 422, f"Some values are not valid: {fields}.")
            except TidingsError as refused:
                status = status_for(refused)
                if status == 500:
                    raise
                shown = _error_page(request, status, refused.detail)
                shown.headers.update(retry_after(refused))
                return shown

        return handle


def _error_page(request: Request, status: int, message: str) -> HTMLResponse:
    return render(request, "error.html", status_code=status, status=status, message=message)


def page(
    request: Request,
    session: AdminSession,
    name: str,
    *,
    status_code: int = 200,
    **context: Any,
) -> HTMLResponse:
    """A page for a signed-in operator: their address in the top bar, the CSRF token in forms,
    and `may(path)`: whether their role may post to `path` (UI-2), so that forms and buttons
    they could not use are not rendered at all (issue 38 item 7)."""

    def may(path: str) -> bool:
        return session.role.allows(required_role("POST", path))

    return render(
        request,
        name,
        status_code=status_code,
        csrf_token=session.csrf_token,
        admin_email=session.email,
        admin_role=str(session.role),
        may=may,
        **context,
    )


PAGE_SIZE = 50


def one_page(rows: Sequence[T], key: Callable[[T], int]) -> tuple[Sequence[T], int | None]:
    """A page of a list read with one extra row: the rows to show, and the cursor of the next
    page (the last shown row's key) when the extra row says there is one."""
    if len(rows) > PAGE_SIZE:
        return rows[:PAGE_SIZE], key(rows[PAGE_SIZE - 1])
    return rows, None
