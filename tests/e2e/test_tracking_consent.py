"""Consent to per-person open and click tracking (ENG-1) where a person gives or withdraws it:
the signup form's unticked box, the preferences page, the public and admin APIs."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from tests.e2e.audience_helpers import confirmation_tokens, create_newsletter, deliver_queued_mail
from tests.factories import admin_headers, api_client, make_settings
from tidings.bootstrap import Container
from tidings.domain.tracking_consent import CONSENT_TEXT
from tidings.storage import subscribers as subscriber_queries

BOX = 'name="tracking"'


@pytest.fixture
async def site(
    database_url: str,
) -> AsyncIterator[tuple[httpx.AsyncClient, Container, dict[str, str]]]:
    settings = make_settings(
        database_url, audience={"subscribe_limit_per_address": 50, "subscribe_limit_per_ip": 500}
    )
    async with api_client(settings) as (client, container):
        headers = await admin_headers(container)
        await create_newsletter(client, headers, "weekly", tracking="per_person")
        await create_newsletter(client, headers, "quiet")
        yield client, container, headers


async def _consent(container: Container, email: str) -> tuple[Any, str | None]:
    """The subscriber's (tracking_consent_at, tracking_consent_source)."""
    async with container.db.read() as conn:
        row = await subscriber_queries.get_by_key(conn, email)
    assert row is not None
    return row.tracking_consent_at, row.tracking_consent_source


async def _preferences_path(container: Container, email: str) -> str:
    async with container.db.read() as conn:
        row = await subscriber_queries.get_by_key(conn, email)
    assert row is not None
    return f"/preferences/{container.audience.preferences_token(row.id, row.created_at)}"


async def _signup(client: httpx.AsyncClient, container: Container, **form: Any) -> None:
    posted = await client.post("/subscribe", data=form)
    assert posted.status_code == 303, posted.text
    await deliver_queued_mail(container)


async def test_signup_form_shows_an_unticked_box_only_when_a_newsletter_tracks_per_person(
    site: Any,
) -> None:
    """Consent is only valid if the person ticks it themselves, and asking it where nothing
    is tracked per person would ask for something meaningless."""
    client, _, headers = site
    form = await client.get("/subscribe")
    assert CONSENT_TEXT in form.text
    box = form.text[form.text.index(BOX) - 80 : form.text.index(BOX) + 80]
    assert "checked" not in box
    embed = await client.get("/subscribe/weekly/embed")
    assert BOX in embed.text
    assert BOX not in (await client.get("/subscribe/quiet/embed")).text
    patched = await client.patch(
        "/api/admin/newsletters/weekly", json={"tracking": "aggregate"}, headers=headers
    )
    assert patched.status_code == 200
    assert BOX not in (await client.get("/subscribe")).text


async def test_ticked_box_becomes_consent_only_when_the_person_confirms(site: Any) -> None:
    """Anyone can type someone's address into a form: consent must come from the mailbox
    owner's own act, the confirmation, and say when and how it was given."""
    client, container, _ = site
    await _signup(client, container, email="ann@example.org", newsletter="weekly", tracking="yes")
    assert await _consent(container, "ann@example.org") == (None, None)
    (token,) = await confirmation_tokens(container)
    confirmed = await client.post(f"/confirm/{token}")
    assert confirmed.status_code == 200
    at, source = await _consent(container, "ann@example.org")
    assert at is not None
    assert source == "signup"


async def test_embedded_form_box_counts_like_the_signup_form(site: Any) -> None:
    """The iframe on another site is the same signup: its box must lead to the same record."""
    client, container, _ = site
    posted = await client.post(
        "/subscribe/weekly/embed", data={"email": "em@example.org", "tracking": "yes"}
    )
    assert posted.status_code == 200
    await deliver_queued_mail(container)
    (token,) = await confirmation_tokens(container)
    await client.post(f"/confirm/{token}")
    assert (await _consent(container, "em@example.org"))[1] == "signup"


async def test_a_later_signup_without_the_box_takes_back_an_unconfirmed_tick(
    site: Any,
) -> None:
    """The confirmation link agrees to what the latest request asked, so a box ticked once
    and left unticked the next time is not recorded."""
    client, container, _ = site
    await _signup(client, container, email="hu@example.org", newsletter="weekly", tracking="yes")
    await _signup(client, container, email="hu@example.org", newsletter="weekly")
    first, *_ = await confirmation_tokens(container)
    await client.post(f"/confirm/{first}")
    assert await _consent(container, "hu@example.org") == (None, None)


async def test_unticked_box_records_no_consent(site: Any) -> None:
    """No box ticked, no per-person tracking: the default must be no."""
    client, container, _ = site
    await _signup(client, container, email="bo@example.org", newsletter="weekly")
    (token,) = await confirmation_tokens(container)
    await client.post(f"/confirm/{token}")
    assert await _consent(container, "bo@example.org") == (None, None)


async def test_a_ticked_box_after_an_error_comes_back_ticked(site: Any) -> None:
    """A form returned with an error must not quietly drop the person's choice."""
    client, _, _ = site
    page = await client.post("/subscribe", data={"email": "", "tracking": "yes"})
    assert page.status_code == 422
    box = page.text[page.text.index(BOX) :][:80]
    assert "checked" in box


async def test_single_opt_in_records_consent_with_the_signup(site: Any) -> None:
    """Without a confirmation step the signup itself is the person's act: the consent must
    not wait for a link that never comes."""
    client, container, headers = site
    await create_newsletter(client, headers, "direct", tracking="per_person", double_opt_in=False)
    await _signup(client, container, email="cy@example.org", newsletter="direct", tracking="yes")
    at, source = await _consent(container, "cy@example.org")
    assert (at is not None, source) == (True, "signup")


async def test_public_api_signup_carries_the_box_to_the_confirmation(site: Any) -> None:
    """Signup forms on other sites post JSON: their box must count the same way."""
    client, container, _ = site
    posted = await client.post(
        "/api/subscribe",
        json={"email": "di@example.org", "newsletter": "weekly", "tracking_consent": True},
    )
    assert posted.status_code == 202
    (token,) = await confirmation_tokens(container)
    assert await _consent(container, "di@example.org") == (None, None)
    confirmed = await client.post("/api/confirm", json={"token": token})
    assert confirmed.status_code == 200
    assert (await _consent(container, "di@example.org"))[1] == "signup"


async def test_preferences_page_gives_and_withdraws_consent(site: Any) -> None:
    """Consent must be withdrawable where it is given, at any time (ENG-1, GDPR art. 7(3))."""
    client, container, _ = site
    await _signup(client, container, email="ed@example.org", newsletter="weekly")
    (token,) = await confirmation_tokens(container)
    await client.post(f"/confirm/{token}")
    path = await _preferences_path(container, "ed@example.org")
    page = await client.get(path)
    assert CONSENT_TEXT in page.text
    weekly = page.text.split('name="newsletter" value="')[1].split('"')[0]
    given = await client.post(
        path, data={"newsletter": weekly, "tracking": "yes", "tracking_shown": "yes"}
    )
    assert given.status_code == 200
    at, source = await _consent(container, "ed@example.org")
    assert (at is not None, source) == (True, "preferences")
    assert "checked" in given.text[given.text.index(BOX) :][:80]
    kept = await client.post(path, data={"newsletter": weekly})  # a form without the box
    assert kept.status_code == 200
    assert await _consent(container, "ed@example.org") == (at, "preferences")
    withdrawn = await client.post(path, data={"newsletter": weekly, "tracking_shown": "yes"})
    assert withdrawn.status_code == 200
    assert await _consent(container, "ed@example.org") == (None, None)


async def test_preferences_api_gives_and_withdraws_consent(site: Any) -> None:
    """Sites with their own preferences page use the JSON API: the same choice, the same
    record."""
    client, container, _ = site
    await _signup(client, container, email="fi@example.org", newsletter="weekly")
    token = (await _preferences_path(container, "fi@example.org")).rsplit("/", 1)[1]
    given = await client.put(
        f"/api/preferences/{token}", json={"newsletters": [], "tracking_consent": True}
    )
    assert given.status_code == 200
    assert (await _consent(container, "fi@example.org"))[1] == "preferences"
    await client.put(f"/api/preferences/{token}", json={"newsletters": []})
    assert (await _consent(container, "fi@example.org"))[1] == "preferences"
    await client.put(
        f"/api/preferences/{token}", json={"newsletters": [], "tracking_consent": False}
    )
    assert await _consent(container, "fi@example.org") == (None, None)


async def test_admin_api_asserts_and_withdraws_consent(site: Any) -> None:
    """An operator who collected consent elsewhere records it through the API, and it reads
    back with when and how."""
    client, container, headers = site
    created = await client.post(
        "/api/admin/subscribers",
        json={"email": "gu@example.org", "tracking_consent": True},
        headers=headers,
    )
    assert created.status_code == 201, created.text
    body = created.json()
    assert (body["tracking_consent"], body["tracking_consent_source"]) == (True, "api")
    assert body["tracking_consent_at"] is not None
    subscriber_id = body["id"]
    renamed = await client.patch(
        f"/api/admin/subscribers/{subscriber_id}", json={"name": "Gu"}, headers=headers
    )
    assert renamed.json()["tracking_consent"] is True  # an edit without the field keeps it
    withdrawn = await client.patch(
        f"/api/admin/subscribers/{subscriber_id}",
        json={"tracking_consent": False},
        headers=headers,
    )
    assert withdrawn.status_code == 200
    assert withdrawn.json()["tracking_consent"] is False
    assert withdrawn.json()["tracking_consent_source"] is None
    refused = await client.patch(
        f"/api/admin/subscribers/{subscriber_id}",
        json={"tracking_consent": "maybe"},
        headers=headers,
    )
    assert refused.status_code == 422
    assert refused.headers["content-type"] == "application/problem+json"
    assert "tracking_consent" in refused.text
    audited = await container.audit.list(action="subscriber.update")
    assert len(audited) == 2  # the rename and the withdrawal, each with its actor
