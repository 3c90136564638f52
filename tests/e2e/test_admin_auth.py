"""Every admin route requires a live admin API key (API-2)."""

import re

import httpx
import pytest

from tests.factories import admin_headers, api_client, make_settings

PLACEHOLDER_VALUES = {"key_id": "abcdefghij"}


def _admin_operations(spec: dict) -> list[tuple[str, str]]:
    operations = []
    for path, methods in spec["paths"].items():
        if not path.startswith("/api/admin"):
            continue
        concrete = re.sub(r"\{(\w+)\}", lambda m: PLACEHOLDER_VALUES.get(m.group(1), "1"), path)
        operations.extend((method.upper(), concrete) for method in methods)
    return operations


async def test_no_admin_route_answers_without_a_valid_key(database_url: str) -> None:
    """Walks the OpenAPI document, so a route added later without the guard fails this test."""
    async with api_client(make_settings(database_url)) as (client, container):
        operations = _admin_operations((await client.get("/openapi.json")).json())
        assert len(operations) >= 3
        revoked = await container.api_keys.create("revoked")
        await container.api_keys.revoke(revoked.key.id)
        bad_headers = [
            {},
            {"Authorization": "Bearer"},
            {"Authorization": "Basic dXNlcjpwYXNz"},
            {"Authorization": "Bearer tdk_nope"},
            {"Authorization": f"Bearer {revoked.token}"},
        ]
        for method, path in operations:
            for headers in bad_headers:
                response = await client.request(method, path, headers=headers, json={})
                assert response.status_code == 401, (method, path, headers)
                assert response.headers["content-type"] == "application/problem+json"
                assert response.headers["www-authenticate"] == "Bearer"


async def test_key_lifecycle_over_the_api(database_url: str) -> None:
    """Keys are created (shown once), listed without secrets and revoked over the API itself."""
    async with api_client(make_settings(database_url)) as (client, container):
        headers = await admin_headers(container)
        created = await client.post("/api/admin/keys", json={"name": "ci"}, headers=headers)
        assert created.status_code == 201
        new_key = created.json()["key"]
        listed = await client.get("/api/admin/keys", headers={"Authorization": f"Bearer {new_key}"})
        assert listed.status_code == 200
        assert {item["name"] for item in listed.json()["items"]} == {"tests", "ci"}
        assert all("key" not in item for item in listed.json()["items"])
        revoked = await client.delete(f"/api/admin/keys/{created.json()['id']}", headers=headers)
        assert revoked.status_code == 204
        after = await client.get("/api/admin/keys", headers={"Authorization": f"Bearer {new_key}"})
        assert after.status_code == 401


@pytest.mark.parametrize("limit", [1, 2])
async def test_key_list_pages_by_cursor(sqlite_url: str, limit: int) -> None:
    """Long key lists page by cursor without gaps or repeats."""
    async with api_client(make_settings(sqlite_url)) as (client, container):
        headers = await admin_headers(container)
        for name in ("a", "b", "c"):
            await container.api_keys.create(name)
        seen: list[str] = []
        cursor = None
        while True:
            params: dict[str, str | int] = {"limit": limit}
            if cursor:
                params["cursor"] = cursor
            page = (await client.get("/api/admin/keys", params=params, headers=headers)).json()
            seen.extend(item["id"] for item in page["items"])
            cursor = page["next_cursor"]
            if cursor is None:
                break
        assert len(seen) == len(set(seen)) == 4
        bad = await client.get("/api/admin/keys", params={"cursor": "%%%"}, headers=headers)
        assert bad.status_code == 422
        assert bad.json()["errors"][0]["field"] == "cursor"


async def test_unauthenticated_client_cannot_tell_ids_apart(sqlite_url: str) -> None:
    """Without a key, an existing key id and an unknown one get the same answer."""
    async with api_client(make_settings(sqlite_url)) as (client, container):
        existing = (await container.api_keys.create("real")).key.id
        answers: list[httpx.Response] = [
            await client.delete(f"/api/admin/keys/{key_id}") for key_id in (existing, "abcdefghij")
        ]
        assert [r.status_code for r in answers] == [401, 401]
        assert answers[0].content == answers[1].content
        assert len(await container.api_keys.list()) == 1
