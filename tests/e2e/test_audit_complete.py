"""Every state-changing admin request leaves an audit entry (issue 38 item 8, UI-2): the
route table walked, and the fallback seen at work through the API and the UI."""

from __future__ import annotations

import re

from fastapi.routing import APIRoute
from sqlalchemy import select

from tests.e2e.audience_helpers import create_newsletter
from tests.factories import admin_headers, api_client, make_settings
from tests.support.admin_ui import signed_in, ui_app
from tests.support.sending import create_campaign
from tidings.api.app import ADMIN_MODULES, ADMIN_PREFIX
from tidings.api.audit_trail import ADMIN_PREFIXES, AUDITED, WRITE_METHODS, derived_action
from tidings.storage.tables import audit_log
from tidings.ui.app import guarded_routers

ACTION = re.compile(r"^[a-z_]+(\.[a-z_]+)?$")


def _write_routes() -> list[tuple[str, str]]:
    found = []
    routers = [(ADMIN_PREFIX, module.router) for module in ADMIN_MODULES]
    routers += [("/admin", router) for router in guarded_routers()]
    for prefix, router in routers:
        for route in router.routes:
            if isinstance(route, APIRoute):
                found += [(m, prefix + route.path) for m in route.methods if m in WRITE_METHODS]
    return found


def test_every_state_changing_admin_route_is_under_the_audit_trail() -> None:
    """Each POST, PUT, PATCH and DELETE route of the admin API and UI is one the audit trail
    watches, and one it can name: by the table, or by its path (`campaign.clone`)."""
    routes = _write_routes()
    assert len(routes) > 60
    for method, template in routes:
        assert template.startswith(ADMIN_PREFIXES), template
        if (method, template) in AUDITED:
            continue
        params = dict.fromkeys(re.findall(r"\{(\w+)\}", template), "7")
        path = re.sub(r"\{\w+\}", "7", template)
        action, _target = derived_action({"method": method, "path": path, "path_params": params})
        assert ACTION.fullmatch(action), (method, template, action)


async def _entries(container: object) -> list[tuple[str, str, str | None, int]]:
    async with container.db.read() as conn:  # type: ignore[attr-defined]
        query = select(
            audit_log.c.actor, audit_log.c.action, audit_log.c.target, audit_log.c.occurrences
        ).order_by(audit_log.c.id)
        return [tuple(row) for row in await conn.execute(query)]  # type: ignore[misc]


async def test_requests_no_route_names_are_audited_and_repeats_are_counted(
    database_url: str,
) -> None:
    """A clone through the API (no route names it, its code records nothing) is audited as
    the key; a draft saved twice is one entry counted twice; a route whose code records its
    own entry is not recorded again; a refused request leaves nothing."""
    async with api_client(make_settings(database_url)) as (client, container):
        headers = await admin_headers(container)
        await create_newsletter(client, headers)
        draft = await create_campaign(client, headers)
        before = len(await _entries(container))
        cloned = await client.post(f"/api/admin/campaigns/{draft}/clone", headers=headers)
        assert cloned.status_code < 300, cloned.text
        for subject in ("Second", "Third"):
            saved = await client.patch(
                f"/api/admin/campaigns/{draft}", json={"subject": subject}, headers=headers
            )
            assert saved.status_code == 200, saved.text
        tracked = await client.patch(
            "/api/admin/newsletters/weekly", json={"tracking": "aggregate"}, headers=headers
        )
        assert tracked.status_code == 200, tracked.text
        refused = await client.patch(
            f"/api/admin/campaigns/{draft}", json={"subject": ""}, headers=headers
        )
        assert refused.status_code == 422
        added = (await _entries(container))[before:]
    actors = {actor for actor, *_ in added}
    assert len(actors) == 1
    assert actors.pop().startswith("key:")
    assert [(action, target, times) for _a, action, target, times in added] == [
        ("campaign.clone", f"campaign:{draft}", 1),
        ("campaign.update", f"campaign:{draft}", 2),
        ("newsletter.tracking", added[-1][2], 1),
    ]


async def test_ui_requests_are_audited_as_the_operator(database_url: str) -> None:
    """The same fallback for the admin UI: a clone from the campaign page is the
    operator's entry."""
    async with ui_app(make_settings(database_url)) as (browser, container):
        client = browser()
        csrf = await signed_in(client, container)
        headers = await admin_headers(container)
        await create_newsletter(client, headers)
        draft = await create_campaign(client, headers)
        answer = await client.post(f"/admin/campaigns/{draft}/clone", data={"csrf_token": csrf})
        assert answer.status_code in (200, 303), answer.text
        entries = await _entries(container)
    clone = [entry for entry in entries if entry[1] == "campaign.clone"]
    assert len(clone) == 1
    assert clone[0][0].startswith("admin:")
    assert clone[0][2] == f"campaign:{draft}"
