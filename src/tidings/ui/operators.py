"""Operators, for the owner: who may sign in and with which role; add, change the role of,
disable, enable, unlock and delete accounts. The last enabled owner is never removed."""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Annotated, Literal

from fastapi import APIRouter, Form, Path, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from tidings.domain.errors import Conflict, InvalidInput, NotFound
from tidings.domain.roles import Role, parse_role
from tidings.ui.guard import OperatorActor, Session, container_of
from tidings.ui.templating import UiRoute, page

router = APIRouter(prefix="/operators", route_class=UiRoute)
AdminId = Annotated[int, Path(ge=1, le=2**62)]
BACK = "/admin/operators"


async def _listing(
    request: Request, session: Session, *, error: str | None = None, status_code: int = 200
) -> HTMLResponse:
    operators = await container_of(request).admins.list()
    return page(
        request,
        session,
        "operators.html",
        operators=operators,
        roles=[str(role) for role in Role],
        error=error,
        status_code=status_code,
    )


@router.get("")
async def operators(request: Request, session: Session) -> HTMLResponse:
    return await _listing(request, session)


@router.post("")
async def add_operator(
    request: Request,
    session: Session,
    actor: OperatorActor,
    email: Annotated[str, Form(max_length=320)],
    role: Annotated[str, Form(max_length=16)],
    password: Annotated[str, Form(max_length=1024)],
) -> Response:
    """The owner sets a first password and hands it over; the operator changes it."""
    try:
        await container_of(request).admins.create(
            email, password, role=parse_role(role), actor=actor
        )
    except (InvalidInput, Conflict) as refused:
        field = f" ({refused.field})" if refused.field else ""
        return await _listing(request, session, error=refused.detail + field, status_code=422)
    return RedirectResponse(BACK, status_code=303)


async def _change(request: Request, session: Session, action: Awaitable[object]) -> Response:
    try:
        await action
    except (Conflict, NotFound, InvalidInput) as refused:
        status = 404 if isinstance(refused, NotFound) else 409
        return await _listing(request, session, error=refused.detail, status_code=status)
    return RedirectResponse(BACK, status_code=303)


@router.post("/{admin_id}/role")
async def change_role(
    request: Request,
    session: Session,
    actor: OperatorActor,
    admin_id: AdminId,
    role: Annotated[str, Form(max_length=16)],
) -> Response:
    admins = container_of(request).admins
    try:
        chosen = parse_role(role)
    except InvalidInput as refused:
        return await _listing(request, session, error=refused.detail, status_code=422)
    return await _change(request, session, admins.set_role(admin_id, chosen, actor=actor))


@router.post("/{admin_id}/{action}")
async def change_account(
    request: Request,
    session: Session,
    actor: OperatorActor,
    admin_id: AdminId,
    action: Literal["disable", "enable", "unlock", "delete"],
) -> Response:
    """Disable (their sessions end at once), enable, unlock (forget failed sign-ins) or
    delete an operator."""
    admins = container_of(request).admins
    changes = {
        "disable": admins.disable,
        "enable": admins.enable,
        "unlock": admins.unlock,
        "delete": admins.delete,
    }
    return await _change(request, session, changes[action](admin_id, actor=actor))
