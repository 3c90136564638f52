"""The audit log's record of what operators and API keys did (UI-2): every successful
state-changing request (POST, PUT, PATCH, DELETE) under /api/admin and /admin leaves an
entry with its actor (the operator or key authentication bound), the object's id from the
path, and the client address. The routes below have their action named here; a route whose
code records a richer entry itself (old and new values) is left to it; every other one gets
an entry named after its path (`campaign.clone`, `webhook.rotate_secret`), repeats by the
same actor on the same object within the hour counted in one entry (a draft saved as its
writer types). One table for the API and the admin UI, so no route has to remember to do it."""

from __future__ import annotations

import re

import structlog
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from tidings.access.audit import AuditLog, recording
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
WRITE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
ADMIN_PREFIXES = ("/api/admin/", "/admin/")
METHOD_VERBS = {"POST": "create", "PUT": "update", "PATCH": "update", "DELETE": "delete"}


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
        if (
            scope["type"] != "http"
            or scope["method"] not in WRITE_METHODS
            or not scope["path"].startswith(ADMIN_PREFIXES)
        ):
            await self.app(scope, receive, send)
            return
        named = self._action_for(scope["method"], scope["path"])
        client = scope.get("client")
        ip = client[0] if client else None
        with recording() as recorded:

            async def recorded_first(message: Message) -> None:
                # Recorded before the client hears of success, so whoever reads the log after
                # the answer finds the entry.
                if message["type"] == "http.response.start" and message["status"] < 400:
                    if named is not None:
                        await self._record(named, ip)
                    elif not recorded:
                        await self._record(derived_action(scope), ip, folded=True)
                await send(message)

            await self.app(scope, receive, recorded_first)

    async def _record(
        self, audited: tuple[str, str | None], ip: str | None, *, folded: bool = False
    ) -> None:
        bound = structlog.contextvars.get_contextvars()
        if "admin_id" in bound:
            actor = Actor.operator(int(bound["admin_id"]), ip)
        elif "api_key_id" in bound:
            actor = Actor.api_key(str(bound["api_key_id"]), ip)
        else:
            return
        action, target = audited
        try:
            if folded:
                await self.audit.record_folded(actor, action, target)
            else:
                await self.audit.record(actor, action, target)
        except Exception:  # the request succeeded; a lost audit line must not turn it into 500
            log.exception("audit.record_failed", action=action)


def derived_action(scope: Scope) -> tuple[str, str | None]:
    """The action and target of a state-changing admin request no route names: the first
    literal segment of its path, singular, is the noun, the others the verb (or the method's
    when there are none); the first path parameter names the object.
    `POST /admin/campaigns/7/test-send` -> (`campaign.test_send`, `campaign:7`)."""
    path: str = scope["path"]
    rest = path.removeprefix("/api/admin").removeprefix("/admin").strip("/")
    values = {str(value) for value in (scope.get("path_params") or {}).values()}
    literal = [part.replace("-", "_") for part in rest.split("/") if part and part not in values]
    if not literal:
        return "site." + METHOD_VERBS[scope["method"]], None
    first = literal[0]
    noun = first[:-1] if first.endswith("s") and not first.endswith("ss") else first
    verbs = literal[1:]
    if not verbs and "_" in first:  # /admin/sign-out, /admin/provider-check
        return first, None
    verb = "_".join(verbs) if verbs else METHOD_VERBS[scope["method"]]
    params = list((scope.get("path_params") or {}).values())
    return f"{noun}.{verb}", (f"{noun}:{params[0]}" if params else None)
