"""The public subscribe form as a person uses it (issue 13 item 9): what they typed survives an
error, several newsletters are checkboxes, a link can preselect one, every answer is a page,
and a newsletter's welcome email follows the confirmation."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.e2e.audience_helpers import (
    captured_text,
    confirmation_tokens,
    create_newsletter,
    deliver_queued_mail,
    snapshot,
)
from tests.factories import admin_headers, api_client, make_settings
from tests.support.cli import tidings_cli
from tidings.bootstrap import Container

WELCOME = {"welcome_subject": "Welcome aboard", "welcome_body": "Hello!\n\nFridays, 8am."}


@pytest.fixture
async def site(
    database_url: str,
) -> AsyncIterator[tuple[httpx.AsyncClient, Container, dict[str, str]]]:
    settings = make_settings(
        database_url, audience={"subscribe_limit_per_address": 50, "subscribe_limit_per_ip": 500}
    )
    async with api_client(settings) as (client, container):
        headers = await admin_headers(container)
        await create_newsletter(client, headers, "weekly", **WELCOME)
        await create_newsletter(client, headers, "offers", description="Now and then")
        yield client, container, headers


async def _subscriptions(
    client: httpx.AsyncClient, headers: dict[str, str], email: str
) -> list[str]:
    page = await client.get("/api/admin/subscribers", params={"q": email}, headers=headers)
    items = page.json()["items"]
    if not items:
        return []
    found = await client.get(f"/api/admin/subscribers/{items[0]['id']}", headers=headers)
    return sorted(s["newsletter"] for s in found.json()["subscriptions"])


async def _emails(container: Container) -> list[tuple[str, str]]:
    """(to, subject) of every email sent once the queued audience jobs have run."""
    await deliver_queued_mail(container)
    sent = await container.captured_mail.list(limit=1000)
    return sorted((message.recipients[0], message.subject) for message in sent)


async def _welcomes(container: Container) -> list[str]:
    """The plain text of every welcome email sent so far."""
    await deliver_queued_mail(container)
    sent = await container.captured_mail.list(limit=1000)
    return [captured_text(m.raw) for m in sent if m.subject == WELCOME["welcome_subject"]]


async def test_several_newsletters_are_checkboxes_and_one_post_subscribes_to_each(
    site: Any,
) -> None:
    """A site with two lists must let a reader join both at once, and join neither by
    accident."""
    client, container, headers = site
    form = await client.get("/subscribe")
    assert form.text.count('type="checkbox" name="newsletter"') == 2
    assert " checked" not in form.text
    posted = await client.post(
        "/subscribe",
        data={"email": "ann@example.org", "newsletter": ["weekly", "offers"]},
    )
    assert posted.status_code == 303
    await deliver_queued_mail(container)  # the subscribe requests, carried out by the worker
    assert await _subscriptions(client, headers, "ann@example.org") == ["offers", "weekly"]
    assert len(await confirmation_tokens(container)) == 2


@pytest.mark.parametrize("path", ["/subscribe/offers", "/subscribe?newsletter=offers"])
async def test_a_link_can_preselect_one_newsletter(site: Any, path: str) -> None:
    """A signup link under one newsletter's articles should arrive with that newsletter ticked."""
    client, *_ = site
    page = await client.get(path)
    assert page.status_code == 200
    assert 'value="offers" checked' in page.text
    assert 'value="weekly" checked' not in page.text


async def test_a_validation_error_keeps_what_the_reader_typed(site: Any) -> None:
    """Retyping a whole form because of one typo loses sign-ups."""
    client, container, _ = site
    before = await snapshot(container)
    page = await client.post(
        "/subscribe",
        data={"email": "ann@@example.org", "name": "Ann <Lee>", "newsletter": "offers"},
    )
    assert page.status_code == 422
    assert page.headers["content-type"].startswith("text/html")
    assert 'value="ann@@example.org"' in page.text
    assert 'value="Ann &lt;Lee&gt;"' in page.text
    assert 'value="offers" checked' in page.text
    assert 'role="alert"' in page.text
    assert await snapshot(container) == before


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ({}, "Enter your email address"),
        ({"email": "ann@example.org"}, "Choose at least one newsletter"),
        ({"email": "ann@example.org", "newsletter": "gone"}, "no longer exists"),
        ({"email": "x" * 5000 + "@example.org", "newsletter": "weekly"}, "email must be at most"),
        ({"email": "ann@example.org", "name": "A\r\nB", "newsletter": "weekly"}, "line breaks"),
        (
            {"email": "ann@example.org", "name": "x" * 500, "newsletter": "weekly"},
            "name must be at most",
        ),
    ],
)
async def test_form_posts_are_answered_with_pages_never_json(
    site: Any, body: dict[str, Any], expected: str
) -> None:
    """A person posting a form must see a page that says what to fix, never a JSON error."""
    client, container, _ = site
    before = await snapshot(container)
    page = await client.post("/subscribe", data=body)
    assert page.status_code == 422
    assert page.headers["content-type"].startswith("text/html")
    assert expected in page.text
    assert await snapshot(container) == before


async def test_unknown_newsletter_links_and_json_bodies_get_pages(site: Any) -> None:
    """A stale link or a mistaken client still meets the form, not a framework error."""
    client, container, _ = site
    before = await snapshot(container)
    for path in ("/subscribe/nope", "/subscribe?newsletter=" + "x" * 300):
        missing = await client.get(path)
        assert missing.status_code == 404
        assert missing.headers["content-type"].startswith("text/html")
        assert "no newsletter at that address" in missing.text
    as_json = await client.post("/subscribe", json={"email": "ann@example.org"})
    assert as_json.status_code == 422
    assert as_json.headers["content-type"].startswith("text/html")
    assert await snapshot(container) == before


async def test_the_welcome_email_follows_the_confirmation_once(site: Any) -> None:
    """A newsletter's welcome is the first thing a new reader gets from it: it must come
    after they confirm — not before, not twice — and never to readers an admin imported."""
    client, container, headers = site
    await client.post("/subscribe", data={"email": "ann@example.org", "newsletter": "weekly"})
    assert [s for _, s in await _emails(container)] == ["Confirm your subscription to The Weekly"]
    (token,) = await confirmation_tokens(container)
    assert (await client.post(f"/confirm/{token}")).status_code == 200
    assert (await client.post(f"/confirm/{token}")).status_code == 200  # idempotent
    # Queued as ids only: the address and the text are read when it is sent (issue 12).
    (queued,) = [
        job.payload
        for job in await container.queue.list_jobs(kind="send_subscriber_email", limit=100)
        if job.payload["purpose"] == "welcome"
    ]
    assert set(queued) == {"purpose", "subscriber_id", "newsletter_id"}
    (welcome,) = await _welcomes(container)
    assert "Fridays, 8am." in welcome
    assert "/preferences/" in welcome
    imported = await client.post(
        "/api/admin/subscribers/import",
        params={"newsletter": "weekly"},
        content=b"email,status\nbob@example.org,confirmed\n",
        headers={**headers, "content-type": "text/csv"},
    )
    assert imported.json()["mailable"] == 1
    assert [to for to, s in await _emails(container) if s == "Welcome aboard"] == [
        "ann@example.org"
    ]


async def test_no_welcome_once_the_reader_has_left_or_the_welcome_is_gone(site: Any) -> None:
    """The welcome is written when it is sent: a reader who left meanwhile must not get it,
    nor anyone once the operator has removed it."""
    client, container, headers = site
    for email in ("ann@example.org", "bob@example.org"):
        await client.post("/subscribe", data={"email": email, "newsletter": "weekly"})
    for token in await confirmation_tokens(container):
        assert (await client.post(f"/confirm/{token}")).status_code == 200
    page = await client.get("/api/admin/subscribers", params={"q": "ann@"}, headers=headers)
    ann = page.json()["items"][0]["id"]
    left = await client.delete(
        f"/api/admin/subscribers/{ann}/subscriptions/weekly", headers=headers
    )
    assert left.status_code < 300, left.text
    assert [to for to, s in await _emails(container) if s == "Welcome aboard"] == [
        "bob@example.org"
    ]
    await client.post("/subscribe", data={"email": "cy@example.org", "newsletter": "weekly"})
    (token,) = (await confirmation_tokens(container))[-1:]
    assert (await client.post(f"/confirm/{token}")).status_code == 200
    off = await client.patch(
        "/api/admin/newsletters/weekly", json={"welcome_subject": None}, headers=headers
    )
    assert off.json()["welcome_body"] is None
    assert [to for to, s in await _emails(container) if s == "Welcome aboard"] == [
        "bob@example.org"
    ]


async def test_the_welcome_email_is_set_and_cleared_through_the_api(site: Any) -> None:
    """An operator must be able to change or stop the welcome without recreating the list,
    and a half-written welcome (a subject without a body) is refused."""
    client, _, headers = site
    url = "/api/admin/newsletters/offers"
    half = await client.patch(url, json={"welcome_subject": "Hi"}, headers=headers)
    assert half.status_code == 422
    assert half.headers["content-type"] == "application/problem+json"
    both = await client.patch(url, json={**WELCOME, "welcome_subject": "Hi"}, headers=headers)
    assert (both.json()["welcome_subject"], both.json()["welcome_body"]) == (
        "Hi",
        WELCOME["welcome_body"],
    )
    subject_only = await client.patch(url, json={"welcome_subject": "Hello"}, headers=headers)
    assert subject_only.json()["welcome_body"] == WELCOME["welcome_body"]
    cleared = await client.patch(url, json={"welcome_subject": ""}, headers=headers)
    assert (cleared.json()["welcome_subject"], cleared.json()["welcome_body"]) == (None, None)
    bad = await client.patch(url, json={"welcome_subject": "A\r\nBcc: x@y.z"}, headers=headers)
    assert bad.status_code == 422


def test_the_welcome_email_is_set_from_the_cli(tmp_path: Path, database_url: str) -> None:
    """Operators who run the site from a terminal set the welcome there too."""
    tidings = tidings_cli(database_url)
    body = tmp_path / "welcome.txt"
    body.write_text("Thanks for joining.\n\nSee you Friday.\n")
    assert tidings("migrate").returncode == 0
    created = tidings(
        *("newsletters", "create", "weekly", "--name", "Weekly", "--sender-name", "E"),
        *("--sender-address", "e@example.org", "--welcome-subject", "Hi"),
        *("--welcome-file", str(body)),
    )
    assert created.returncode == 0, created.stderr
    changed = tidings("newsletters", "welcome", "weekly", "--subject", "Hello there")
    assert "welcome email: Hello there" in changed.stdout
    off = tidings("newsletters", "welcome", "weekly", "--off")
    assert "no welcome email" in off.stdout
    neither = tidings("newsletters", "welcome", "weekly")
    assert neither.returncode == 2
    half = tidings("newsletters", "welcome", "weekly", "--subject", "Only a subject")
    assert half.returncode == 1
    assert "welcome_body" in half.stderr


async def test_a_single_opt_in_newsletter_welcomes_at_once(site: Any) -> None:
    """Without a confirmation step the subscribe itself is the confirmation, so the welcome
    must follow it directly, and only once however often the person subscribes."""
    client, container, headers = site
    await create_newsletter(client, headers, "daily", double_opt_in=False, **WELCOME)
    for _ in range(2):
        await client.post("/api/subscribe", json={"email": "cy@example.org", "newsletter": "daily"})
    assert await _emails(container) == [("cy@example.org", "Welcome aboard")]
