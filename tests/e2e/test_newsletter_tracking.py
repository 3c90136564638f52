"""A newsletter's open and click tracking mode (ENG-1), set and shown through the admin API,
the CLI and the newsletter page, refused when it is not a mode, and audited."""

from __future__ import annotations

import json

from tests.e2e.audience_helpers import create_newsletter
from tests.factories import admin_headers, api_client, make_settings
from tests.support.admin_ui import NEWSLETTER, signed_in, ui_app
from tests.support.cli import clean_env, tidings
from tidings.bootstrap import Container


async def _tracking_audit(container: Container) -> list[dict[str, object]]:
    rows = await container.audit.list(action="newsletter.tracking")
    return [dict(row.detail or {}) for row in reversed(rows)]


async def test_api_sets_tracking_on_create_and_update_and_audits_each_change(
    database_url: str,
) -> None:
    """What a newsletter's mail carries about its readers changes with this field: it must
    default to off, read back as set, and leave a trace of who changed it."""
    async with api_client(make_settings(database_url)) as (client, container):
        headers = await admin_headers(container)
        assert (await create_newsletter(client, headers, "quiet"))["tracking"] == "off"
        made = await create_newsletter(client, headers, "counted", tracking="aggregate")
        assert made["tracking"] == "aggregate"
        patched = await client.patch(
            "/api/admin/newsletters/counted", json={"tracking": "per_person"}, headers=headers
        )
        assert patched.status_code == 200, patched.text
        assert patched.json()["tracking"] == "per_person"
        listed = await client.get("/api/admin/newsletters", headers=headers)
        assert {n["slug"]: n["tracking"] for n in listed.json()} == {
            "quiet": "off",
            "counted": "per_person",
        }
        renamed = await client.patch(
            "/api/admin/newsletters/counted", json={"name": "Counted"}, headers=headers
        )
        assert renamed.json()["tracking"] == "per_person"  # an edit without it keeps it
        assert await _tracking_audit(container) == [
            {"tracking": "aggregate", "before": "off", "slug": "counted"},
            {"tracking": "per_person", "before": "aggregate", "slug": "counted"},
        ]


async def test_api_refuses_a_tracking_value_that_is_not_a_mode(database_url: str) -> None:
    """A typo must never silently leave tracking as it was or switch it: 422 naming the field."""
    async with api_client(make_settings(database_url)) as (client, container):
        headers = await admin_headers(container)
        await create_newsletter(client, headers)
        for body in ({"tracking": "on"}, {"tracking": None}, {"tracking": 1}):
            refused = await client.patch(
                "/api/admin/newsletters/weekly", json=body, headers=headers
            )
            assert refused.status_code == 422, body
            assert refused.headers["content-type"] == "application/problem+json"
            assert "tracking" in refused.text
        created = await client.post(
            "/api/admin/newsletters",
            json={
                "slug": "other",
                "name": "Other",
                "sender_name": "E",
                "sender_address": "e@example.org",
                "tracking": "everything",
            },
            headers=headers,
        )
        assert created.status_code == 422
        assert [error["field"] for error in created.json()["errors"]] == ["body.tracking"]
        shown = await client.get("/api/admin/newsletters/weekly", headers=headers)
        assert shown.json()["tracking"] == "off"


async def test_cli_tracking_command_sets_the_mode_and_list_shows_it(database_url: str) -> None:
    """The operator's command line must be able to turn tracking on and see it, like archive."""
    async with api_client(make_settings(database_url)) as (client, container):
        await create_newsletter(client, await admin_headers(container))
        env = clean_env(DATABASE_URL=database_url)
        ran = tidings("newsletters", "tracking", "weekly", "per_person", env=env)
        assert ran.returncode == 0, ran.output
        assert "weekly: tracking per_person" in ran.stdout
        assert "ticked the consent box" in ran.stdout
        listed = tidings("newsletters", "list", "--json", env=env)
        assert [n["tracking"] for n in json.loads(listed.stdout)] == ["per_person"]
        table = tidings("newsletters", "list", env=env)
        assert "per_person" in table.stdout
        assert await _tracking_audit(container) == [
            {"tracking": "per_person", "before": "off", "slug": "weekly"}
        ]


async def test_cli_tracking_command_refuses_a_bad_mode_naming_the_field(
    database_url: str,
) -> None:
    """A wrong word exits 2 with the field named and changes nothing, like its siblings."""
    async with api_client(make_settings(database_url)) as (client, container):
        await create_newsletter(client, await admin_headers(container))
        env = clean_env(DATABASE_URL=database_url)
        ran = tidings("newsletters", "tracking", "weekly", "always", env=env)
        assert ran.returncode == 2
        assert "tracking" in ran.stderr
        assert "off, aggregate, per_person" in ran.stderr
        missing = tidings("newsletters", "tracking", "nosuch", "aggregate", env=env)
        assert missing.returncode == 1
        assert "nosuch" in missing.stderr
        assert (await container.newsletters.get("weekly")).tracking == "off"


async def test_newsletter_page_explains_each_mode_and_saves_the_choice(
    database_url: str,
) -> None:
    """An operator chooses on the page what is tracked; each choice says what it means, and
    per person says it covers only those who ticked the consent box."""
    async with ui_app(make_settings(database_url)) as (browser, container):
        client = browser()
        csrf = await signed_in(client, container)
        made = await client.post(
            "/admin/newsletters/new",
            data={**NEWSLETTER, "tracking": "aggregate", "csrf_token": csrf},
        )
        assert made.status_code == 303, made.text
        page = await client.get("/admin/newsletters/weekly")
        assert 'name="tracking" type="radio" value="aggregate" checked' in page.text
        assert "only for subscribers who ticked the consent box" in page.text
        assert "nothing ties a hit to a person" in page.text
        changed = await client.post(
            "/admin/newsletters/weekly",
            data={**NEWSLETTER, "tracking": "per_person", "csrf_token": csrf},
        )
        assert changed.status_code == 303
        assert (await container.newsletters.get("weekly")).tracking == "per_person"
        renamed = await client.post(  # a post without the field (a script's) keeps the mode
            "/admin/newsletters/weekly",
            data={**NEWSLETTER, "name": "Weekly", "csrf_token": csrf},
        )
        assert renamed.status_code == 303
        assert (await container.newsletters.get("weekly")).tracking == "per_person"
        listed = await client.get("/admin/newsletters")
        assert "per person" in listed.text
        refused = await client.post(
            "/admin/newsletters/weekly",
            data={**NEWSLETTER, "tracking": "sneaky", "csrf_token": csrf},
        )
        assert refused.status_code == 422
        assert "tracking must be one of" in refused.text
        assert (await container.newsletters.get("weekly")).tracking == "per_person"
        assert [entry["tracking"] for entry in await _tracking_audit(container)] == [
            "aggregate",
            "per_person",
        ]
