"""An existing person put on another newsletter through the admin API and the admin UI (issue 38
item 5): the consent choice explicit, the note in the consent history and the audit log,
refusals as problem+json (API) or the page with what was typed (UI), and adding a known
address pointing at the person instead of a bare refusal."""

from __future__ import annotations

import html
import json
from pathlib import Path

from tests.e2e.audience_helpers import create_newsletter
from tests.factories import admin_headers, api_client, make_settings
from tests.support.admin_ui import NEWSLETTER, csrf_from, signed_in, ui_app
from tests.support.cli import tidings_cli


async def test_the_api_puts_a_person_on_a_newsletter_by_the_consent_chosen(
    database_url: str,
) -> None:
    """Scripts move people between newsletters too: an assertion without its note is a 422
    naming `note`, with the note it is recorded; asserting for someone who left is a 409;
    creating a known address answers 409 with the person's id to act on."""
    async with api_client(make_settings(database_url)) as (client, container):
        headers = await admin_headers(container)
        await create_newsletter(client, headers, "weekly")
        await create_newsletter(client, headers, "monthly")
        created = await client.post(
            "/api/admin/subscribers",
            headers=headers,
            json={"email": "eve@example.org", "subscriptions": [{"newsletter": "weekly"}]},
        )
        person = created.json()["id"]
        url = f"/api/admin/subscribers/{person}/subscriptions"
        bare = await client.post(
            url, headers=headers, json={"newsletter": "monthly", "confirmed": True}
        )
        assert bare.status_code == 422
        assert bare.headers["content-type"] == "application/problem+json"
        assert bare.json()["errors"][0]["field"] == "note"
        noted = await client.post(
            url,
            headers=headers,
            json={"newsletter": "monthly", "confirmed": True, "note": "asked by email, 3 May"},
        )
        assert noted.status_code == 200, noted.text
        assert noted.json()["outcome"] == "confirmed"
        monthly = {s["newsletter"]: s for s in noted.json()["subscriber"]["subscriptions"]}
        assert monthly["monthly"]["state"] == "confirmed"
        assert monthly["monthly"]["consent_evidence"].endswith(": asked by email, 3 May")
        again = await client.post(url, headers=headers, json={"newsletter": "weekly"})
        assert again.json()["outcome"] == "asked"  # waiting: a fresh link
        await client.delete(f"{url}/monthly", headers=headers)
        forced = await client.post(
            url,
            headers=headers,
            json={"newsletter": "monthly", "confirmed": True, "note": "they phoned"},
        )
        assert forced.status_code == 409
        assert forced.json()["errors"][0]["field"] == "consent"
        known = await client.post(
            "/api/admin/subscribers", headers=headers, json={"email": "EVE@example.org"}
        )
        assert known.status_code == 409
        assert known.json()["subscriber_id"] == person
        assert f"/api/admin/subscribers/{person}/subscriptions" in known.json()["detail"]
        audit = await container.audit.list(action="subscriber.subscribed")
        assert sorted((row.detail["newsletter"], row.detail["outcome"]) for row in audit) == [
            ("monthly", "confirmed"),
            ("weekly", "asked"),
        ]
        assert [
            row.detail.get("note") for row in audit if row.detail["newsletter"] == "monthly"
        ] == ["asked by email, 3 May"]


async def test_the_person_page_adds_them_and_keeps_what_was_typed_when_refused(
    database_url: str,
) -> None:
    """From the person's page: a refused assertion comes back with the newsletter and note as
    typed and the reason at its field; the confirmation choice says what happens next; the
    "Add subscriber" form with a known address opens their page offering the same choice."""
    async with ui_app(make_settings(database_url)) as (browser, container):
        client = browser()
        csrf = await signed_in(client, container)
        await client.post("/admin/newsletters/new", data={**NEWSLETTER, "csrf_token": csrf})
        monthly = {**NEWSLETTER, "name": "Monthly Digest", "slug": "monthly"}
        await client.post("/admin/newsletters/new", data={**monthly, "csrf_token": csrf})
        made = await client.post(
            "/admin/subscribers/new",
            data={"csrf_token": csrf, "email": "eve@example.org", "newsletter": "weekly"},
        )
        assert made.status_code == 303
        person_url = made.headers["location"]
        page = await client.get(person_url)
        assert 'id="add-to-newsletter"' in page.text
        assert "Weekly Notes — waiting for their confirmation" in html.unescape(page.text)
        refused = await client.post(
            person_url + "/subscriptions",
            data={"csrf_token": csrf, "newsletter": "monthly", "consent": "asserted", "note": ""},
        )
        assert refused.status_code == 422
        assert 'id="add-note-error"' in refused.text
        assert '<option value="monthly" selected>' in refused.text
        added = await client.post(
            person_url + "/subscriptions",
            data={"csrf_token": csrf, "newsletter": "monthly", "consent": "confirmation"},
        )
        assert added.status_code == 303
        shown = html.unescape((await client.get(added.headers["location"])).text)
        assert "A confirmation email is on its way to them" in shown
        (view,) = await container.subscribers.search(text="eve")
        states = {s.newsletter: s.state for s in view.subscriptions}
        assert states == {"weekly": "pending", "monthly": "pending"}
        offered = await client.post(
            "/admin/subscribers/new",
            data={
                "csrf_token": csrf_from(await client.get("/admin/subscribers/new")),
                "email": "Eve@Example.org",
                "newsletter": "monthly",
                "consent": "asserted",
                "note": "met at the fair",
            },
        )
        assert offered.status_code == 200
        text = html.unescape(offered.text)
        assert "is already a subscriber" in text
        assert 'value="met at the fair"' in text  # the offer carries what was typed
        assert '<option value="monthly" selected>' in text


def test_the_cli_puts_a_person_on_a_newsletter_by_the_consent_chosen(
    tmp_path: Path, database_url: str
) -> None:
    """`tidings subscribers subscribe`: an assertion without its note is refused naming
    `--note` and changes nothing; with it, recorded; the default asks by email."""
    tidings = tidings_cli(database_url)
    for slug in ("weekly", "monthly"):
        made = tidings(
            "newsletters", "create", slug, "--name", slug.title(),
            "--sender-name", "E", "--sender-address", "e@example.org",
        )  # fmt: skip
        assert made.returncode == 0, made.stderr
    people = tmp_path / "people.csv"
    people.write_text("email,name\neve@example.org,Eve\n")
    assert tidings("subscribers", "import", str(people), "--newsletter", "weekly").returncode == 0
    bare = tidings(
        "subscribers", "subscribe", "EVE@example.org", "--newsletter", "monthly", "--assert-consent"
    )
    assert bare.returncode == 2
    assert "--note" in bare.stderr
    noted = tidings(
        "subscribers", "subscribe", "eve@example.org", "--newsletter", "monthly",
        "--assert-consent", "--note", "asked at the desk", "--json",
    )  # fmt: skip
    assert noted.returncode == 0, noted.stderr
    assert json.loads(noted.stdout)["outcome"] == "confirmed"
    asked = tidings("subscribers", "subscribe", "eve@example.org", "--newsletter", "weekly")
    assert asked.returncode == 0, asked.stderr
    assert "confirmation email is queued" in asked.stdout
    shown = json.loads(tidings("subscribers", "show", "eve@example.org", "--json").stdout)
    evidence = {s["newsletter"]: s["consent_evidence"] for s in shown["subscriptions"]}
    assert evidence["monthly"].endswith(": asked at the desk")
    assert evidence["weekly"] is None
    unknown = tidings("subscribers", "subscribe", "nobody@example.org", "--newsletter", "weekly")
    assert unknown.returncode == 1
