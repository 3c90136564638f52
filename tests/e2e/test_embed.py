"""A signup form for any site (API-5): the iframe page, its snippet, CORS and the honeypot."""

from __future__ import annotations

import base64
import html
import json
import re
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from altcha import v1 as altcha_v1

from tests.e2e.audience_helpers import create_newsletter, deliver_queued_mail, snapshot
from tests.factories import admin_headers, api_client, make_settings
from tests.support.admin_ui import signed_in, ui_app
from tidings.bootstrap import Container

PARTNER = "https://partner.example"
LIMITS = {"subscribe_limit_per_address": 50, "subscribe_limit_per_ip": 500}


@pytest.fixture
async def site(database_url: str) -> AsyncIterator[tuple[httpx.AsyncClient, Container]]:
    settings = make_settings(
        database_url,
        http={"cors_origins": f"{PARTNER}, https://other.example:8443"},
        audience=LIMITS,
    )
    async with api_client(settings) as (client, container):
        await create_newsletter(client, await admin_headers(container), description="Fridays")
        yield client, container


async def _sent(container: Container) -> list[str]:
    await deliver_queued_mail(container)
    return [message.recipients[0] for message in await container.captured_mail.list(limit=100)]


async def test_embed_page_may_be_framed_by_configured_sites_only(site: Any) -> None:
    """Browsers enforce frame-ancestors: the form shows on the partner's site and nowhere else."""
    client, _ = site
    page = await client.get("/subscribe/weekly/embed")
    assert page.status_code == 200
    policy = page.headers["content-security-policy"]
    framing = "frame-ancestors 'self' https://partner.example https://other.example:8443"
    assert framing in policy.split("; ")
    assert "default-src 'none'" in policy  # the rest of the reader pages' policy holds
    assert "x-frame-options" not in page.headers
    assert 'action="/subscribe/weekly/embed"' in page.text
    assert "Fridays" in page.text
    assert 'name="viewport"' in page.text
    # Every other public page keeps refusing frames from the partner.
    other = await client.get("/subscribe/weekly")
    assert "frame-ancestors 'none'" in other.headers["content-security-policy"]
    assert other.headers["x-frame-options"] == "DENY"
    missing = await client.get("/subscribe/nothing/embed")
    assert missing.status_code == 404


async def test_embedded_signup_is_double_opt_in_and_says_the_same_for_everyone(
    site: Any,
) -> None:
    """Embedding must not weaken consent or let a stranger probe who is subscribed."""
    client, container = site
    first = await client.post("/subscribe/weekly/embed", data={"email": "ann@example.org"})
    assert first.status_code == 200
    assert "Check your inbox" in first.text
    assert await _sent(container) == ["ann@example.org"]
    again = await client.post("/subscribe/weekly/embed", data={"email": "ann@example.org"})
    assert again.text == first.text
    assert "frame-ancestors 'self'" in again.headers["content-security-policy"]
    bad = await client.post("/subscribe/weekly/embed", data={"email": "not an address"})
    assert bad.status_code == 422
    assert "not an address" in html.unescape(bad.text)


async def test_filled_honeypot_gets_the_thanks_and_changes_nothing(site: Any) -> None:
    """Bots fill every field: they must be told nothing and nobody must be mailed."""
    client, container = site
    before = await snapshot(container)
    trapped = await client.post(
        "/subscribe/weekly/embed", data={"email": "bot@example.org", "website": "spam"}
    )
    assert trapped.status_code == 200
    assert "Check your inbox" in trapped.text
    form = await client.post(
        "/subscribe",
        data={"email": "bot@example.org", "newsletter": "weekly", "website": "x"},
        follow_redirects=False,
    )
    assert form.status_code == 303
    assert form.headers["location"] == "/subscribe/thanks"
    assert await snapshot(container) == before
    assert await _sent(container) == []
    assert 'name="website"' in (await client.get("/subscribe/weekly")).text


async def test_subscribe_json_answers_cors_preflight_for_configured_origins_only(
    site: Any,
) -> None:
    """A partner's page may call the JSON endpoint from the browser; any other site may not."""
    client, container = site
    asked = {
        "Access-Control-Request-Method": "POST",
        "Access-Control-Request-Headers": "content-type",
    }
    allowed = await client.options("/api/subscribe", headers={"Origin": PARTNER, **asked})
    assert allowed.status_code == 204
    assert allowed.headers["access-control-allow-origin"] == PARTNER
    assert "POST" in allowed.headers["access-control-allow-methods"]
    assert "content-type" in allowed.headers["access-control-allow-headers"].lower()
    refused = await client.options(
        "/api/subscribe", headers={"Origin": "https://evil.example", **asked}
    )
    assert refused.status_code == 403
    assert "access-control-allow-origin" not in refused.headers
    posted = await client.post(
        "/api/subscribe",
        json={"email": "bea@example.org", "newsletter": "weekly"},
        headers={"Origin": PARTNER},
    )
    assert posted.status_code == 202
    assert posted.headers["access-control-allow-origin"] == PARTNER
    stranger = await client.post(
        "/api/subscribe",
        json={"email": "cy@example.org", "newsletter": "weekly"},
        headers={"Origin": "https://evil.example"},
    )
    assert "access-control-allow-origin" not in stranger.headers
    assert sorted(await _sent(container)) == ["bea@example.org", "cy@example.org"]


async def test_admin_newsletter_page_offers_the_embed_snippet(database_url: str) -> None:
    """Site owners copy the snippet from the admin page; it must point at the embed form."""
    settings = make_settings(database_url, site={"public_url": "https://news.example.org"})
    async with ui_app(settings) as (browser, container):
        client = browser()
        csrf = await signed_in(client, container)
        fields = {
            "name": "Weekly Notes",
            "slug": "weekly",
            "sender_name": "Ed",
            "sender_address": "ed@example.org",
            "archive": "on",
            "csrf_token": csrf,
        }
        assert (await client.post("/admin/newsletters/new", data=fields)).status_code == 303
        assert (await container.newsletters.get("weekly")).archive is True
        page = await client.get("/admin/newsletters/weekly")
        snippet = html.unescape(re.search(r"<textarea[^>]*>(.*?)</textarea>", page.text, re.S)[1])
        assert 'src="https://news.example.org/subscribe/weekly/embed"' in snippet
        assert snippet.startswith("<iframe")
        assert snippet.endswith("</iframe>")
        assert "https://news.example.org/archive/weekly" in page.text


def _solved(challenge: dict[str, Any]) -> str:
    """What the form's script posts: the challenge solved, as ALTCHA v1's base64 JSON."""
    solution = altcha_v1.solve_challenge(
        challenge["challenge"], challenge["salt"], max_number=challenge["maxnumber"]
    )
    assert solution is not None
    fields = ("algorithm", "challenge", "salt", "signature")
    payload = {key: challenge[key] for key in fields} | {"number": solution.number}
    return base64.b64encode(json.dumps(payload).encode()).decode()


async def test_proof_of_work_is_asked_for_once_per_signup_when_on(database_url: str) -> None:
    """Bots posting in bulk must pay for each signup; a solution cannot be replayed, and the
    refusal is the same whoever the address is (no enumeration)."""
    settings = make_settings(
        database_url, audience={**LIMITS, "altcha": True, "altcha_max_number": 2000}
    )
    async with api_client(settings) as (client, container):
        await create_newsletter(client, await admin_headers(container))
        page = await client.get("/subscribe/weekly/embed")
        assert 'name="altcha"' in page.text
        assert "/api/altcha/challenge" in page.text
        before = await snapshot(container)
        unsolved = await client.post("/subscribe/weekly/embed", data={"email": "ann@example.org"})
        assert unsolved.status_code == 422
        assert "anti-bot check" in unsolved.text
        refused_json = await client.post(
            "/api/subscribe", json={"email": "ann@example.org", "newsletter": "weekly"}
        )
        assert refused_json.status_code == 422
        assert refused_json.json()["errors"][0]["field"] == "altcha"
        assert await snapshot(container) == before

        challenge = (await client.get("/api/altcha/challenge")).json()
        payload = _solved(challenge)
        taken = await client.post(
            "/subscribe/weekly/embed", data={"email": "ann@example.org", "altcha": payload}
        )
        assert taken.status_code == 200
        assert "Check your inbox" in taken.text
        replayed = await client.post(
            "/subscribe/weekly/embed", data={"email": "bob@example.org", "altcha": payload}
        )
        assert replayed.status_code == 422
        fresh = _solved((await client.get("/api/altcha/challenge")).json())
        by_api = await client.post(
            "/api/subscribe",
            json={"email": "bob@example.org", "newsletter": "weekly", "altcha": fresh},
        )
        assert by_api.status_code == 202
        assert sorted(await _sent(container)) == ["ann@example.org", "bob@example.org"]


async def test_a_solution_spent_at_one_api_process_is_refused_at_another(
    database_url: str,
) -> None:
    """Behind a load balancer each request may reach another API process: a solved challenge
    replayed to a second process must still be refused, or the proof of work costs a bot
    nothing more than one solution per process."""
    settings = make_settings(
        database_url, audience={**LIMITS, "altcha": True, "altcha_max_number": 2000}
    )
    async with api_client(settings) as (first, container):
        await create_newsletter(first, await admin_headers(container))
        payload = _solved((await first.get("/api/altcha/challenge")).json())
        taken = await first.post(
            "/api/subscribe",
            json={"email": "ann@example.org", "newsletter": "weekly", "altcha": payload},
        )
        assert taken.status_code == 202
        async with api_client(settings) as (second, _):
            replayed = await second.post(
                "/api/subscribe",
                json={"email": "bob@example.org", "newsletter": "weekly", "altcha": payload},
            )
            assert replayed.status_code == 422
            assert replayed.json()["errors"][0]["field"] == "altcha"
        assert await _sent(container) == ["ann@example.org"]


async def test_no_proof_of_work_is_asked_for_by_default(site: Any) -> None:
    """Off by default: forms carry no script and the challenge route does not exist."""
    client, _ = site
    assert (await client.get("/api/altcha/challenge")).status_code == 404
    assert "<script" not in (await client.get("/subscribe/weekly/embed")).text


def _re_encodings(payload: str) -> dict[str, str]:
    """The same solution written differently: each decodes to the same challenge and number."""
    fields = json.loads(base64.b64decode(payload))
    salt = fields["salt"]

    def encoded(value: dict[str, Any], **dump: Any) -> str:
        return base64.b64encode(json.dumps(value, **dump).encode()).decode()

    compact = encoded(fields, separators=(",", ":"))
    return {
        "whitespace": encoded(fields, indent=3),
        "key order": encoded(dict(reversed(list(fields.items())))),
        "extra field": encoded(fields | {"took": 812}),
        "number as text": encoded(fields | {"number": str(fields["number"])}),
        "salt without its trailing &": encoded(fields | {"salt": salt.rstrip("&")}),
        "salt with a trailing &": encoded(fields | {"salt": salt + "&"}),
        "base64 with extra padding": payload + "==",
        "base64 with line breaks": "\n".join(
            compact[start : start + 8] for start in range(0, len(compact), 8)
        ),
    }


async def test_a_re_encoded_solution_is_refused_as_already_used(database_url: str) -> None:
    """A bot must pay for every signup: re-encoding one solved challenge (JSON whitespace, key
    order, an extra field, another base64 form) must not make it count again (issue 35 item 6,
    the reviewer's replay of one solution written eight ways)."""
    settings = make_settings(
        database_url, audience={**LIMITS, "altcha": True, "altcha_max_number": 2000}
    )
    async with api_client(settings) as (client, container):
        await create_newsletter(client, await admin_headers(container))
        payload = _solved((await client.get("/api/altcha/challenge")).json())
        variants = _re_encodings(payload)
        assert len(set(variants.values()) | {payload}) == len(variants) + 1
        solved = json.loads(base64.b64decode(payload))
        for variant in variants.values():  # each one a genuine copy of the same solution
            copy = json.loads(base64.b64decode(variant))
            assert (copy["challenge"], int(copy["number"])) == (
                solved["challenge"],
                solved["number"],
            )
        first = await client.post(
            "/api/subscribe",
            json={"email": "ann@example.org", "newsletter": "weekly", "altcha": payload},
        )
        assert first.status_code == 202
        accepted = []
        for number, (how, variant) in enumerate(variants.items()):
            replay = await client.post(
                "/api/subscribe",
                json={
                    "email": f"bot{number}@example.org",
                    "newsletter": "weekly",
                    "altcha": variant,
                },
            )
            assert replay.status_code in (202, 422), how
            if replay.status_code == 202:
                accepted.append(how)
        assert accepted == []
        assert await _sent(container) == ["ann@example.org"]
