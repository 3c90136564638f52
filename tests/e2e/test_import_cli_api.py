"""Import and export through the CLI and the admin API, as an operator uses them (AUD-9)."""

from __future__ import annotations

import json
from pathlib import Path

from tests.e2e.audience_helpers import create_newsletter, snapshot
from tests.factories import admin_headers, api_client, make_settings
from tests.support.cli import tidings_cli

CSV = (
    "email,name,tier,labels,status\n"
    "ann@example.org,Ann,paid,beta;press,confirmed\n"
    "not-an-address,Bob,free,,pending\n"
    "cy@example.org,Cy,gold,,pending\n"
    "dee@example.org,Dee,free,,unsubscribed\n"
)


def test_cli_import_reports_row_errors_and_exports(tmp_path: Path, database_url: str) -> None:
    """An operator importing a file sees which rows failed and why, and can export what went in."""
    tidings = tidings_cli(database_url)
    assert tidings("migrate").returncode == 0
    assert (
        tidings(
            "newsletters",
            "create",
            "weekly",
            "--name",
            "Weekly",
            "--sender-name",
            "E",
            "--sender-address",
            "e@example.org",
        ).returncode
        == 0
    )
    source = tmp_path / "readers.csv"
    source.write_text(CSV)
    imported = tidings("subscribers", "import", str(source), "--newsletter", "weekly", "--json")
    assert imported.returncode == 1  # some rows failed
    report = json.loads(imported.stdout)
    assert report["created"] == 3  # cy imports; only the tier it cannot use is skipped
    assert [(e["line"], e["column"], e["value"]) for e in report["errors"]] == [
        (3, "email", "not-an-address")
    ]
    assert [(w["line"], w["column"], w["value"]) for w in report["warnings"]] == [
        (4, "tier", "gold")
    ]
    # The report quotes the cell for the operator who holds the file; the log never does.
    assert "not-an-address" not in imported.stderr
    shown = tidings("subscribers", "import", str(source), "--newsletter", "weekly")
    assert "'not-an-address'" in shown.stdout
    assert "'gold'" in shown.stdout
    again = tidings("subscribers", "import", str(source), "--newsletter", "weekly", "--json")
    assert json.loads(again.stdout)["created"] == 0  # idempotent
    out = tmp_path / "export.csv"
    exported = tidings("subscribers", "export", "--newsletter", "weekly", "--out", str(out))
    assert exported.returncode == 0, exported.stderr
    lines = out.read_text().splitlines()
    assert lines[0].startswith("email,")
    assert any(
        line.startswith("ann@example.org,Ann,paid") and "confirmed" in line for line in lines
    )
    assert any(line.startswith("dee@example.org") and "unsubscribed" in line for line in lines)


async def test_admin_api_import_and_export(database_url: str) -> None:
    """The admin API imports and exports the same CSV as the CLI."""
    async with api_client(make_settings(database_url)) as (client, container):
        headers = await admin_headers(container)
        await create_newsletter(client, headers)
        imported = await client.post(
            "/api/admin/subscribers/import",
            params={"newsletter": "weekly"},
            content=CSV.encode(),
            headers={**headers, "content-type": "text/csv"},
        )
        assert imported.status_code == 200, imported.text
        assert imported.json()["created"] == 3
        assert [e["line"] for e in imported.json()["errors"]] == [3]
        assert [(w["line"], w["column"]) for w in imported.json()["warnings"]] == [(4, "tier")]
        exported = await client.get(
            "/api/admin/subscribers/export",
            params={"newsletter": "weekly", "state": "confirmed"},
            headers=headers,
        )
        assert exported.headers["content-type"].startswith("text/csv")
        rows = exported.text.splitlines()
        assert len(rows) == 2
        assert rows[1].startswith("ann@example.org")
        before = await snapshot(container)
        for body, params in (
            (b"\xff\xfe bad", {"newsletter": "weekly"}),
            (b"contact,name\nx@y.z,X\n", {"newsletter": "weekly"}),
            (b"contact,name\nx@y.z,X\n", {"newsletter": "weekly", "map": "contact=phone"}),
            (b"contact,name\nx@y.z,X\n", {"newsletter": "weekly", "map": "fax=email"}),
            (CSV.encode(), {"newsletter": "nope"}),
        ):
            bad = await client.post(
                "/api/admin/subscribers/import",
                params=params,
                content=body,
                headers={**headers, "content-type": "text/csv"},
            )
            assert 400 <= bad.status_code < 500, bad.text
            assert bad.headers["content-type"] == "application/problem+json"
        assert await snapshot(container) == before
        mapped = await client.post(
            "/api/admin/subscribers/import",
            params={"newsletter": "weekly", "map": ["contact=email", "who=name"]},
            content=b"contact;who;phone\nzed@example.org;Zed;555\n",
            headers={**headers, "content-type": "text/csv"},
        )
        assert mapped.status_code == 200, mapped.text
        report = mapped.json()
        assert (report["created"], report["failed_rows"]) == (1, 0)
        assert (report["awaiting_confirmation"], report["ignored_columns"]) == (1, [])
        assert report["attribute_columns"] == ["phone"]


async def test_import_publishes_consent_events_in_the_same_transaction(database_url: str) -> None:
    """Must-be-true 7: every consent change, an import's included, reports its webhook event."""
    async with api_client(make_settings(database_url)) as (client, container):
        headers = await admin_headers(container)
        await create_newsletter(client, headers)
        hook = (
            await client.post(
                "/api/admin/webhooks",
                headers=headers,
                json={"url": "https://hooks.example.org/x", "event_types": ["*"]},
            )
        ).json()
        await client.post(
            "/api/admin/subscribers",
            headers=headers,
            json={
                "email": "old@example.org",
                "subscriptions": [{"newsletter": "weekly", "confirmed": True}],
            },
        )
        body = b"email,status\nnew@example.org,confirmed\nold@example.org,unsubscribed\n"
        imported = await client.post(
            "/api/admin/subscribers/import",
            params={"newsletter": "weekly"},
            content=body,
            headers={**headers, "content-type": "text/csv"},
        )
        assert imported.json()["failed_rows"] == 0
        deliveries = (
            await client.get(f"/api/admin/webhooks/{hook['id']}/deliveries", headers=headers)
        ).json()["items"]
        events = sorted(d["event_type"] for d in deliveries)
        assert events == sorted(
            [
                "subscriber.created",
                "subscriber.confirmed",  # old@, by the admin
                "subscriber.created",  # new@, by the import, carrying its confirmed state
                "subscriber.unsubscribed",  # old@, by the import
            ]
        )


def test_cli_imports_an_export_and_asks_the_waiting_readers_to_confirm(
    tmp_path: Path, database_url: str
) -> None:
    """After moving a list, the operator must learn how many readers can be mailed now and how
    many must confirm first, and be able to ask those in one step."""
    tidings = tidings_cli(database_url)
    assert tidings("migrate").returncode == 0
    created = tidings(
        *("newsletters", "create", "weekly", "--name", "Weekly"),
        *("--sender-name", "E", "--sender-address", "e@example.org"),
    )
    assert created.returncode == 0, created.stderr
    source = tmp_path / "members.csv"
    source.write_text(
        "Email Address;First Name;Last Name;Member Since;status\n"
        "ann@example.org;Ann;Lee;2020;confirmed\n"
        "bob@example.org;Bob;;2021;\n"
        "cy@example.org;Cy;;2022;\n"
    )
    bad_map = tidings("subscribers", "import", str(source), "--newsletter", "weekly", "--map", "x")
    assert bad_map.returncode == 2
    assert "--map" in bad_map.stderr
    imported = tidings(
        *("subscribers", "import", str(source), "--newsletter", "weekly"),
        *("--send-confirmations", "--rate", "1000"),
    )
    assert imported.returncode == 0, imported.stderr
    summary = " ".join(imported.stdout.split())
    assert "1 row(s) mailable now; 2 wait for the person to confirm" in summary
    assert "Custom fields from column(s): Member Since" in summary
    assert "Queued 2 confirmation email(s)" in summary
    again = tidings("subscribers", "confirm-pending", "--newsletter", "weekly", "--json")
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout) == {"confirmations_queued": 2}
    listed = tidings("jobs", "list", "--kind", "send_subscriber_email", "--json")
    assert [job["status"] for job in json.loads(listed.stdout)] == ["pending"] * 4
    unknown = tidings("subscribers", "confirm-pending", "--newsletter", "nope")
    assert unknown.returncode == 1
    assert "no newsletter" in unknown.stderr
