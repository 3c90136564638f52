"""Imports from the real export formats of listmonk, Ghost, Substack, Mailchimp, Buttondown and
Kit (ConvertKit), end to end (issue 38 item 4, AUD-9): each fixture file in
tests/fixtures/imports goes in through the CLI, the admin API and the admin UI, on both
databases, and every person comes out as the source meant — their status (waiting,
unsubscribed, suppressed, or skipped), name, tier, labels (normalised, each change listed)
and custom fields — with every value that could not be used reported by line, column and
value, and no row lost for it."""

from __future__ import annotations

import html
import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.e2e.audience_helpers import create_newsletter
from tests.factories import admin_headers, api_client, make_settings
from tests.support.admin_ui import NEWSLETTER, signed_in, ui_app
from tests.support.cli import tidings_cli
from tests.support.waiting import wait_for

FIXTURES = Path(__file__).parent.parent / "fixtures" / "imports"


@dataclass(frozen=True)
class Person:
    """What one row must become. `state` is the subscription's state, or `suppressed:REASON`
    (the address suppressed, nothing else kept), or `skipped` (nothing at all)."""

    state: str
    name: str | None = None
    tier: str = "free"
    labels: tuple[str, ...] = ()
    attributes: dict[str, Any] = field(default_factory=dict)
    since: str | None = None  # the subscription's creation time, as an ISO prefix


@dataclass(frozen=True)
class Source:
    people: dict[str, Person]
    warnings: list[tuple[int, str, str]] = field(default_factory=list)  # line, column, value
    label_changes: list[tuple[str, str, int]] = field(default_factory=list)
    attribute_columns: list[str] = field(default_factory=list)

    def count(self, kind: str) -> int:
        return sum(person.state.startswith(kind) for person in self.people.values())


SOURCES = {
    # The audience's subscribed, unsubscribed (UNSUB_*) and cleaned (CLEAN_*) rows under one
    # header, as a contacts export of the whole audience writes them.
    "mailchimp": Source(
        {
            "ada@example.org": Person(
                "pending",
                "Ada Lovelace",
                labels=("early", "vip"),
                attributes={
                    "address": "12 Loop Street  London  N1 9GU  GB",
                    "phone_number": "+44 20 7946 0018",
                    "birthday": "12/10",
                },
                since="2020-01-02T10:00:00",
            ),
            "bob@example.org": Person("pending", "Bob", labels=("press-contact", "vip")),
            "cy@example.org": Person("unsubscribed", "Cy Young", labels=("book-club-2024", "vip")),
            "dee@example.org": Person("suppressed:hard_bounce"),
            "eve@example.org": Person(
                "pending", "Eve Moreau", labels=("cafe",), attributes={"birthday": "03/21"}
            ),
        },
        warnings=[(6, "TAGS", "🔥")],
        label_changes=[
            ("Book Club, 2024", "book-club-2024", 1),
            ("Café", "cafe", 1),
            ("Press Contact", "press-contact", 1),
            ("VIP", "vip", 1),
        ],
        attribute_columns=["Address", "Phone Number", "Birthday"],
    ),
    "listmonk": Source(
        {
            "ann@example.net": Person(
                "pending",
                "Ann Ito",
                attributes={"city": "Oslo", "kids": 2, "projects": ["tidings", "listmonk"]},
                since="2022-04-06T07:42:08",
            ),
            "ben@example.net": Person("unsubscribed", "Ben Okafor"),
            "cat@example.net": Person("suppressed:admin"),
            "dan@example.net": Person("pending", since="2023-09-09T09:09:09"),
        },
        attribute_columns=["attributes"],
    ),
    "ghost": Source(
        {
            "gil@example.com": Person(
                "pending", "Gil Scott", labels=("early-reader", "vip"), since="2023-04-05T10:00"
            ),
            "hal@example.com": Person("pending", "Hal Jordan", "comped", ("press",)),
            "ivy@example.com": Person("pending", "Ivy Chen", "paid"),
            "jo@example.com": Person("unsubscribed", "Jo March", labels=("newsletter-only",)),
        },
        label_changes=[
            ("Early Reader", "early-reader", 1),
            ("Press", "press", 1),
            ("VIP", "vip", 1),
        ],
    ),
    "substack": Source(
        {
            "kim@example.com": Person("pending", since="2021-06-01T12:00:00"),
            "lea@example.com": Person("pending", tier="paid", attributes={"plan": "yearly"}),
            "max@example.com": Person("unsubscribed"),
            "ned@example.com": Person("pending", tier="paid", attributes={"plan": "monthly"}),
        },
        attribute_columns=["plan"],
    ),
    "buttondown": Source(
        {
            "oli@example.org": Person(
                "pending",
                labels=("python", "weekly-digest"),
                attributes={"first_name": "Oli", "company": "Acme"},
                since="2021-02-03T04:05:06",
            ),
            "pia@example.org": Person("pending", tier="paid", labels=("supporter",)),
            "quinn@example.org": Person("pending"),
            "ray@example.org": Person("unsubscribed", labels=("python",)),
            "sam@example.org": Person("suppressed:hard_bounce"),
            "tod@example.org": Person("skipped"),
            "uma@example.org": Person("pending", tier="comped"),
        },
        warnings=[(7, "subscriber_type", "spammy")],
        label_changes=[("Python", "python", 2), ("Weekly Digest", "weekly-digest", 1)],
        attribute_columns=["metadata"],
    ),
    "kit": Source(
        {
            "vic@example.net": Person(
                "pending",
                "Vic",
                labels=("course-buyer", "newsletter"),
                since="2024-01-15T10:00:00",
            ),
            "wen@example.net": Person("pending", "Wen"),
            "xia@example.net": Person("unsubscribed", "Xia", labels=("newsletter",)),
            "yan@example.net": Person("suppressed:hard_bounce"),
            "zoe@example.net": Person("suppressed:complaint"),
        },
        label_changes=[("Newsletter", "newsletter", 2), ("Course Buyer", "course-buyer", 1)],
    ),
}


def _check_report(source: Source, report: dict[str, Any]) -> None:
    """The JSON report (CLI `--json` and the API answer one shape): every row in one count,
    each warning by line, column and value, each renamed label."""
    assert report["failed_rows"] == 0, report["errors"]
    assert report["total_rows"] == len(source.people)
    assert report["suppressed"] == source.count("suppressed")
    assert report["skipped"] == source.count("skipped")
    assert report["created"] == len(source.people) - source.count("suppressed") - source.count(
        "skipped"
    )
    assert [(w["line"], w["column"], w["value"]) for w in report["warnings"]] == source.warnings
    assert [(c["written"], c["kept"], c["rows"]) for c in report["label_changes"]] == (
        source.label_changes
    )
    assert report["attribute_columns"] == source.attribute_columns


async def _check_people(client: httpx.AsyncClient, headers: dict[str, str], source: Source) -> None:
    """Everyone as the source meant, read back through the admin API; nobody else."""
    listed = await client.get("/api/admin/subscribers", headers=headers, params={"limit": 500})
    stored = {item["email"]: item for item in listed.json()["items"]}
    kept = {email for email, person in source.people.items() if person.state in STATES}
    assert set(stored) == kept
    for email, person in source.people.items():
        check = await client.get(
            "/api/admin/suppressions/check", headers=headers, params={"email": email}
        )
        assert check.json()["suppressed"] is person.state.startswith("suppressed"), email
        if email not in kept:
            continue
        item = stored[email]
        (subscription,) = item["subscriptions"]
        assert (subscription["newsletter"], subscription["state"]) == ("weekly", person.state)
        assert subscription["source"] == "import"
        assert (item["name"], item["tier"]) == (person.name, person.tier), email
        assert sorted(item["labels"]) == sorted(person.labels), email
        assert item["attributes"] == person.attributes, email
        if person.since is not None:
            assert subscription["created_at"].startswith(person.since), email
    suppressions = await client.get("/api/admin/suppressions", headers=headers)
    reasons = Counter(row["reason"] for row in suppressions.json()["items"])
    expected = Counter(
        person.state.partition(":")[2]
        for person in source.people.values()
        if person.state.startswith("suppressed")
    )
    assert reasons == expected


STATES = ("pending", "confirmed", "unsubscribed")


@pytest.mark.parametrize("name", sorted(SOURCES))
async def test_each_tools_export_imports_through_the_cli(name: str, database_url: str) -> None:
    """`tidings subscribers import` on another tool's own export file: nobody lost, nobody
    made mailable, the bounced and blocked suppressed, labels made to fit and listed."""
    source = SOURCES[name]
    tidings = tidings_cli(database_url)
    made = tidings(
        "newsletters", "create", "weekly", "--name", "Weekly",
        "--sender-name", "E", "--sender-address", "e@example.org",
    )  # fmt: skip
    assert made.returncode == 0, made.stderr
    path = FIXTURES / f"{name}.csv"
    imported = tidings("subscribers", "import", str(path), "--newsletter", "weekly", "--json")
    assert imported.returncode == 0, imported.stdout + imported.stderr
    _check_report(source, json.loads(imported.stdout))
    for email in source.people:
        assert email not in imported.stderr  # the log carries counts, never addresses
    async with api_client(make_settings(database_url)) as (client, container):
        await _check_people(client, await admin_headers(container), source)


@pytest.mark.parametrize("name", sorted(SOURCES))
async def test_each_tools_export_imports_through_the_admin_api(
    name: str, database_url: str
) -> None:
    """`POST /api/admin/subscribers/import` with another tool's export as the body: the same
    people and the same report as the CLI; importing it again changes nothing."""
    source = SOURCES[name]
    body = (FIXTURES / f"{name}.csv").read_bytes()
    async with api_client(make_settings(database_url)) as (client, container):
        headers = await admin_headers(container)
        await create_newsletter(client, headers)

        async def post() -> dict[str, Any]:
            answer = await client.post(
                "/api/admin/subscribers/import",
                params={"newsletter": "weekly"},
                content=body,
                headers={**headers, "content-type": "text/csv"},
            )
            assert answer.status_code == 200, answer.text
            return dict(answer.json())

        _check_report(source, await post())
        await _check_people(client, headers, source)
        again = await post()
        assert (again["created"], again["updated"]) == (0, 0)
        await _check_people(client, headers, source)


@pytest.mark.parametrize("name", sorted(SOURCES))
async def test_each_tools_export_imports_through_the_admin_ui(name: str, database_url: str) -> None:
    """The admin's import form with another tool's export: the report page lists each label
    renamed and each value skipped with its line, column and value, and the people are as
    the source meant."""
    source = SOURCES[name]
    async with ui_app(make_settings(database_url)) as (browser, container):
        client = browser()
        csrf = await signed_in(client, container)
        await client.post("/admin/newsletters/new", data={**NEWSLETTER, "csrf_token": csrf})
        started = await client.post(
            "/admin/subscribers/import",
            data={"csrf_token": csrf, "newsletter": "weekly"},
            files={"file": (f"{name}.csv", (FIXTURES / f"{name}.csv").read_bytes(), "text/csv")},
        )
        assert started.status_code == 303, started.text
        status_url = started.headers["location"]

        async def finished() -> bool:
            return bool((await client.get(status_url + "/progress")).json()["done"])

        await wait_for(finished, message="the import never finished")
        page = html.unescape((await client.get(status_url)).text)
        assert f"Done: {len(source.people)} rows into weekly" in page
        assert "Rows not imported" not in page
        for written, kept, rows in source.label_changes:
            assert f"label '{written}' → '{kept}' ({rows} row" in page
        for line, column, value in source.warnings:
            assert f'<td class="num">{line}</td><td>{column}</td><td><code>{value}</code>' in page
        api = browser()
        await _check_people(api, await admin_headers(container), source)
