"""Subscribe, confirm, unsubscribe and preferences as a reader meets them (AUD-5..8, API-1)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import datetime, timedelta
from typing import Any

import httpx
import pytest
from sqlalchemy import select

from tests.e2e.audience_helpers import (
    confirmation_tokens,
    create_newsletter,
    deliver_queued_mail,
    snapshot,
)
from tests.factories import admin_headers, api_client, make_settings
from tests.support.clock import Clock
from tidings.bootstrap import Container
from tidings.domain import tokens
from tidings.storage.tables import job_attempts, jobs


@pytest.fixture
async def site(
    database_url: str,
) -> AsyncIterator[tuple[httpx.AsyncClient, Container, dict[str, str]]]:
    settings = make_settings(
        database_url, audience={"subscribe_limit_per_address": 50, "subscribe_limit_per_ip": 500}
    )
    async with api_client(settings) as (client, container):
        headers = await admin_headers(container)
        await create_newsletter(client, headers)
        yield client, container, headers


async def _subscribe(
    client: httpx.AsyncClient, container: Container, email: str, **extra: Any
) -> httpx.Response:
    """POST /api/subscribe, then let the worker carry out what it queued."""
    response = await client.post(
        "/api/subscribe", json={"email": email, "newsletter": "weekly", **extra}
    )
    await deliver_queued_mail(container)
    return response


async def _subscriber(
    client: httpx.AsyncClient, headers: dict[str, str], email: str
) -> dict[str, Any]:
    page = await client.get("/api/admin/subscribers", params={"q": email}, headers=headers)
    (found,) = page.json()["items"]
    return dict(found)


async def test_subscribe_answers_the_same_for_every_address_state(site: Any) -> None:
    """No enumeration: a stranger must not learn whether an address is on the list."""
    client, container, headers = site
    new = await _subscribe(client, container, "new@example.org")
    await _subscribe(client, container, "pending@example.org")
    pending = await _subscribe(client, container, "pending@example.org")
    await _subscribe(client, container, "confirmed@example.org")
    token = (await confirmation_tokens(container))[-1]
    assert (await client.post(f"/confirm/{token}")).status_code == 200
    confirmed = await _subscribe(client, container, "confirmed@example.org")
    subscriber = await _subscriber(client, headers, "confirmed@example.org")
    await client.delete(
        f"/api/admin/subscribers/{subscriber['id']}/subscriptions/weekly", headers=headers
    )
    unsubscribed = await _subscribe(client, container, "confirmed@example.org")
    await client.post(
        "/api/admin/suppressions", headers=headers, json={"email": "suppressed@example.org"}
    )
    suppressed = await _subscribe(client, container, "suppressed@example.org")
    responses = (new, pending, confirmed, unsubscribed, suppressed)
    answers = {(r.status_code, r.content, r.headers["content-type"]) for r in responses}
    assert len(answers) == 1
    assert new.status_code == 202


async def test_confirm_get_changes_nothing_and_post_confirms_idempotently(site: Any) -> None:
    """Mail scanners open every link: only the POST behind the button may confirm."""
    client, container, headers = site
    await _subscribe(client, container, "Reader@Example.ORG", name="Rea")
    (token,) = await confirmation_tokens(container)
    page = await client.get(f"/confirm/{token}")
    assert page.status_code == 200
    assert f'action="/confirm/{token}"' in page.text
    assert (await _subscriber(client, headers, "reader@example.org"))["subscriptions"][0][
        "state"
    ] == "pending"
    for _ in range(2):
        confirmed = await client.post(f"/confirm/{token}")
        assert confirmed.status_code == 200
    subscriber = await _subscriber(client, headers, "reader@example.org")
    assert subscriber["email"] == "Reader@example.org"  # domain lower-cased, local part kept
    (subscription,) = subscriber["subscriptions"]
    assert subscription["state"] == "confirmed"
    assert subscription["consent_evidence"].startswith("link:")
    events = [job.payload for job in await container.queue.list_jobs(kind="deliver_webhook")]
    assert events == []  # no endpoints: nothing queued, and nothing failed


async def test_unsubscribed_address_is_revived_with_history_and_must_confirm_again(
    site: Any,
) -> None:
    """Subscribe is public: reviving must keep the history and ask for a fresh confirmation (AUD-5).
    Subscribe is public: reviving must keep the history and ask for a fresh confirmation (AUD-5)."""
    client, container, headers = site
    await _subscribe(client, container, "again@example.org")
    (token,) = await confirmation_tokens(container)
    await client.post(f"/confirm/{token}")
    subscriber = await _subscriber(client, headers, "again@example.org")
    removed = await client.delete(
        f"/api/admin/subscribers/{subscriber['id']}/subscriptions/weekly", headers=headers
    )
    assert removed.json()["subscriptions"][0]["state"] == "unsubscribed"
    await _subscribe(client, container, "again@example.org")
    revived = (await _subscriber(client, headers, "again@example.org"))["subscriptions"][0]
    assert revived["state"] == "pending"
    assert revived["confirmed_at"] is None
    assert revived["unsubscribe_count"] == 1
    assert revived["last_unsubscribed_at"] is not None
    queued = await confirmation_tokens(container)
    assert len(queued) == 2  # a fresh confirmation was queued for the revived subscription


async def test_asking_again_sends_a_new_link_and_the_old_link_still_confirms(
    site: Any,
) -> None:
    """Someone who never got the first email can ask again, and whichever email arrives
    first must work: asking again leaves earlier unexpired links valid (AUD-5)."""
    client, container, headers = site
    await _subscribe(client, container, "twice@example.org")
    await _subscribe(client, container, "twice@example.org")
    first, second = await confirmation_tokens(container)
    assert first != second
    confirmed = await client.post(f"/confirm/{first}")  # the OLD link
    assert confirmed.status_code == 200
    (subscription,) = (await _subscriber(client, headers, "twice@example.org"))["subscriptions"]
    assert subscription["state"] == "confirmed"
    assert (await client.post(f"/confirm/{second}")).status_code == 200  # idempotent


async def test_the_queue_never_holds_the_confirmation_token(site: Any) -> None:
    """The token is a bearer secret: only the sent mail may hold it, not the job table
    (HOUSE rule 19). Jobs carry ids and a purpose; the token is minted at send time."""
    client, container, _ = site
    await client.post(
        "/api/subscribe",
        json={"email": "queued@example.org", "name": "Quincy", "newsletter": "weekly"},
    )
    (token,) = await confirmation_tokens(container)
    (request,) = [job.payload for job in await container.queue.list_jobs(kind="request_consent")]
    assert set(request) == {
        "subscriber_id",
        "newsletter_id",
        "source",
        "new_subscriber",
        "tracking_consent",  # the form's box, a yes or no (ENG-1)
    }
    (mail,) = [job.payload for job in await container.queue.list_jobs(kind="send_subscriber_email")]
    assert mail == {
        "purpose": "confirmation",
        "subscriber_id": request["subscriber_id"],
        "newsletter_id": request["newsletter_id"],
    }
    async with container.db.read() as conn:
        rows = [
            tuple(row)
            for row in await conn.execute(select(jobs, job_attempts).outerjoin(job_attempts))
        ]
    assert len(rows) == 2
    for value in (token, tokens.hash_token(token), "queued@example.org", "Quincy"):
        assert value not in repr(rows)


async def test_a_confirmation_email_no_longer_wanted_is_not_sent(site: Any) -> None:
    """The email is made when it is sent: a person suppressed (or confirmed, or gone) while
    it waited in the queue gets no link, so no stale request reaches their inbox."""
    client, container, headers = site
    created = await client.post(
        "/api/admin/subscribers",
        headers=headers,
        json={
            "email": "waiting@example.org",
            "subscriptions": [{"newsletter": "weekly", "confirmed": False}],
        },
    )
    assert created.json()["subscriptions"][0]["state"] == "pending"
    await client.post(
        "/api/admin/suppressions", headers=headers, json={"email": "waiting@example.org"}
    )
    assert await confirmation_tokens(container) == []
    (job,) = await container.queue.list_jobs(kind="send_subscriber_email")
    assert job.status == "done"  # decided, not failed: nothing to retry


async def test_a_revived_subscription_needs_the_link_sent_after_the_revive(site: Any) -> None:
    """A link from before an unsubscribe belongs to an earlier request: after a revive only
    the fresh link may confirm, so an old email cannot undo the person's unsubscribe."""
    client, container, headers = site
    await _subscribe(client, container, "cycle@example.org")
    (old,) = await confirmation_tokens(container)
    person = await _subscriber(client, headers, "cycle@example.org")
    await client.delete(
        f"/api/admin/subscribers/{person['id']}/subscriptions/weekly", headers=headers
    )
    await _subscribe(client, container, "cycle@example.org")
    assert (await client.post(f"/confirm/{old}")).status_code == 404
    (subscription,) = (await _subscriber(client, headers, "cycle@example.org"))["subscriptions"]
    assert subscription["state"] == "pending"
    _, fresh = await confirmation_tokens(container)
    assert (await client.post(f"/confirm/{fresh}")).status_code == 200


async def test_one_click_unsubscribe_needs_no_cookie_and_records_history(site: Any) -> None:
    """RFC 8058: a mail client's POST alone unsubscribes, and the history records it."""
    client, container, headers = site
    await _subscribe(client, container, "leaver@example.org")
    (token,) = await confirmation_tokens(container)
    await client.post(f"/confirm/{token}")
    subscriber = await _subscriber(client, headers, "leaver@example.org")
    subscription_id, created_at = await _subscription_id(container, subscriber["id"])
    unsubscribe_token = tokens.sign(
        container.site_secret(), "unsubscribe", subscription_id, created_at
    )
    page = await client.get(f"/unsubscribe/{unsubscribe_token}")
    assert page.status_code == 200
    assert "List-Unsubscribe" in page.text
    assert (await _subscriber(client, headers, "leaver@example.org"))["subscriptions"][0][
        "state"
    ] == "confirmed"
    one_click = await client.post(
        f"/unsubscribe/{unsubscribe_token}", data={"List-Unsubscribe": "One-Click"}
    )
    assert one_click.status_code == 200
    (subscription,) = (await _subscriber(client, headers, "leaver@example.org"))["subscriptions"]
    assert subscription["state"] == "unsubscribed"
    assert subscription["unsubscribe_count"] == 1
    again = await client.post(
        f"/unsubscribe/{unsubscribe_token}", data={"List-Unsubscribe": "One-Click"}
    )
    assert again.status_code == 200
    (subscription,) = (await _subscriber(client, headers, "leaver@example.org"))["subscriptions"]
    assert subscription["unsubscribe_count"] == 1  # idempotent


async def _subscription_id(container: Container, subscriber_id: int) -> tuple[int, datetime]:
    from tidings.storage import subscriptions

    async with container.db.read() as conn:
        ((row, _, _),) = await subscriptions.of_subscriber(conn, subscriber_id)
    return row.id, row.created_at


async def _subscriber_created_at(container: Container, subscriber_id: int) -> datetime:
    from tidings.storage import subscribers

    async with container.db.read() as conn:
        row = await subscribers.get(conn, subscriber_id)
    assert row is not None
    return row.created_at


async def _preferences_token(container: Container, subscriber_id: int) -> str:
    """The preferences token tidings puts in mail to this subscriber."""
    created_at = await _subscriber_created_at(container, subscriber_id)
    return tokens.sign(container.site_secret(), "preferences", subscriber_id, created_at)


async def test_preferences_page_lists_newsletters_and_toggles_them(site: Any) -> None:
    """A reader manages every list from one page reached from any email; ticking a list
    they have not confirmed sends a confirmation email, because a forwarded email must not
    let its reader sign the recipient up (AUD-7)."""
    client, container, headers = site
    await create_newsletter(client, headers, slug="daily")
    await _subscribe(client, container, "prefs@example.org")
    (token,) = await confirmation_tokens(container)
    confirmed = await client.post(f"/confirm/{token}")
    subscriber = await _subscriber(client, headers, "prefs@example.org")
    preferences_token = await _preferences_token(container, subscriber["id"])
    assert f"/preferences/{preferences_token}" in confirmed.text
    page = await client.get(f"/preferences/{preferences_token}")
    assert "The Weekly" in page.text
    assert "The Daily" in page.text
    newsletters = {
        n["slug"]: n["id"]
        for n in (await client.get("/api/admin/newsletters", headers=headers)).json()
    }
    saved = await client.post(
        f"/preferences/{preferences_token}", data={"newsletter": [newsletters["daily"]]}
    )
    assert saved.status_code == 200
    assert "Waiting for you to confirm" in saved.text

    async def states() -> dict[str, str]:
        found = (await _subscriber(client, headers, "prefs@example.org"))["subscriptions"]
        return {s["newsletter"]: s["state"] for s in found}

    assert await states() == {"weekly": "unsubscribed", "daily": "pending"}
    first, daily_token = await confirmation_tokens(container)
    assert first == token
    again = await client.post(
        f"/preferences/{preferences_token}", data={"newsletter": [newsletters["daily"]]}
    )
    assert again.status_code == 200
    assert await confirmation_tokens(container) == [token, daily_token]  # no second email
    assert (await client.post(f"/confirm/{daily_token}")).status_code == 200
    assert await states() == {"weekly": "unsubscribed", "daily": "confirmed"}


async def test_preferences_cannot_revive_an_unsubscribe_without_the_emailed_link(
    site: Any,
) -> None:
    """Even on a single opt-in list, a tick on a forwarded email's preferences page must
    not undo the person's own unsubscribe: only the link in their mailbox does (AUD-7)."""
    client, container, headers = site
    await client.patch(
        "/api/admin/newsletters/weekly", headers=headers, json={"double_opt_in": False}
    )
    await _subscribe(client, container, "dora@example.org")
    dora = await _subscriber(client, headers, "dora@example.org")
    assert dora["subscriptions"][0]["state"] == "confirmed"
    preferences_token = await _preferences_token(container, dora["id"])
    await client.put(f"/api/preferences/{preferences_token}", json={"newsletters": []})
    assert (await _subscriber(client, headers, "dora@example.org"))["subscriptions"][0][
        "state"
    ] == "unsubscribed"
    newsletter_id = (await client.get("/api/admin/newsletters/weekly", headers=headers)).json()[
        "id"
    ]
    ticked = await client.put(
        f"/api/preferences/{preferences_token}", json={"newsletters": [newsletter_id]}
    )
    assert ticked.json() == [
        {
            "newsletter_id": newsletter_id,
            "name": "The Weekly",
            "description": "",
            "subscribed": False,
            "awaiting_confirmation": True,
        }
    ]
    (token,) = await confirmation_tokens(container)
    await client.post(f"/confirm/{token}")
    assert (await _subscriber(client, headers, "dora@example.org"))["subscriptions"][0][
        "state"
    ] == "confirmed"


@pytest.mark.parametrize("path", ["/confirm/{}", "/unsubscribe/{}", "/preferences/{}"])
async def test_forged_and_malformed_links_get_a_clear_page(site: Any, path: str) -> None:
    """A bad link says so in plain words and changes nothing."""
    client, container, _ = site
    await _subscribe(client, container, "someone@example.org")
    before = await snapshot(container)
    for token in ("nonsense", "1.AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", "x" * 43, "../../etc"):
        for method in ("GET", "POST"):
            response = await client.request(method, path.format(token))
            assert response.status_code in (404, 422), (method, token)
            assert "Traceback" not in response.text
            if response.status_code == 404 and response.headers["content-type"].startswith(
                "text/html"
            ):
                assert "not valid" in response.text
    assert await snapshot(container) == before


MANGLED_TOKENS = (
    "",  # the segment emptied
    "/1.abc",  # an empty segment, then more
    "1.abc/extra",
    "1.abc%2Fextra",
    "x" * 300,
    "a%00b",
    "%ff%fe",
    "a%20b",
    "%E2%80%A8",
    "1.%41%41%41%41%41%41%41%41%41%41%41%41%41%41%41%41",
    "%",
    "%zz",
)


@pytest.mark.parametrize("page", ["/confirm/", "/unsubscribe/", "/preferences/"])
async def test_every_mangled_token_gets_the_html_link_page_never_json(site: Any, page: str) -> None:
    """A reader whose mail client mangled a link must see a page saying so, not JSON or 400."""
    client, container, _ = site
    await _subscribe(client, container, "someone@example.org")
    before = await snapshot(container)
    for token in MANGLED_TOKENS:
        for method in ("GET", "POST"):
            form = {"newsletter": "not-a-number"} if method == "POST" else None
            response = await client.request(method, page + token, data=form)
            assert response.status_code == 404, (method, token, response.status_code)
            assert response.headers["content-type"].startswith("text/html"), (method, token)
            assert "not valid" in response.text, (method, token)
    assert await snapshot(container) == before


async def test_a_mangled_preferences_form_changes_nothing_and_answers_html(site: Any) -> None:
    """A form value that names no newsletter is refused on the page, not with JSON, and
    nothing is unsubscribed because of it."""
    client, container, headers = site
    await _subscribe(client, container, "erin@example.org")
    (token,) = await confirmation_tokens(container)
    await client.post(f"/confirm/{token}")
    subscriber = await _subscriber(client, headers, "erin@example.org")
    preferences = await _preferences_token(container, subscriber["id"])
    before = await snapshot(container)
    response = await client.post(f"/preferences/{preferences}", data={"newsletter": "1 OR 1"})
    assert response.status_code == 400
    assert response.headers["content-type"].startswith("text/html")
    assert await snapshot(container) == before


async def test_expired_confirmation_link_shows_expired_page(database_url: str) -> None:
    """An old link must say so (and how to get a new one), not confirm a stale request."""
    clock = Clock()
    settings = make_settings(database_url)
    async with api_client(settings, clock=clock) as (client, container):
        await create_newsletter(client, await admin_headers(container))
        await _subscribe(client, container, "late@example.org")
        (token,) = await confirmation_tokens(container)
        clock.advance(timedelta(hours=settings.audience.confirm_token_ttl_hours, seconds=1))
        response = await client.post(f"/confirm/{token}")
    assert response.status_code == 404
    assert "expired" in response.text


async def test_form_post_redirects_to_the_thank_you_page(site: Any) -> None:
    """Post/redirect/get: reloading the thank-you page must not subscribe again."""
    client, *_ = site
    form = await client.get("/subscribe")
    assert 'action="/subscribe"' in form.text
    posted = await client.post(
        "/subscribe", data={"email": "form@example.org", "newsletter": "weekly"}
    )
    assert posted.status_code == 303
    assert posted.headers["location"] == "/subscribe/thanks"
    thanks = await client.get("/subscribe/thanks")
    assert thanks.status_code == 200


async def test_suppressed_address_stays_suppressed_when_it_subscribes_again(site: Any) -> None:
    """A bounce or complaint outranks a form: suppression survives a new signup, silently."""
    client, container, headers = site
    suppressed = await client.post(
        "/api/admin/suppressions",
        headers=headers,
        json={"email": "blocked@example.org", "reason": "complaint"},
    )
    assert suppressed.status_code == 201
    await _subscribe(client, container, "BLOCKED@example.org")
    assert await confirmation_tokens(container) == []  # no mail to a suppressed address
    check = await client.get(
        "/api/admin/suppressions/check", params={"email": "blocked@example.org"}, headers=headers
    )
    assert check.json() == {"suppressed": True}


async def test_subscribe_rate_limits_hold_per_address(database_url: str) -> None:
    """Nobody may flood one person's inbox with confirmation emails."""
    settings = make_settings(database_url, audience={"subscribe_limit_per_address": 2})
    async with api_client(settings) as (client, container):
        headers = await admin_headers(container)
        await create_newsletter(client, headers)
        codes = [
            (await _subscribe(client, container, "spam@example.org")).status_code for _ in range(3)
        ]
        assert codes == [202, 202, 429]
        limited = await _subscribe(client, container, "spam@example.org")
        assert limited.headers["content-type"] == "application/problem+json"
        assert int(limited.headers["retry-after"]) > 0
        assert (await _subscribe(client, container, "other@example.org")).status_code == 202


@pytest.mark.parametrize(
    "body",
    [
        {"email": "no-at-sign", "newsletter": "weekly"},
        {"email": "a@b@example.org", "newsletter": "weekly"},
        {"email": "sp ace@example.org", "newsletter": "weekly"},
        {"email": "ok@example.org", "newsletter": "nope"},
        {"email": "ok@example.org", "newsletter": "weekly", "name": "Evil\r\nBcc: x@y.z"},
        {"email": "ok@example.org", "newsletter": "weekly", "name": "x" * 500},
        {"email": ["ok@example.org"], "newsletter": "weekly"},
        {"email": "ok@example.org"},
        {"email": "x" * 400 + "@example.org", "newsletter": "weekly"},
    ],
)
async def test_bad_subscribe_input_is_4xx_and_changes_nothing(
    site: Any, body: dict[str, Any]
) -> None:
    """A public endpoint's bad input is refused without a trace in the database."""
    client, container, _ = site
    before = await snapshot(container)
    response = await client.post("/api/subscribe", json=body)
    assert 400 <= response.status_code < 500
    assert response.headers["content-type"] == "application/problem+json"
    assert await snapshot(container) == before


async def test_malformed_json_and_form_bodies_are_4xx(site: Any) -> None:
    """Malformed bodies from the internet are the sender's error, not ours."""
    client, container, _ = site
    before = await snapshot(container)
    raw = await client.post(
        "/api/subscribe", content=b"{nope", headers={"content-type": "application/json"}
    )
    assert raw.status_code == 400
    form = await client.post("/subscribe", data={"email": "bad", "newsletter": "weekly"})
    assert form.status_code == 422
    assert "must contain exactly one @" in form.text
    assert (await client.post("/api/confirm", json={"token": "x"})).status_code == 404
    assert (await client.post("/api/unsubscribe", json={"token": 5})).status_code == 422
    assert await snapshot(container) == before


async def test_links_from_a_deleted_subscriber_do_not_reach_a_new_one_with_the_same_id(
    site: Any,
) -> None:
    """SQLite reuses ids: a link signed for a deleted row must not control a new person."""
    client, container, headers = site
    created = (
        await client.post(
            "/api/admin/subscribers",
            headers=headers,
            json={
                "email": "new@example.org",
                "subscriptions": [{"newsletter": "weekly", "confirmed": True}],
            },
        )
    ).json()
    old_stamp = datetime.fromisoformat(created["created_at"]) - timedelta(days=3)
    stale = tokens.sign(container.site_secret(), "preferences", created["id"], old_stamp)
    assert (await client.get(f"/preferences/{stale}")).status_code == 404
    assert (await client.post(f"/preferences/{stale}", data={})).status_code == 404
    current = await _subscriber(client, headers, "new@example.org")
    assert current["subscriptions"][0]["state"] == "confirmed"


async def test_single_opt_in_never_revives_an_unsubscribe_without_confirmation(site: Any) -> None:
    """Subscribe is public: on a single opt-in list it must still not undo a person's own
    unsubscribe without a click in their mailbox."""
    client, container, headers = site
    await client.patch(
        "/api/admin/newsletters/weekly", headers=headers, json={"double_opt_in": False}
    )
    await _subscribe(client, container, "carol@example.org")
    carol = await _subscriber(client, headers, "carol@example.org")
    assert carol["subscriptions"][0]["state"] == "confirmed"
    await client.delete(
        f"/api/admin/subscribers/{carol['id']}/subscriptions/weekly", headers=headers
    )
    await _subscribe(client, container, "carol@example.org")
    carol = await _subscriber(client, headers, "carol@example.org")
    assert carol["subscriptions"][0]["state"] == "pending"
    assert len(await confirmation_tokens(container)) == 1


async def test_concurrent_confirmations_confirm_once(site: Any) -> None:
    """Two clicks (or a scanner and a person) at once must record consent and notify once."""
    import asyncio

    client, container, headers = site
    hook = (
        await client.post(
            "/api/admin/webhooks",
            headers=headers,
            json={"url": "https://hooks.example.org/x", "event_types": ["subscriber.confirmed"]},
        )
    ).json()
    await _subscribe(client, container, "twice@example.org")
    (token,) = await confirmation_tokens(container)
    responses = await asyncio.gather(*(client.post(f"/confirm/{token}") for _ in range(5)))
    assert {r.status_code for r in responses} == {200}
    deliveries = (
        await client.get(f"/api/admin/webhooks/{hook['id']}/deliveries", headers=headers)
    ).json()["items"]
    assert len(deliveries) == 1


async def test_subscribe_rate_limit_holds_per_client_address(database_url: str) -> None:
    """One client cannot sign up the world: a per-IP limit holds behind trusted proxies too."""
    settings = make_settings(database_url, audience={"subscribe_limit_per_ip": 3})
    async with api_client(settings) as (client, container):
        headers = await admin_headers(container)
        await create_newsletter(client, headers)
        codes = [
            (await _subscribe(client, container, f"r{i}@example.org")).status_code for i in range(4)
        ]
        assert codes == [202, 202, 202, 429]


@pytest.mark.parametrize(
    ("method", "path", "body"),
    [
        ("POST", "/api/subscribe", {"email": "a@example.org", "newsletter": "week\u0000ly"}),
        (
            "POST",
            "/api/subscribe",
            {"email": "a@example.org", "newsletter": "weekly", "name": "A\u0000"},
        ),
        ("GET", "/api/admin/subscribers?q=a%00b", None),
        ("GET", "/api/admin/subscribers?label=x%00", None),
        (
            "POST",
            "/api/admin/subscribers",
            {"email": "a@example.org", "attributes": {"k": "v\u0000"}},
        ),
        ("POST", "/api/admin/suppressions", {"email": "a@example.org", "note": "n\u0000"}),
        ("GET", "/api/admin/subscribers?cursor=eyJhZnRlciI6IDk5OTk5OTk5OTk5OTk5OTk5OTk5OTl9", None),
    ],
)
async def test_nul_bytes_and_huge_numbers_are_4xx_not_500(
    site: Any, method: str, path: str, body: Any
) -> None:
    """Values the database cannot store are the caller's error (422), on both dialects."""
    client, container, headers = site
    before = await snapshot(container)
    # httpx sends NUL as the JSON escape \u0000, which is how it reaches a JSON API.
    response = await client.request(method, path, headers=headers, json=body)
    assert 400 <= response.status_code < 500, response.text
    assert await snapshot(container) == before
