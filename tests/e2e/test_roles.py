"""Roles (UI-2): owner, editor and viewer, enforced on every admin API route and every admin UI
route by one policy. The routes are walked from the app's own OpenAPI document and the UI's
router list, so a route added later is covered without editing this file."""

import re
from collections.abc import Iterator

from tests.factories import api_client, make_settings
from tests.support.admin_ui import PASSWORD, csrf_from, sign_in, ui_app
from tidings.api.app import create_app
from tidings.domain.roles import Role, required_role
from tidings.ui.app import guarded_routers

ROLES = (Role.OWNER, Role.EDITOR, Role.VIEWER)


def _concrete(template: str) -> str:
    # Ids that match no object: a route the role allows answers 404 or 422, never changes data.
    values = {"slug": "nosuch", "current": "nosuch", "key_id": "zzzzzzzzzz", "run_id": "nosuch"}
    return re.sub(r"\{(\w+)\}", lambda m: values.get(m.group(1), "987654"), template)


def api_routes() -> Iterator[tuple[str, str]]:
    paths = create_app(make_settings("sqlite:///unused.db")).openapi()["paths"]
    for template, operations in paths.items():
        if template.startswith("/api/admin"):
            for method in operations:
                yield method.upper(), template


def ui_routes() -> Iterator[tuple[str, str]]:
    for router in guarded_routers():
        for route in router.routes:
            template = "/admin" + route.path  # type: ignore[attr-defined]
            for method in sorted(route.methods - {"HEAD"}):  # type: ignore[attr-defined]
                yield method, template


def test_the_policy_gives_each_role_its_share() -> None:
    """What each role is for: viewers read, editors run the audience and campaigns (send
    included), owners alone manage operators, keys and the audit log."""
    assert required_role("GET", "/api/admin/subscribers") is Role.VIEWER
    assert required_role("POST", "/api/admin/campaigns/{campaign_id}/send") is Role.EDITOR
    assert required_role("DELETE", "/api/admin/subscribers/{subscriber_id}") is Role.EDITOR
    assert required_role("GET", "/api/admin/keys") is Role.OWNER
    assert required_role("POST", "/api/admin/webhooks") is Role.OWNER
    assert required_role("POST", "/admin/sign-out-everywhere") is Role.VIEWER
    assert required_role("GET", "/admin/operators") is Role.OWNER
    assert not Role.VIEWER.allows(Role.EDITOR)
    assert Role.OWNER.allows(Role.VIEWER)


async def test_every_api_route_answers_each_role_by_the_policy(database_url: str) -> None:
    """A viewer's key leaked from a dashboard must not be able to send or delete; an
    editor's must not mint keys or point webhooks elsewhere."""
    routes = list(api_routes())
    assert len(routes) >= 40
    async with api_client(make_settings(database_url)) as (client, container):
        headers = {}
        for role in ROLES:
            created = await container.api_keys.create(f"{role} key", role=role)
            headers[role] = {"Authorization": f"Bearer {created.token}"}
        for method, template in routes:
            for role in ROLES:
                answer = await client.request(
                    method, _concrete(template), headers=headers[role], json={}
                )
                allowed = role.allows(required_role(method, template))
                assert (answer.status_code == 403) is not allowed, (
                    role,
                    method,
                    template,
                    answer.status_code,
                )
                assert answer.status_code != 401, (role, method, template)
                if not allowed:
                    assert answer.json()["code"] == "forbidden"
        assert len(await container.api_keys.list()) == 3  # nothing was minted or revoked


async def test_a_key_cannot_mint_more_rights_and_dies_with_its_parent(database_url: str) -> None:
    """A key handed to a deploy script may make narrower keys, never wider ones; revoking it
    revokes what it made."""
    async with api_client(make_settings(database_url)) as (client, container):
        root = await container.api_keys.create("root", role=Role.OWNER)
        owner = {"Authorization": f"Bearer {root.token}"}
        child = await client.post(
            "/api/admin/keys", headers=owner, json={"name": "ci", "role": "owner"}
        )
        assert child.status_code == 201, child.text
        assert child.json()["parent_id"] == root.key.id
        grandchild = await client.post(
            "/api/admin/keys",
            headers={"Authorization": f"Bearer {child.json()['key']}"},
            json={"name": "ci-viewer", "role": "viewer"},
        )
        assert grandchild.json()["role"] == "viewer"
        viewer = {"Authorization": f"Bearer {grandchild.json()['key']}"}
        assert (await client.get("/api/admin/subscribers", headers=viewer)).status_code == 200
        editor_key = await container.api_keys.create("editor", role=Role.EDITOR)
        refused = await client.post(
            "/api/admin/keys",
            headers={"Authorization": f"Bearer {editor_key.token}"},
            json={"name": "escalate", "role": "owner"},
        )
        assert refused.status_code == 403
        gone = await client.delete(f"/api/admin/keys/{child.json()['id']}", headers=owner)
        assert gone.status_code == 204
        assert (await client.get("/api/admin/subscribers", headers=viewer)).status_code == 401
        assert (await client.get("/api/admin/keys", headers=owner)).status_code == 200
        actions = [entry.action for entry in await container.audit.list()]
        assert actions.count("key.created") == 2
        assert "key.revoked" in actions


async def test_every_admin_page_answers_each_role_by_the_policy(database_url: str) -> None:
    """The UI enforces the same policy as the API: a viewer sees pages but changes nothing."""
    routes = [(m, t) for m, t in ui_routes() if "/sign-out" not in t]
    assert len(routes) >= 35
    async with ui_app(make_settings(database_url)) as (browser, container):
        clients = {}
        for role in ROLES:
            email = f"{role}@example.org"
            await container.admins.create(email, PASSWORD, role=role)
            client = browser()
            assert (await sign_in(client, email)).status_code == 303
            clients[role] = (client, csrf_from(await client.get("/admin/account")))
        for method, template in routes:
            for role in ROLES:
                client, csrf = clients[role]
                answer = await client.request(
                    method, _concrete(template), data={"csrf_token": csrf}
                )
                allowed = role.allows(required_role(method, template))
                assert (answer.status_code == 403) is not allowed, (
                    role,
                    method,
                    template,
                    answer.status_code,
                )
                location = answer.headers.get("location", "")
                assert not location.startswith("/admin/sign-in"), (role, method, template)
