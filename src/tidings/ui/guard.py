"""Who may see an admin page: the session cookie, the per-session CSRF token on every form post,
and the cookie's attributes (Secure, HttpOnly, SameSite=Strict)."""

from __future__ import annotations

import hmac
import secrets
from typing import Annotated
from urllib.parse import quote

import structlog
from fastapi import Depends, Request
from fastapi.responses import Response

from tidings.access.admins import AdminSession
from tidings.bootstrap import Container
from tidings.domain.audit import Actor
from tidings.domain.roles import Forbidden, required_role

CSRF_FIELD = "csrf_token"
# Before sign-in there is no session: the sign-in form's token is double-submitted in a cookie.
PRE_SESSION_COOKIE = "tidings_admin_pre"
# Proof that this browser signed in to an account before: it is not locked out by strangers'
# failed attempts on the account (access/sign_in_limits.py).
KNOWN_CLIENT_COOKIE = "tidings_admin_client"
KNOWN_CLIENT_DAYS = 400  # the longest lifetime browsers grant a cookie
# Between the password and the two-factor code: who passed the first step (signed, 5 minutes).
SECOND_FACTOR_COOKIE = "tidings_admin_2fa"
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
# What an operator who must set up two-factor sign-in may still reach.
_BEFORE_TWO_FACTOR = ("/admin/account", "/admin/sign-out", "/admin/static/")


class SignInRequired(Exception):
    """No live session: the page answers 303 to the sign-in form, which returns here after."""

    def __init__(self, return_to: str) -> None:
        super().__init__("sign in first")
        self.return_to = return_to


class TwoFactorSetupRequired(Exception):
    """`admin_ui.require_two_factor` is on and this operator has not set it up: every page
    but their account (where they do) answers 303 to it."""


class CsrfRejected(Exception):
    """A form post without this session's token: 403, nothing changed."""


def container_of(request: Request) -> Container:
    container: Container = request.app.state.container
    return container


def cookie_secure(container: Container) -> bool:
    """Secure unless told otherwise: `auto` follows the scheme of site.public_url."""
    setting = container.settings.admin_ui.cookie_secure
    if setting == "auto":
        return str(container.settings.site.public_url).startswith("https://")
    return setting == "always"


def session_cookie_name(container: Container) -> str:
    # The __Host- prefix makes browsers refuse the cookie unless Secure, path=/ and host-only.
    return "__Host-tidings_admin" if cookie_secure(container) else "tidings_admin"


def set_session_cookie(response: Response, container: Container, token: str) -> None:
    response.set_cookie(
        session_cookie_name(container),
        token,
        max_age=container.settings.admin_ui.session_absolute_hours * 3600,
        path="/",
        secure=cookie_secure(container),
        httponly=True,
        samesite="strict",
    )


def clear_session_cookie(response: Response, container: Container) -> None:
    response.delete_cookie(
        session_cookie_name(container),
        path="/",
        secure=cookie_secure(container),
        httponly=True,
        samesite="strict",
    )


def pre_session_token(request: Request) -> str:
    """The sign-in form's CSRF token: the cookie's, or a new one the response must set."""
    existing = request.cookies.get(PRE_SESSION_COOKIE, "")
    return existing if 20 <= len(existing) <= 100 else secrets.token_urlsafe(32)


def set_pre_session_cookie(response: Response, container: Container, token: str) -> None:
    response.set_cookie(
        PRE_SESSION_COOKIE,
        token,
        max_age=3600,
        path="/admin",
        secure=cookie_secure(container),
        httponly=True,
        samesite="strict",
    )


def set_known_client_cookie(response: Response, container: Container, token: str) -> None:
    response.set_cookie(
        KNOWN_CLIENT_COOKIE,
        token,
        max_age=KNOWN_CLIENT_DAYS * 86400,
        path="/admin",
        secure=cookie_secure(container),
        httponly=True,
        samesite="strict",
    )


def _return_path(request: Request) -> str:
    """The page to come back to, encoded as one value of `next=`: its `?`, `&`, `=` and
    `%` escaped too, so `/admin/campaigns?status=sent&page=2` comes back whole and a query
    value's own escapes (`q=a%26b`) come back as they were."""
    path = request.url.path
    if request.method in SAFE_METHODS and request.url.query:
        path += "?" + request.url.query
    return quote(path, safe="/")


async def require_session(request: Request) -> AdminSession:
    container = container_of(request)
    token = request.cookies.get(session_cookie_name(container), "")
    session = await container.admins.session(token) if token else None
    if session is None:
        raise SignInRequired(_return_path(request))
    structlog.contextvars.bind_contextvars(admin_id=session.admin_id)
    return session


Session = Annotated[AdminSession, Depends(require_session)]


async def tokens_match(request: Request, expected: str) -> bool:
    """True when the posted form carries `expected` in its CSRF field."""
    form = await request.form()  # Starlette keeps it: the route's Form parameters reuse it
    presented = form.get(CSRF_FIELD)
    return isinstance(presented, str) and hmac.compare_digest(presented.encode(), expected.encode())


def operator_actor(request: Request, session: Session) -> Actor:
    """The audit log's actor for this request: the operator and their client address."""
    return Actor.operator(session.admin_id, request.client.host if request.client else None)


OperatorActor = Annotated[Actor, Depends(operator_actor)]


async def guard(request: Request, session: Session) -> None:
    """Every admin page: a live session; every unsafe request: this session's CSRF token;
    every request: a role that allows it (`domain.roles.required_role`, the API's policy)."""
    if request.method not in SAFE_METHODS and not await tokens_match(request, session.csrf_token):
        raise CsrfRejected()
    route = request.scope.get("route")
    needed = required_role(request.method, str(getattr(route, "path", request.url.path)))
    if not session.role.allows(needed):
        raise Forbidden(f"this needs the {needed} role; you are {session.role}")
    if (
        container_of(request).admins.require_two_factor
        and not session.two_factor
        and not request.url.path.startswith(_BEFORE_TWO_FACTOR)
    ):
        raise TwoFactorSetupRequired()
