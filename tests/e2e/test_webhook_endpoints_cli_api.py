"""An endpoint's opt-out of import events, set through the admin API and through
`tidings webhooks` (issue 12, item 10)."""

import json

from tests.e2e.test_cli import _tidings
from tests.factories import admin_headers, api_client, make_settings


async def test_the_api_sets_and_changes_whether_an_endpoint_receives_import_events(
    database_url: str,
) -> None:
    """An admin preparing a big import must be able to quiet one endpoint and see that it is
    quiet; endpoints created without saying keep receiving everything."""
    async with api_client(make_settings(database_url)) as (client, container):
        headers = await admin_headers(container)
        quiet = await client.post(
            "/api/admin/webhooks",
            headers=headers,
            json={
                "url": "https://hooks.example.org/a",
                "event_types": ["*"],
                "include_imports": False,
            },
        )
        assert quiet.status_code == 201
        assert quiet.json()["include_imports"] is False
        default = await client.post(
            "/api/admin/webhooks",
            headers=headers,
            json={"url": "https://hooks.example.org/b", "event_types": ["*"]},
        )
        assert default.json()["include_imports"] is True
        changed = await client.patch(
            f"/api/admin/webhooks/{quiet.json()['id']}",
            headers=headers,
            json={"include_imports": True},
        )
        assert changed.status_code == 200
        assert changed.json()["include_imports"] is True
        wrong = await client.patch(
            f"/api/admin/webhooks/{quiet.json()['id']}",
            headers=headers,
            json={"include_imports": "sometimes"},
        )
        assert wrong.status_code == 422
        listed = (await client.get("/api/admin/webhooks", headers=headers)).json()["items"]
        assert [row["include_imports"] for row in listed] == [True, True]


def test_the_cli_creates_lists_and_updates_endpoints_with_the_import_option(
    database_url: str,
) -> None:
    """Operators who script with the CLI need the same switch as the API, and the secret
    once, at creation."""
    assert _tidings(database_url, "migrate").returncode == 0
    created = _tidings(
        database_url, "webhooks", "create", "https://hooks.example.org/in", "--no-imports", "--json"
    )
    assert created.returncode == 0, created.stderr
    endpoint = json.loads(created.stdout)
    assert endpoint["secret"].startswith("whsec_")
    assert (endpoint["include_imports"], endpoint["event_types"]) == (False, ["*"])
    listed = json.loads(_tidings(database_url, "webhooks", "list", "--json").stdout)
    assert [(row["id"], row["include_imports"]) for row in listed] == [(endpoint["id"], False)]
    assert endpoint["secret"] not in json.dumps(listed)
    updated = _tidings(
        database_url, "webhooks", "update", str(endpoint["id"]), "--imports", "--json"
    )
    assert updated.returncode == 0, updated.stderr
    assert json.loads(updated.stdout)["include_imports"] is True
    bad = _tidings(database_url, "webhooks", "create", "ftp://x", "--event", "subscriber.created")
    assert bad.returncode != 0
    assert "url" in bad.stderr
    assert "Traceback" not in bad.stderr
