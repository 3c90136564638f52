"""The signed-in operator's own account: their role, changing their password (which ends
their other sessions), and two-factor sign-in (set up with a QR code, recovery codes shown
once, turned off with the password)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Form, Request
from fastapi.responses import HTMLResponse

from tidings.domain.errors import Conflict, InvalidInput, Unauthenticated
from tidings.ui.guard import OperatorActor, Session, container_of
from tidings.ui.templating import UiRoute, page

router = APIRouter(prefix="/account", route_class=UiRoute)
Password = Annotated[str, Form(max_length=1024)]


def _sentence(detail: str) -> str:
    return detail[0].upper() + detail[1:] + "."


async def _account_page(
    request: Request, session: Session, *, status_code: int = 200, **shown: Any
) -> HTMLResponse:
    container = container_of(request)
    admin = await container.admins.get(session.admin_id)
    context: dict[str, Any] = {
        "error": None,
        "changed": False,
        "enrolment": None,
        "recovery_codes": None,
        "two_factor_on": admin.totp_enabled_at is not None,
        "two_factor_required": container.admins.require_two_factor,
        "codes_left": await container.admins.two_factor.recovery_codes_left(admin.id),
    }
    context.update(shown)
    return page(request, session, "account.html", status_code=status_code, **context)


@router.get("")
async def account(request: Request, session: Session) -> HTMLResponse:
    return await _account_page(request, session)


@router.post("/password")
async def change_password(
    request: Request,
    session: Session,
    actor: OperatorActor,
    current_password: Password,
    new_password: Password,
    confirm_password: Password,
) -> HTMLResponse:
    """Re-render the page with the outcome: the reason on a refusal, nothing changed."""
    if new_password != confirm_password:
        error = "The new password and its confirmation differ."
        return await _account_page(request, session, error=error, status_code=422)
    try:
        await container_of(request).admins.change_password(
            session, current_password, new_password, actor=actor
        )
    except (InvalidInput, Unauthenticated) as refused:
        return await _account_page(
            request, session, error=_sentence(refused.detail), status_code=422
        )
    return await _account_page(request, session, changed=True)


@router.post("/two-factor")
async def start_two_factor(
    request: Request, session: Session, current_password: Password
) -> HTMLResponse:
    """A new secret and its QR code, for the current password; nothing is required at
    sign-in until a code confirms."""
    admins = container_of(request).admins
    try:
        enrolment = await admins.start_two_factor(session.admin_id, current_password)
    except (Conflict, Unauthenticated) as refused:
        status_code = 409 if isinstance(refused, Conflict) else 422
        return await _account_page(
            request, session, error=_sentence(refused.detail), status_code=status_code
        )
    return await _account_page(request, session, enrolment=enrolment)


@router.post("/two-factor/confirm")
async def confirm_two_factor(
    request: Request,
    session: Session,
    actor: OperatorActor,
    code: Annotated[str, Form(max_length=32)],
) -> HTMLResponse:
    admins = container_of(request).admins
    try:
        codes = await admins.two_factor.confirm(
            await admins.get(session.admin_id), code, actor=actor
        )
    except (InvalidInput, Conflict) as refused:
        return await _account_page(
            request, session, error=_sentence(refused.detail), status_code=422
        )
    return await _account_page(request, session, recovery_codes=codes)


@router.post("/two-factor/off")
async def turn_off_two_factor(
    request: Request, session: Session, actor: OperatorActor, current_password: Password
) -> HTMLResponse:
    try:
        await container_of(request).admins.turn_off_two_factor(
            session.admin_id, actor=actor, password=current_password
        )
    except (Unauthenticated, Conflict) as refused:
        return await _account_page(
            request, session, error=_sentence(refused.detail), status_code=422
        )
    return await _account_page(request, session)
