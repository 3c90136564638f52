"""Managing people in the admin (issue 25 item 2): add with an explicit consent choice, edit
name, tier, labels and custom fields, unsubscribe from one newsletter, and bulk actions that
show their count before acting and are recorded in the audit log with it; the same bulk
action through the admin API."""

import json
import re
from pathlib import Path

import httpx

from tests.factories import admin_headers, make_settings
from tests.support.admin_ui import NEWSLETTER, signed_in, ui_app
from tests.support.cli import tidings_cli
from tests.support.sending import seed
from tests.support.waiting import wait_for


async def test_an_added_subscriber_records_the_consent_choice_and_can_be_edited(
    database_url: str,
) -> None:
    """An operator adding someone by hand must say how consent is obtained, and a refused
    form keeps what they typed; edits to custom fields keep imported numbers as numbers."""
    async with ui_app(make_settings(database_url)) as (browser, container):
        client = browser()
        csrf = await signed_in(client, container)
        await client.post("/admin/newsletters/new", data={**NEWSLETTER, "csrf_token": csrf})
        form = {
            "csrf_token": csrf,
            "email": "ann@example.org",
            "name": "Ann Lee",
            "tier": "paid",
            "labels": "fair, vip",
            "newsletter": "weekly",
            "consent": "asserted",
            "note": "",
        }
        refused = await client.post("/admin/subscribers/new", data=form)
        assert refused.status_code == 422
        assert 'id="note-error"' in refused.text
        assert 'value="ann@example.org"' in refused.text
        assert await container.subscribers.search(text="ann") == []
        made = await client.post(
            "/admin/subscribers/new", data={**form, "note": "signed up at the May fair"}
        )
        assert made.status_code == 303, made.text
        person = made.headers["location"]
        view = await container.subscribers.find("ann@example.org")
        (subscription,) = view.subscriptions
        assert subscription.state == "confirmed"
        assert "signed up at the May fair" in (subscription.consent_evidence or "")
        asked = await client.post(
            "/admin/subscribers/new",
            data={**form, "email": "bob@example.org", "consent": "confirm", "labels": ""},
        )
        assert asked.status_code == 303
        bob = await container.subscribers.find("bob@example.org")
        assert [s.state for s in bob.subscriptions] == ["pending"]

        await container.subscribers.update(view.subscriber.id, attributes={"kids": 2})
        edit_page = await client.get(person + "/edit")
        assert "kids = 2" in edit_page.text
        bad = await client.post(
            person + "/edit",
            data={"csrf_token": csrf, "name": "Ann", "tier": "paid", "fields": "no equals sign"},
        )
        assert bad.status_code == 422
        assert 'aria-invalid="true"' in bad.text
        saved = await client.post(
            person + "/edit",
            data={
                "csrf_token": csrf,
                "name": "Ann B. Lee",
                "tier": "comped",
                "labels": "vip",
                "fields": "kids = 2\ncity = Paris",
            },
        )
        assert saved.status_code == 303
        edited = await container.subscribers.get(view.subscriber.id)
        assert (edited.subscriber.name, edited.subscriber.tier, edited.labels) == (
            "Ann B. Lee",
            "comped",
            ["vip"],
        )
        assert edited.subscriber.attributes == {"kids": 2, "city": "Paris"}

        left = await client.post(person + "/unsubscribe/weekly", data={"csrf_token": csrf})
        assert left.status_code == 303
        after = await container.subscribers.get(view.subscriber.id)
        assert [s.state for s in after.subscriptions] == ["unsubscribed"]
        audited = [(e.action, e.target) for e in await container.audit.list(action="subscriber.")]
        target = f"subscriber:{view.subscriber.id}"
        assert ("subscriber.update", target) in audited
        assert ("subscriber.unsubscribe", target) in audited
        assert [action for action, _ in audited].count("subscriber.create") == 2


async def test_bulk_actions_show_their_count_first_and_are_audited_with_it(
    database_url: str,
) -> None:
    """Acting on many people at once must say how many before it acts, act on exactly those,
    and leave a record of who did it to how many."""
    async with ui_app(make_settings(database_url)) as (browser, container):
        client = browser()
        csrf = await signed_in(client, container)
        await client.post("/admin/newsletters/new", data={**NEWSLETTER, "csrf_token": csrf})
        await seed(container, "weekly", 6)
        listing = await client.get("/admin/subscribers", params={"tier": "paid"})
        assert re.search(r"<strong data-total>3</strong>", listing.text)
        paid = [view.subscriber.id for view in await container.subscribers.search(tier="paid")]
        filters = {"newsletter": "", "state": "", "tier": "paid", "label": "", "q": ""}
        bulk = {"csrf_token": csrf, **filters, "action": "label", "bulk_label": "members"}
        nothing = await client.post("/admin/subscribers/bulk", data=bulk)
        assert nothing.status_code == 422
        assert "tick the subscribers" in nothing.text
        for bad in ("99999999999999999999", "x", "0"):
            refused = await client.post("/admin/subscribers/bulk", data={**bulk, "ids": bad})
            assert refused.status_code == 422, bad
        review = await client.post("/admin/subscribers/bulk", data={**bulk, "scope": "all"})
        assert review.status_code == 200
        assert "<strong>3</strong> subscribers, all that match the filter" in review.text
        assert await container.subscribers.search(label="members") == []
        done = await client.post("/admin/subscribers/bulk/apply", data={**bulk, "scope": "all"})
        assert done.status_code == 303
        labelled = await container.subscribers.search(label="members")
        assert sorted(view.subscriber.id for view in labelled) == sorted(paid)

        picked = {**bulk, "action": "unsubscribe", "bulk_newsletter": "weekly", "ids": paid[:2]}
        review = await client.post("/admin/subscribers/bulk", data=picked)
        assert "<strong>2</strong> subscribers you ticked" in review.text
        await client.post("/admin/subscribers/bulk/apply", data=picked)
        states = {
            view.subscriber.id: view.subscriptions[0].state
            for view in await container.subscribers.search(newsletter="weekly")
        }
        assert [states[i] for i in paid] == ["unsubscribed", "unsubscribed", "confirmed"]

        entries = await container.audit.list(action="subscribers.bulk")
        admin = await container.admins.find("operator@example.org")
        assert [(e.action, e.actor, e.detail["count"]) for e in entries] == [
            ("subscribers.bulk_unsubscribe", f"admin:{admin.id}", 2),
            ("subscribers.bulk_label", f"admin:{admin.id}", 3),
        ]

        headers = await admin_headers(container)
        api = await client.post(
            "/api/admin/subscribers/bulk",
            headers=headers,
            json={"action": "delete", "tier": "paid", "filter_label": "members"},
        )
        assert api.status_code == 200, api.text
        assert api.json() == {"action": "delete", "count": 3}
        assert await container.subscribers.search(tier="paid") == []
        (latest, *_) = await container.audit.list(action="subscribers.bulk")
        assert (latest.action, latest.actor.startswith("key:")) == ("subscribers.bulk_delete", True)
        refused = await client.post(
            "/api/admin/subscribers/bulk", headers=headers, json={"action": "label"}
        )
        assert refused.status_code == 422
        assert refused.headers["content-type"] == "application/problem+json"


async def test_the_new_subscriber_and_edit_forms_open_empty_and_filled(database_url: str) -> None:
    """The forms an operator opens first must render, blank for a new person and with the
    stored values (custom fields as `name = value` lines) for an edit."""
    async with ui_app(make_settings(database_url)) as (browser, container):
        client = browser()
        await signed_in(client, container)
        blank = await client.get("/admin/subscribers/new")
        assert blank.status_code == 200
        assert (
            'id="email" name="email" type="email" required maxlength="320" value=""' in blank.text
        )
        view = await container.subscribers.create(
            email="kim@example.org",
            name="Kim",
            tier="free",
            labels=["fair"],
            attributes={"city": "Oslo"},
            subscribe_to=[],
            actor="tests",
        )
        filled = await client.get(f"/admin/subscribers/{view.subscriber.id}/edit")
        assert filled.status_code == 200
        assert "city = Oslo" in filled.text
        assert 'value="fair"' in filled.text


def test_the_cli_bulk_command_states_the_count_asks_and_is_audited(
    tmp_path: Path, database_url: str
) -> None:
    """The command line acts on many people as the admin does: it says how many first, does
    nothing when told no, and leaves an audit entry with the count."""
    tidings = tidings_cli(database_url)
    assert tidings("migrate").returncode == 0
    created = tidings(
        *("newsletters", "create", "weekly", "--name", "Weekly"),
        *("--sender-name", "E", "--sender-address", "e@example.org"),
    )
    assert created.returncode == 0, created.stderr
    source = tmp_path / "people.csv"
    source.write_text(
        "email,tier,status\nann@example.org,paid,confirmed\nbob@example.org,paid,\n"
        "cy@example.org,free,confirmed\n"
    )
    assert tidings("subscribers", "import", str(source), "--newsletter", "weekly").returncode == 0
    chosen = ("subscribers", "bulk", "label", "--label", "patrons", "--tier", "paid")
    declined = tidings(*chosen, input="n\n")
    assert declined.returncode == 1
    assert "label: 2 subscriber(s) selected" in declined.stdout
    done = tidings(*chosen, "--yes", "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"action": "label", "count": 2}
    shown = tidings("subscribers", "show", "ann@example.org", "--json")
    assert json.loads(shown.stdout)["labels"] == ["patrons"]
    audited = tidings("audit", "list", "--action", "subscribers.bulk", "--json")
    (entry,) = json.loads(audited.stdout)
    assert entry["detail"]["count"] == 2
    assert entry["actor"].startswith("cli:")


async def _imported(client: httpx.AsyncClient, csrf: str, text: str, consent: str) -> str:
    started = await client.post(
        "/admin/subscribers/import",
        data={"csrf_token": csrf, "newsletter": "weekly", "consent": consent},
        files={"file": ("people.csv", text.encode(), "text/csv")},
    )
    assert started.status_code == 303, started.text
    status_url = started.headers["location"]

    async def finished() -> bool:
        return bool((await client.get(status_url + "/progress")).json()["done"])

    await wait_for(finished, message="the import did not finish")
    return (await client.get(status_url)).text


async def test_the_import_form_asserts_consent_or_asks_the_waiting_ones(
    database_url: str,
) -> None:
    """A listmonk export of `enabled` people must not import silently unmailable: the
    report says how many wait, and the operator can assert consent or ask them to confirm."""
    listmonk = "email,name,status\nann@example.org,Ann,enabled\nbob@example.org,Bob,enabled\n"
    async with ui_app(make_settings(database_url)) as (browser, container):
        client = browser()
        csrf = await signed_in(client, container)
        await client.post("/admin/newsletters/new", data={**NEWSLETTER, "csrf_token": csrf})
        waiting = await _imported(client, csrf, listmonk, "wait")
        assert "<strong>0</strong> mailable now, <strong>2</strong> wait for confirmation" in (
            waiting
        )
        assert "Email the confirmation link to everyone pending in weekly" in waiting
        asked = await client.post(
            "/admin/subscribers/confirm-pending", data={"csrf_token": csrf, "newsletter": "weekly"}
        )
        assert asked.status_code == 303
        assert "changed=2" in asked.headers["location"]
        asserted = await _imported(
            client, csrf, listmonk.replace("ann", "cy").replace("bob", "dee"), "assert"
        )
        assert "<strong>2</strong> mailable now, <strong>0</strong> wait" in asserted
        cy = await container.subscribers.find("cy@example.org")
        assert [s.state for s in cy.subscriptions] == ["confirmed"]
        bad = await client.post(
            "/admin/subscribers/import",
            data={"csrf_token": csrf, "newsletter": "weekly", "consent": "maybe"},
            files={"file": ("people.csv", listmonk.encode(), "text/csv")},
        )
        assert bad.status_code == 422
