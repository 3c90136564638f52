"""The dashboard: the audience per newsletter and state, 30 days of growth, recent campaigns
and the queue's health (counts per kind and state, and the next jobs due), with a banner when
jobs are dead and one per send waiting on an unreachable provider (SND-26), and a button that
checks the email provider's connection step by step."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse

from tidings.bootstrap import check_email_provider
from tidings.delivery.connection_check import ConnectionCheck
from tidings.ui.chart import line_chart
from tidings.ui.guard import Session, container_of
from tidings.ui.templating import UiRoute, page

router = APIRouter(route_class=UiRoute)
STATES = ("pending", "confirmed", "unsubscribed")
NEXT_DUE_SHOWN = 5  # the queue panel's next jobs due (a scheduled send among them)


@router.get("")
async def dashboard(request: Request, session: Session) -> HTMLResponse:
    return await _dashboard(request, session)


@router.post("/provider-check")
async def provider_check(request: Request, session: Session) -> HTMLResponse:
    """Connect to the configured provider now and show each step on the dashboard."""
    check = await check_email_provider(container_of(request).settings)
    return await _dashboard(request, session, provider_check=check, checked=True)


async def _dashboard(
    request: Request,
    session: Session,
    *,
    provider_check: ConnectionCheck | None = None,
    checked: bool = False,
) -> HTMLResponse:
    container = container_of(request)
    growth = await container.audience_stats.growth(days=30)
    labels = [day.day.isoformat() for day in growth]
    depth = await container.queue.depth()
    queue: dict[str, dict[str, int]] = {}
    for kind, status, count, _age in depth:
        queue.setdefault(kind, {})[status] = count
    dead = sum(count for _kind, status, count, _age in depth if status == "dead")
    return page(
        request,
        session,
        "dashboard.html",
        newsletters=await container.audience_stats.per_newsletter(),
        states=STATES,
        confirmed=line_chart(labels, [day.confirmed for day in growth], what="confirmations"),
        unsubscribed=line_chart(labels, [day.unsubscribed for day in growth], what="unsubscribes"),
        campaigns=await container.campaigns.list_campaigns(limit=8),
        queue=sorted(queue.items()),
        waiting=await container.queue.upcoming(limit=NEXT_DUE_SHOWN),
        dead=dead,
        provider=container.settings.email.provider,
        provider_check=provider_check,
        checked=checked,
        provider_problems=await container.send_status.provider_problems(),
        auto_paused=await container.send_status.auto_paused(),
    )
