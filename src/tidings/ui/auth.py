"""Signing in and out of the admin UI: the sign-in form (CSRF double-submitted before a session
exists), rate-limited attempts, sign-out here and sign-out everywhere."""

from __future__ import annotations

import hmac
from typing import Annotated

from fastapi import APIRouter, Depends, Form, Query, Request
from fastapi.responses import RedirectResponse, Response

from tidings.access.admins import StartedSession
from tidings.access.sign_in_limits import SignInClient
from tidings.access.two_factor import PENDING_LIFETIME
from tidings.domain.errors import RateLimited, Unauthenticated
from tidings.ui.guard import (
    CSRF_FIELD,
    KNOWN_CLIENT_COOKIE,
    PRE_SESSION_COOKIE,
    SECOND_FACTOR_COOKIE,
    CsrfRejected,
    Session,
    clear_session_cookie,
    container_of,
    cookie_secure,
    guard,
    pre_session_token,
    require_session,
    set_known_client_cookie,
    set_pre_session_cookie,
    set_session_cookie,
)
from tidings.ui.templating import UiRoute, render

public = APIRouter(prefix="/admin", route_class=UiRoute, include_in_schema=False)
router = APIRouter(route_class=UiRoute)


def _too_many(limited: RateLimited) -> str:
    """The refusal, naming the wait (at most `admin_ui.sign_in_max_delay_seconds`)."""
    seconds = limited.retry_after_seconds
    unit = "second" if seconds == 1 else "seconds"
    return f"Too many failed sign-in attempts. Wait {seconds} {unit} and try again."


def safe_return_path(candidate: str | None) -> str:
    """Only a path inside the admin UI or the API docs (when `admin_ui.api_docs` is
    `signed_in`): never another site (an open redirect)."""
    if (
        candidate
        and candidate.startswith(("/admin", "/docs", "/redoc", "/openapi.json"))
        and "//" not in candidate
        and "\\" not in candidate
        and candidate.isprintable()
    ):
        return candidate
    return "/admin"


def _sign_in_page(
    request: Request,
    *,
    next_path: str,
    email: str = "",
    error: str | None = None,
    status_code: int = 200,
    signed_out: bool = False,
) -> Response:
    token = pre_session_token(request)
    response = render(
        request,
        "sign_in.html",
        status_code=status_code,
        pre_session_token=token,
        next=next_path,
        email=email,
        error=error,
        signed_out=signed_out,
    )
    set_pre_session_cookie(response, container_of(request), token)
    return response


@public.get("/sign-in")
async def sign_in_form(
    request: Request,
    next_path: Annotated[str | None, Query(alias="next", max_length=2000)] = None,
    signed_out: bool = False,
) -> Response:
    return _sign_in_page(request, next_path=safe_return_path(next_path), signed_out=signed_out)


def _checked_pre_session(request: Request, csrf_token: str) -> str:
    """The browser's pre-session token, which the form must repeat (CSRF); it also binds the
    two-factor step to this browser."""
    cookie = request.cookies.get(PRE_SESSION_COOKIE, "")
    if not cookie or not hmac.compare_digest(cookie.encode(), csrf_token.encode()):
        raise CsrfRejected()
    return cookie


def _client(request: Request) -> SignInClient:
    return SignInClient(
        ip=request.client.host if request.client else None,
        known_client_token=request.cookies.get(KNOWN_CLIENT_COOKIE),
    )


def _signed_in(request: Request, started: StartedSession, next_path: str) -> Response:
    container = container_of(request)
    response = RedirectResponse(next_path, status_code=303)
    set_session_cookie(response, container, started.token)
    set_known_client_cookie(response, container, started.known_client_token)
    response.delete_cookie(PRE_SESSION_COOKIE, path="/admin")
    response.delete_cookie(SECOND_FACTOR_COOKIE, path="/admin")
    return response


def _rate_limited(page: Response, limited: RateLimited) -> Response:
    page.headers["Retry-After"] = str(limited.retry_after_seconds)
    return page


def _code_page(
    request: Request, *, next_path: str, error: str | None = None, status_code: int = 200
) -> Response:
    token = pre_session_token(request)
    response = render(
        request,
        "sign_in_code.html",
        status_code=status_code,
        pre_session_token=token,
        next=next_path,
        error=error,
    )
    set_pre_session_cookie(response, container_of(request), token)
    return response


@public.post("/sign-in")
async def sign_in(
    request: Request,
    email: Annotated[str, Form(max_length=320)],
    password: Annotated[str, Form(max_length=1024)],
    csrf_token: Annotated[str, Form(alias=CSRF_FIELD, max_length=100)] = "",
    next_path: Annotated[str | None, Form(alias="next", max_length=2000)] = None,
) -> Response:
    browser = _checked_pre_session(request, csrf_token)
    container = container_of(request)
    next_path = safe_return_path(next_path)
    try:
        outcome = await container.admins.sign_in(
            email, password, client=_client(request), browser=browser
        )
    except Unauthenticated as refused:
        return _sign_in_page(
            request, next_path=next_path, email=email, error=refused.detail, status_code=401
        )
    except RateLimited as limited:
        page = _sign_in_page(
            request,
            next_path=next_path,
            email=email,
            error=_too_many(limited),
            status_code=429,
        )
        return _rate_limited(page, limited)
    if isinstance(outcome, StartedSession):
        return _signed_in(request, outcome, next_path)
    response = _code_page(request, next_path=next_path)
    response.set_cookie(
        SECOND_FACTOR_COOKIE,
        outcome.pending_token,
        max_age=int(PENDING_LIFETIME.total_seconds()),
        path="/admin",
        secure=cookie_secure(container),
        httponly=True,
        samesite="strict",
    )
    return response


@public.post("/sign-in/code")
async def sign_in_code(
    request: Request,
    code: Annotated[str, Form(max_length=32)],
    csrf_token: Annotated[str, Form(alias=CSRF_FIELD, max_length=100)] = "",
    next_path: Annotated[str | None, Form(alias="next", max_length=2000)] = None,
) -> Response:
    """The second step of a two-factor sign-in: the app's code, or a recovery code."""
    browser = _checked_pre_session(request, csrf_token)
    container = container_of(request)
    next_path = safe_return_path(next_path)
    pending = request.cookies.get(SECOND_FACTOR_COOKIE)
    try:
        started = await container.admins.complete_sign_in(
            pending, code, client=_client(request), browser=browser
        )
    except Unauthenticated as refused:
        if container.admins.two_factor.pending_admin(pending, browser=browser) is None:
            return _sign_in_page(
                request, next_path=next_path, error=refused.detail, status_code=401
            )
        return _code_page(request, next_path=next_path, error=refused.detail, status_code=401)
    except RateLimited as limited:
        page = _code_page(request, next_path=next_path, error=_too_many(limited), status_code=429)
        return _rate_limited(page, limited)
    return _signed_in(request, started, next_path)


@router.post("/sign-out", dependencies=[Depends(guard)])
async def sign_out(request: Request, session: Session) -> Response:
    container = container_of(request)
    await container.admins.sign_out(session)
    response = RedirectResponse("/admin/sign-in?signed_out=true", status_code=303)
    clear_session_cookie(response, container)
    return response


@router.post("/sign-out-everywhere", dependencies=[Depends(guard)])
async def sign_out_everywhere(request: Request, session: Session) -> Response:
    """Ends every session of this operator, on every device, this one included."""
    container = container_of(request)
    await container.admins.sign_out_everywhere(session.admin_id)
    response = RedirectResponse("/admin/sign-in?signed_out=true", status_code=303)
    clear_session_cookie(response, container)
    return response


__all__ = ["public", "require_session", "router"]
