"""The audit log's record of what operators and API keys did to the audience and campaigns
(UI-2): every successful request to one of the routes below is appended with its actor (the
operator or key authentication bound), the object's id from the path, and the client address.
One table for the API and the admin UI, so no route has to remember to do it."""

from __future__ import annotations

import re

import structlog
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from tidings.access.audit import AuditLog
from tidings.domain.audit import Actor
from tidings.observability.logging import get_logger

log = get_logger(__name__)

# (method, route template) -> action. Both entry points: /api/admin/... and /admin/...
AUDITED: dict[tuple[str, str], str] = {
    ("POST", "/api/admin/campaigns/{campaign_id}/send"): "campaign.send",
    ("POST", "/api/admin/campaigns/{campaign_id}/schedule"): "campaign.schedule",
    ("POST", "/api/admin/campaigns/{campaign_id}/cancel"): "campaign.cancel",
    ("POST", "/api/admin/campaigns/{campaign_id}/unschedule"): "campaign.unschedule",
    ("POST", "/api/admin/campaigns/{campaign_id}/pause"): "campaign.pause",
    ("POST", "/api/admin/campaigns/{campaign_id}/resume"): "campaign.resume",
    ("POST", "/api/admin/campaigns/{campaign_id}/retry"): "campaign.retry",
    ("POST", "/api/admin/campaigns/{campaign_id}/resend"): "campaign.resend",
    ("POST", "/api/admin/campaigns/{campaign_id}/batches/{batch_id}/reconcile"): (
        "campaign.reconcile"
    ),
    ("DELETE", "/api/admin/campaigns/{campaign_id}"): "campaign.delete",
    ("DELETE", "/api/admin/newsletters/{slug}"): "newsletter.delete",
    ("DELETE", "/api/admin/subscribers/{subscriber_id}"): "subscriber.delete",
    ("POST", "/api/admin/subscribers/import"): "subscribers.import",
    ("POST", "/api/admin/suppressions"): "suppression.add",
    ("POST", "/api/admin/suppressions/lift"): "suppression.lift",
    ("POST", "/api/admin/events/{event_id}/apply"): "inbound.apply",
    ("POST", "/api/admin/events/{event_id}/discard"): "inbound.discard",
    ("POST", "/admin/events/{event_id}/apply"): "inbound.apply",
    ("POST", "/admin/events/{event_id}/discard"): "inbound.discard",
    ("POST", "/admin/campaigns/{campaign_id}/send"): "campaign.send",
    ("POST", "/admin/campaigns/{campaign_id}/schedule"): "campaign.schedule",
    ("POST", "/admin/campaigns/{campaign_id}/cancel"): "campaign.cancel",
    ("POST", "/admin/campaigns/{campaign_id}/unschedule"): "campaign.unschedule",
    ("POST", "/admin/campaigns/{campaign_id}/pause"): "campaign.pause",
    ("POST", "/admin/campaigns/{campaign_id}/resume"): "campaign.resume",
    ("POST", "/admin/campaigns/{campaign_id}/retry"): "campaign.retry",
    ("POST", "/admin/campaigns/{campaign_id}/reconcile"): "campaign.reconcile",
    ("POST", "/admin/subscribers/{subscriber_id}/delete"): "subscriber.delete",
    ("POST", "/admin/subscribers/{subscriber_id}/suppress"): "suppression.add",
    ("POST", "/admin/subscribers/import"): "subscribers.import",
    # People changed one at a time (issue 25); bulk actions record themselves, with a count.
    ("POST", "/api/admin/subscribers"): "subscriber.create",
    ("PATCH", "/api/admin/subscribers/{subscriber_id}"): "subscriber.update",
    ("DELETE", "/api/admin/subscribers/{subscriber_id}/subscriptions/{newsletter}"): (
        "subscriber.unsubscribe"
    ),
    ("POST", "/admin/subscribers/new"): "subscriber.create",
    ("POST", "/admin/subscribers/{subscriber_id}/edit"): "subscriber.update",
    ("POST", "/admin/subscribers/{subscriber_id}/unsubscribe/{newsletter}"): (
        "subscriber.unsubscribe"
    ),
    ("POST", "/admin/subscribers/confirm-pending"): "subscribers.confirm_pending",
}
_PARAM = re.compile(r"\{(\w+)\}")


def _compiled(template: str) -> re.Pattern[str]:
    """`/campaigns/{campaign_id}` -> a pattern naming `campaign_id`."""
    return re.compile("^" + _PARAM.sub(r"(?P<\1>[^/]+)", template) + "$")


class AuditTrail:
    def __init__(self, app: ASGIApp, audit: AuditLog) -> None:
        self.app = app
        self.audit = audit
        self.routes = [
            (method, _compiled(template), action) for (method, template), action in AUDITED.items()
        ]
        # Most requests (provider events by the thousand, public pages) are under none of
        # the audited paths: one C-level prefix test spares them every pattern.
        self.prefixes = tuple({template.split("{", 1)[0] for _, template in AUDITED})

    def _action_for(self, method: str, path: str) -> tuple[str, str | None] | None:
        if not path.startswith(self.prefixes):
            return None
        for route_method, pattern, action in self.routes:
            found = pattern.match(path) if route_method == method else None
            if found:
                params = found.groupdict()
                noun = action.split(".", 1)[0]
                ids = [value for name, value in params.items() if name != "slug"]
                target = f"{noun}:{ids[0]}" if ids else params.get("slug")
                return action, target
        return None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        audited = (
            self._action_for(scope["method"], scope["path"]) if scope["type"] == "http" else None
        )
        if audited is None:
            await self.app(scope, receive, send)
            return
        client = scope.get("client")
        ip = client[0] if client else None

        async def recorded_first(message: Message) -> None:
            # Recorded before the client hears of success, so whoever reads the log after
            # the answer finds the entry.
            if message["type"] == "http.response.start" and message["status"] < 400:
                await self._record(audited, ip)
            await send(message)

        await self.app(scope, receive, recorded_first)

    async def _record(self, audited: tuple[str, str | None], ip: str | None) -> None:
        bound = structlog.contextvars.get_contextvars()
        if "admin_id" in bound:
            actor = Actor.operator(int(bound["admin_id"]), ip)
        elif "api_key_id" in bound:
            actor = Actor.api_key(str(bound["api_key_id"]), ip)
        else:
            return
        action, target = audited
        try:
            await self.audit.record(actor, action, target)
        except Exception:  # the request succeeded; a lost audit line must not turn it into 500
            log.exception("audit.record_failed", action=action)
