"""Every error is problem+json; bad input never becomes a 500 and changes nothing (API-3, PRI-8)."""

import httpx

from tests.factories import admin_headers, api_client, make_settings

PROBLEM = "application/problem+json"


async def test_unknown_route_and_wrong_method_are_problems(sqlite_url: str) -> None:
    """Every error, even one FastAPI raises before our code runs, is problem+json with a code."""
    async with api_client(make_settings(sqlite_url)) as (client, _):
        missing = await client.get("/no/such/thing")
        assert (missing.status_code, missing.headers["content-type"]) == (404, PROBLEM)
        assert missing.json()["code"] == "not_found"
        wrong = await client.put("/healthz")
        assert (wrong.status_code, wrong.json()["code"]) == (405, "method_not_allowed")


async def test_oversized_body_is_413_whether_declared_or_streamed(database_url: str) -> None:
    """A client must not be able to make the API buffer an arbitrarily large body."""
    settings = make_settings(database_url, http={"max_body_bytes": 2048})
    async with api_client(settings) as (client, container):
        headers = await admin_headers(container)
        declared = await client.post(
            "/api/admin/keys", content=b'{"name": "' + b"x" * 5000 + b'"}', headers=headers
        )
        assert (declared.status_code, declared.headers["content-type"]) == (413, PROBLEM)

        async def chunks():  # no Content-Length: the limit applies while streaming
            for _ in range(10):
                yield b"x" * 1000

        streamed = await client.post("/api/admin/keys", content=chunks(), headers=headers)
        assert streamed.status_code == 413
        assert len(await container.api_keys.list()) == 1


async def test_malformed_json_and_wrong_types_are_4xx_and_change_nothing(database_url: str) -> None:
    """The caller's malformed body is a 4xx naming the field, never a 500, and changes nothing."""
    async with api_client(make_settings(database_url)) as (client, container):
        headers = {**await admin_headers(container), "content-type": "application/json"}
        cases = [
            b"{not json",
            b'{"name": 5}',
            b'{"name": ""}',
            b"[]",
            b'{"name": "' + b"y" * 300 + b'"}',
        ]
        for body in cases:
            response: httpx.Response = await client.post(
                "/api/admin/keys", content=body, headers=headers
            )
            assert 400 <= response.status_code < 500, body
            assert response.headers["content-type"] == PROBLEM
            assert "input" not in str(response.json().get("errors", ""))
        assert [key.name for key in await container.api_keys.list()] == ["tests"]


async def test_unknown_fields_in_admin_bodies_are_422_naming_them(database_url: str) -> None:
    """A misspelt field (`sheduled_at`) silently ignored looks like it worked: it must be
    refused, by name, and change nothing."""
    async with api_client(make_settings(database_url)) as (client, container):
        headers = await admin_headers(container)
        newsletter = {
            "slug": "weekly",
            "name": "The Weekly",
            "sender_name": "Editor",
            "sender_address": "editor@example.org",
        }
        refused = [
            ("/api/admin/newsletters", {**newsletter, "doubleoptin": False}),
            ("/api/admin/keys", {"name": "ci", "scopes": ["all"]}),
            ("/api/admin/subscribers", {"email": "a@example.org", "teir": "paid", "x": 1}),
            ("/api/admin/suppressions", {"email": "a@example.org", "notes": "n"}),
        ]
        for path, body in refused:
            answer = await client.post(path, json=body, headers=headers)
            assert (answer.status_code, answer.headers["content-type"]) == (422, PROBLEM), path
            named = {error["field"] for error in answer.json()["errors"]}
            known = {"slug", "name", "sender_name", "sender_address", "email"}
            assert named == {f"body.{field}" for field in set(body) - known}, (path, named)
        assert (await client.get("/api/admin/newsletters", headers=headers)).json() == []
        assert (
            await client.post("/api/admin/newsletters", json=newsletter, headers=headers)
        ).status_code == 201
        patched = await client.patch(
            "/api/admin/newsletters/weekly", json={"nmae": "Typo"}, headers=headers
        )
        assert patched.status_code == 422
        assert patched.json()["errors"] == [
            {"field": "body.nmae", "message": "Extra inputs are not permitted"}
        ]
        campaign = await client.post(
            "/api/admin/campaigns",
            json={"newsletter": "weekly", "subject": "Hi", "body": "Hello", "sheduled_at": "x"},
            headers=headers,
        )
        assert campaign.status_code == 422
        assert [e["field"] for e in campaign.json()["errors"]] == ["body.sheduled_at"]
        assert (await client.get("/api/admin/newsletters/weekly", headers=headers)).json()[
            "name"
        ] == "The Weekly"
