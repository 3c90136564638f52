"""The admin UI's audience pages drive the real use cases: newsletters, search, a person's
page, suppress, privacy export and delete, CSV import with its report, export (UI-1)."""

import asyncio

import httpx

from tests.factories import make_settings
from tests.support.admin_ui import NEWSLETTER, csrf_from, signed_in, ui_app
from tests.support.locks import write_lock_held
from tidings.config import load_settings

CSV = (
    "email,name,tier,labels,status\n"
    "ada@example.org,Ada,paid,beta,confirmed\n"
    "not-an-address,Bad,free,,confirmed\n"
    "bob@example.org,Bob,free,,confirmed\n"
)


async def _import(client: httpx.AsyncClient, csrf: str, text: str) -> httpx.Response:
    started = await client.post(
        "/admin/subscribers/import",
        data={"csrf_token": csrf, "newsletter": "weekly"},
        files={"file": ("people.csv", text.encode(), "text/csv")},
    )
    assert started.status_code == 303, started.text
    status_url = started.headers["location"]
    for _ in range(200):
        progress = (await client.get(status_url + "/progress")).json()
        if progress["done"]:
            break
        await asyncio.sleep(0.05)
    assert progress["done"]
    return await client.get(status_url)


async def test_newsletters_are_created_listed_and_edited(database_url: str) -> None:
    """An operator without the CLI must be able to set up a newsletter."""
    async with ui_app(make_settings(database_url)) as (browser, container):
        client = browser()
        csrf = await signed_in(client, container)
        bad = await client.post(
            "/admin/newsletters/new", data={**NEWSLETTER, "slug": "Not A Slug", "csrf_token": csrf}
        )
        assert bad.status_code == 422
        assert "slug must be lowercase" in bad.text
        assert await container.newsletters.list() == []
        made = await client.post("/admin/newsletters/new", data={**NEWSLETTER, "csrf_token": csrf})
        assert made.status_code == 303
        listing = await client.get("/admin/newsletters")
        assert "Weekly Notes" in listing.text
        edited = await client.post(
            "/admin/newsletters/weekly",
            data={**NEWSLETTER, "name": "Friday Notes", "csrf_token": csrf},
        )
        assert edited.status_code == 303
        assert (await container.newsletters.get("weekly")).name == "Friday Notes"
        assert (await container.newsletters.get("weekly")).double_opt_in is True


async def test_csv_import_reports_each_bad_line_and_people_can_be_found(
    database_url: str,
) -> None:
    """An import must say exactly which lines failed, and the imported people be searchable."""
    async with ui_app(make_settings(database_url)) as (browser, container):
        client = browser()
        csrf = await signed_in(client, container)
        await client.post("/admin/newsletters/new", data={**NEWSLETTER, "csrf_token": csrf})
        report = await _import(client, csrf, CSV)
        assert "Done: 3 rows into weekly" in report.text
        assert '<td class="num">3</td><td>email</td>' in report.text
        paid = await client.get("/admin/subscribers", params={"tier": "paid", "state": "confirmed"})
        assert "ada@example.org" in paid.text
        assert "bob@example.org" not in paid.text
        text = await client.get("/admin/subscribers", params={"q": "bob"})
        assert "bob@example.org" in text.text
        assert "ada@example.org" not in text.text
        exported = await client.get("/admin/subscribers/export", params={"label": "beta"})
        assert exported.headers["content-type"].startswith("text/csv")
        assert "ada@example.org" in exported.text
        assert "bob@example.org" not in exported.text
        dashboard = await client.get("/admin")
        assert "Weekly Notes" in dashboard.text
        assert '<td class="num">2</td>' in dashboard.text  # two confirmed


async def test_person_page_suppress_export_and_confirmed_delete(database_url: str) -> None:
    """Privacy requests (AUD-10) must be answerable from the browser, and delete must not
    happen by a slip: it needs the address typed back."""
    async with ui_app(make_settings(database_url)) as (browser, container):
        client = browser()
        csrf = await signed_in(client, container)
        await client.post("/admin/newsletters/new", data={**NEWSLETTER, "csrf_token": csrf})
        await _import(client, csrf, CSV)
        (ada,) = await container.subscribers.search(text="ada")
        person_url = f"/admin/subscribers/{ada.subscriber.id}"
        person = await client.get(person_url)
        assert "Consent history" in person.text
        assert "import:ui:" in person.text  # the evidence of the imported consent
        exported = await client.get(person_url + "/export")
        assert exported.json()["subscriber"]["email"] == "ada@example.org"
        suppressed = await client.post(person_url + "/suppress", data={"csrf_token": csrf})
        assert suppressed.status_code == 303
        assert await container.suppressions.is_suppressed("ada@example.org")
        confirm = await client.get(person_url + "/delete")
        wrong = await client.post(
            person_url + "/delete",
            data={"csrf_token": csrf_from(confirm), "confirm_email": "someone@else.org"},
        )
        assert wrong.status_code == 422
        assert len(await container.subscribers.search(text="ada")) == 1
        deleted = await client.post(
            person_url + "/delete", data={"csrf_token": csrf, "confirm_email": "ADA@example.org"}
        )
        assert deleted.status_code == 303
        assert await container.subscribers.search(text="ada") == []
        assert (await client.get(person_url)).status_code == 404


async def test_a_form_post_meeting_a_held_write_lock_gets_a_busy_page(sqlite_url: str) -> None:
    """The admin UI answers a refusal with the status the API gives it (one table for both): a
    form posted while another process holds SQLite's write lock gets a 503 page with
    Retry-After and changes nothing, not a 500."""
    settings = load_settings(database={"url": sqlite_url, "sqlite_busy_timeout_ms": 50})
    async with ui_app(settings) as (browser, container):
        client = browser()
        csrf = await signed_in(client, container)
        with write_lock_held(sqlite_url):
            busy = await client.post(
                "/admin/newsletters/new", data={**NEWSLETTER, "csrf_token": csrf}
            )
        assert busy.status_code == 503, busy.text
        assert int(busy.headers["Retry-After"]) >= 1
        assert await container.newsletters.list() == []
