"""The signed-in operator's own account: their role, and changing their password (which ends
their other sessions)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Form, Request
from fastapi.responses import HTMLResponse

from tidings.domain.errors import InvalidInput, Unauthenticated
from tidings.ui.guard import OperatorActor, Session, container_of
from tidings.ui.templating import UiRoute, page

router = APIRouter(prefix="/account", route_class=UiRoute)
Password = Annotated[str, Form(max_length=1024)]


@router.get("")
async def account(request: Request, session: Session) -> HTMLResponse:
    return page(request, session, "account.html", error=None, changed=False)


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
    error = None
    if new_password != confirm_password:
        error = "The new password and its confirmation differ."
    else:
        try:
            await container_of(request).admins.change_password(
                session, current_password, new_password, actor=actor
            )
        except (InvalidInput, Unauthenticated) as refused:
            error = refused.detail[0].upper() + refused.detail[1:] + "."
    if error:
        return page(request, session, "account.html", error=error, changed=False, status_code=422)
    return page(request, session, "account.html", error=None, changed=True)
