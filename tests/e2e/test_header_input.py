"""Header-bound input is refused at the door by one rule (issue 12, item 3; CMP-4, PRI-8).

Subjects, display names and addresses end up in email headers. A vertical tab, form feed,
file separator, NEL or U+2028 is a line end to the email package; an RFC 2047 encoded-word
decodes into one; `a,b@example.com` is two addresses. Every API field and CLI option that
feeds a header answers 422 (or exit 2) naming the field, and stores nothing.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from tests.e2e.audience_helpers import create_newsletter
from tests.factories import admin_headers, api_client, make_settings
from tests.support.cli import clean_env, tidings
from tests.support.tables import every_row
from tidings.bootstrap import Container

BAD_TEXT = [
    "a\x0bb",
    "a\x0cb",
    "a\x1cb",
    "a\x85b",
    "a\u2028b",
    "a\u2029b",
    "a\tb",
    "a\x7fb",
    "Ann =?UTF-8?Q?=0A?=Bcc: all@example.org",
    "=?utf-8?b?QW5uDQpCY2M6IGFsbEBleGFtcGxlLm9yZw==?=",
]
BAD_ADDRESSES = [
    "a,b@example.com",
    'x"<y>@example.com',
    "k@\x02example.com",
    "Ann <ann@example.org>",
    "ann@example.org\u2028",
    "ann@example.org\x85",
    "=?utf-8?q?a?=@example.org",
]


@pytest.fixture
async def admin(
    database_url: str,
) -> AsyncIterator[tuple[httpx.AsyncClient, Container, dict[str, str], dict[str, Any]]]:
    async with api_client(make_settings(database_url)) as (client, container):
        headers = await admin_headers(container)
        await create_newsletter(client, headers, reply_to="desk@example.org")
        campaign = await client.post(
            "/api/admin/campaigns",
            headers=headers,
            json={"newsletter": "weekly", "subject": "S", "body": "B"},
        )
        subscriber = await client.post(
            "/api/admin/subscribers", headers=headers, json={"email": "ann@example.org"}
        )
        ids = {"campaign": campaign.json()["id"], "subscriber": subscriber.json()["id"]}
        yield client, container, headers, ids


def _requests(ids: dict[str, Any]) -> list[tuple[str, str, dict[str, Any], str, list[str]]]:
    """(method, path, valid body, field, bad values) for every header-bound API field."""
    newsletter = {"slug": "other", "name": "N", "sender_name": "S", "sender_address": "s@x.org"}
    campaign = {"newsletter": "weekly", "subject": "S", "body": "B"}
    email = {"to": "ann@example.org", "subject": "Hi", "text": "t"}
    c, s = ids["campaign"], ids["subscriber"]
    cases = [
        ("POST", "/api/admin/emails", email, "subject", BAD_TEXT),
        ("POST", "/api/admin/emails", email, "to", BAD_ADDRESSES),
        ("POST", "/api/admin/newsletters", newsletter, "name", BAD_TEXT),
        ("POST", "/api/admin/newsletters", newsletter, "sender_name", BAD_TEXT),
        ("POST", "/api/admin/newsletters", newsletter, "sender_address", BAD_ADDRESSES),
        ("POST", "/api/admin/newsletters", newsletter, "reply_to", BAD_ADDRESSES),
        ("PATCH", "/api/admin/newsletters/weekly", {}, "name", BAD_TEXT),
        ("PATCH", "/api/admin/newsletters/weekly", {}, "sender_name", BAD_TEXT),
        ("PATCH", "/api/admin/newsletters/weekly", {}, "sender_address", BAD_ADDRESSES),
        ("PATCH", "/api/admin/newsletters/weekly", {}, "reply_to", BAD_ADDRESSES),
        ("POST", "/api/admin/campaigns", campaign, "subject", BAD_TEXT),
        ("POST", "/api/admin/campaigns", campaign, "sender_name", BAD_TEXT),
        ("POST", "/api/admin/campaigns", campaign, "reply_to", BAD_ADDRESSES),
        ("PATCH", f"/api/admin/campaigns/{c}", {}, "subject", BAD_TEXT),
        ("PATCH", f"/api/admin/campaigns/{c}", {}, "sender_name", BAD_TEXT),
        ("PATCH", f"/api/admin/campaigns/{c}", {}, "reply_to", BAD_ADDRESSES),
        ("POST", "/api/admin/subscribers", {"email": "new@example.org"}, "name", BAD_TEXT),
        ("POST", "/api/admin/subscribers", {}, "email", BAD_ADDRESSES),
        ("PATCH", f"/api/admin/subscribers/{s}", {}, "name", BAD_TEXT),
        (
            "POST",
            "/api/subscribe",
            {"email": "new@example.org", "newsletter": "weekly"},
            "name",
            BAD_TEXT,
        ),
        ("POST", "/api/subscribe", {"newsletter": "weekly"}, "email", BAD_ADDRESSES),
    ]
    test_send = [
        (f"/api/admin/campaigns/{c}/test-send", {"to": ["ok@example.org", bad]})
        for bad in BAD_ADDRESSES
    ]
    return cases + [("POST", path, body, "to", ["list"]) for path, body in test_send]


async def test_every_header_bound_api_field_refuses_breaks_encoded_words_and_address_lists(
    admin: Any,
) -> None:
    """A value that would end a header line or add a recipient must never be stored or queued:
    the worker would crash on it on every attempt, or write a forged header."""
    client, container, headers, ids = admin
    before = await every_row(container.db)
    for method, path, valid, field, bad_values in _requests(ids):
        for bad in bad_values:
            body = valid if bad == "list" else {**valid, field: bad}
            response = await client.request(method, path, headers=headers, json=body)
            assert response.status_code == 422, (path, field, bad, response.text)
            assert response.headers["content-type"] == "application/problem+json"
            named = [error["field"] for error in response.json()["errors"]]
            assert any(name.split(".")[1] == field for name in named), (path, field, named)
            assert bad not in response.text  # submitted values are never echoed back
    assert await every_row(container.db) == before


async def test_ordinary_header_text_is_still_accepted(admin: Any) -> None:
    """The rule must not refuse real subjects and names: accents, emoji, quotes, `2+2=?`."""
    client, _, headers, ids = admin
    for subject in ("Grüße — 50% off!", "👩‍💻 New post", "Is 2+2=? Read on", 'The "Ledger"'):
        response = await client.patch(
            f"/api/admin/campaigns/{ids['campaign']}", headers=headers, json={"subject": subject}
        )
        assert response.status_code == 200, response.text
        assert response.json()["subject"] == subject
    queued = await client.post(
        "/api/admin/emails",
        headers=headers,
        json={"to": "o'brien+news@example.org", "subject": "Zoë's notes", "text": "t"},
    )
    assert queued.status_code == 202, queued.text


async def test_a_csv_import_refuses_encoded_word_names_and_address_lists_per_row(
    admin: Any,
) -> None:
    """Imported names and addresses reach To headers too: a bad address fails its row, a bad
    name is skipped (the person imports without it), each reported by line and column."""
    client, _, headers, _ = admin
    csv = (
        "email,name\n"
        "good@example.org,Good\n"
        '"a,b@example.com",Two\n'
        'evil@example.org,"=?UTF-8?Q?=0A?=Bcc: all@example.org"\n'
        "nel@example.org,Ann\x85Bcc\n"
    )
    response = await client.post(
        "/api/admin/subscribers/import",
        params={"newsletter": "weekly"},
        headers={**headers, "content-type": "text/csv"},
        content=csv.encode(),
    )
    assert response.status_code == 200, response.text
    report = response.json()
    assert report["created"] == 3
    assert [(e["line"], e["column"]) for e in report["errors"]] == [(3, "email")]
    assert [(w["line"], w["column"]) for w in report["warnings"]] == [(4, "name"), (5, "name")]
    found = (
        await client.get("/api/admin/subscribers", headers=headers, params={"q": "example"})
    ).json()
    assert sorted((s["email"], s["name"]) for s in found["items"]) == [
        ("ann@example.org", None),
        ("evil@example.org", None),
        ("good@example.org", "Good"),
        ("nel@example.org", None),
    ]


async def test_wrong_content_types_get_415_and_change_nothing(admin: Any) -> None:
    """docs/api.md promises 415 for a body in a format the route does not read: a form post or
    a body without a type to a JSON route, JSON to the CSV import."""
    client, container, headers, _ = admin
    before = await every_row(container.db)
    body = b'{"slug": "x", "name": "N", "sender_name": "S", "sender_address": "s@x.org"}'
    for content_type in ("application/x-www-form-urlencoded", "text/plain", None):
        sent = {**headers, **({"content-type": content_type} if content_type else {})}
        response = await client.post("/api/admin/newsletters", headers=sent, content=body)
        assert response.status_code == 415, (content_type, response.text)
        assert response.json()["code"] == "unsupported_media_type"
        assert "application/json" in response.json()["detail"]
    public = await client.post(
        "/api/subscribe",
        headers={"content-type": "text/plain"},
        content=b'{"email": "x@example.org", "newsletter": "weekly"}',
    )
    assert public.status_code == 415
    csv_as_json = await client.post(
        "/api/admin/subscribers/import",
        params={"newsletter": "weekly"},
        headers={**headers, "content-type": "application/json"},
        content=b"email\nz@example.org\n",
    )
    assert csv_as_json.status_code == 415
    assert await every_row(container.db) == before
    merge_patch = await client.patch(
        "/api/admin/newsletters/weekly",
        headers={**headers, "content-type": "application/merge-patch+json"},
        content=b'{"name": "Renamed"}',
    )
    assert merge_patch.status_code == 200


def _newsletter_create(**options: str) -> list[str]:
    values = {"--name": "N", "--sender-name": "S", "--sender-address": "s@example.org"}
    values.update({f"--{key.replace('_', '-')}": value for key, value in options.items()})
    return ["newsletters", "create", "n", *(part for item in values.items() for part in item)]


def test_cli_options_apply_the_same_header_rule(tmp_path: Any) -> None:
    """The command line is an entry point too: a bad subject or address is a usage error (exit 2)
    naming the option, before any database is opened."""
    body = tmp_path / "body.md"
    body.write_text("Hello")
    cases = [
        (_newsletter_create(name="a\x0bb"), "--name"),
        (_newsletter_create(sender_name="=?utf-8?q?x?="), "--sender-name"),
        (_newsletter_create(sender_address="a,b@example.com"), "--sender-address"),
        (_newsletter_create(reply_to='x"<y>@example.com'), "--reply-to"),
        (["campaign", "create", "-n", "weekly", "-s", "a\u2028b", "-f", str(body)], "--subject"),
        (["campaign", "edit", "1", "--subject", "a\x1cb"], "--subject"),
        (["campaign", "test-send", "1", "--to", "ok@x.org", "--to", "k@\x02x.org"], "--to"),
    ]
    database = tmp_path / "never-created.db"
    for args, option in cases:
        result = tidings(*args, env=clean_env(DATABASE_URL=f"sqlite:///{database}"))
        assert result.returncode == 2, (args, result.output)
        assert option in result.output, result.output
    assert not database.exists()
