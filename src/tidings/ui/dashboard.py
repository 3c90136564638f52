"""The dashboard: the audience per newsletter and state, 30 days of growth, recent campaigns
and the queue's health, with a banner when jobs are dead and one per send waiting on an
unreachable provider (SND-26)."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse

from tidings.ui.chart import line_chart
from tidings.ui.guard import Session, container_of
from tidings.ui.templating import UiRoute, page

router = APIRouter(route_class=UiRoute)
STATES = ("pending", "confirmed", "unsubscribed")


@router.get("")
async def dashboard(request: Request, session: Session) -> HTMLResponse:
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
        dead=dead,
        provider_problems=await container.send_status.provider_problems(),
    )
