"""Operators sign in to the admin UI with passwords and server-side sessions (UI-1)."""

import html
import os
import re
import subprocess
import sys
from datetime import timedelta

import httpx

from tests.factories import api_client, make_settings
from tests.support.admin_ui import PASSWORD, csrf_from, sign_in, signed_in, ui_app
from tests.support.clock import Clock
from tidings.storage.admins import list_admins


async def test_sign_in_opens_a_session_with_a_locked_down_cookie(database_url: str) -> None:
    """On an https site the session cookie must never travel in clear or reach scripts."""
    settings = make_settings(database_url, site={"public_url": "https://news.example.org"})
    async with ui_app(settings) as (browser, container):
        client = browser("https://news.example.org")
        assert (await client.get("/admin")).headers["location"] == "/admin/sign-in?next=/admin"
        await container.admins.create("Operator@Example.org", PASSWORD)
        answer = await sign_in(client, "operator@example.org")
        assert answer.status_code == 303
        assert answer.headers["location"] == "/admin"
        cookie = next(
            value
            for value in answer.headers.get_list("set-cookie")
            if value.startswith("__Host-tidings_admin=")
        )
        for attribute in ("Secure", "HttpOnly", "SameSite=strict", "Path=/"):
            assert attribute in cookie
        token = cookie.split(";")[0].split("=", 1)[1]
        async with container.db.read() as conn:
            stored = await list_admins(conn)
        assert stored[0].password_hash.startswith("$argon2id$")
        assert PASSWORD not in stored[0].password_hash
        elsewhere = browser("https://news.example.org")
        elsewhere.cookies.set("__Host-tidings_admin", token)
        page = await elsewhere.get("/admin")
        assert page.status_code == 200
        assert "operator@example.org" in page.text


async def test_cookie_is_not_secure_on_plain_http_localhost(sqlite_url: str) -> None:
    """A developer on http://localhost must be able to sign in; `auto` follows the URL."""
    settings = make_settings(sqlite_url, site={"public_url": "http://localhost:8000"})
    async with api_client(settings) as (client, container):
        await container.admins.create("dev@example.org", PASSWORD)
        answer = await sign_in(client, "dev@example.org")
        cookie = next(
            value
            for value in answer.headers.get_list("set-cookie")
            if value.startswith("tidings_admin=")
        )
        assert "Secure" not in cookie
        assert "HttpOnly" in cookie
        assert (await client.get("/admin")).status_code == 200


async def test_wrong_password_and_unknown_account_get_the_same_answer(sqlite_url: str) -> None:
    """Sign-in must not tell an attacker which addresses have accounts."""
    async with api_client(make_settings(sqlite_url)) as (client, container):
        await container.admins.create("operator@example.org", PASSWORD)
        wrong = await sign_in(client, "operator@example.org", "not the password at all")
        unknown = await sign_in(client, "nobody@example.org", PASSWORD)
        assert wrong.status_code == unknown.status_code == 401
        assert "The email or password is not right" in wrong.text.replace("the email", "The email")
        assert (await client.get("/admin")).status_code == 303


async def test_sign_in_attempts_are_limited_per_account(sqlite_url: str) -> None:
    """Password guessing against one account stops after the limit, even with the right
    password, for a browser that never signed in to it (UI-2: others are only slowed)."""
    settings = make_settings(sqlite_url, admin_ui={"sign_in_limit_per_account": 3})
    async with api_client(settings) as (client, container):
        await container.admins.create("operator@example.org", PASSWORD)
        for _ in range(3):
            assert (
                await sign_in(client, "operator@example.org", "guess-guess-guess")
            ).status_code == 401
        limited = await sign_in(client, "operator@example.org")
        assert limited.status_code == 429
        assert int(limited.headers["retry-after"]) >= 1
        assert (await client.get("/admin")).status_code == 303


async def test_sign_in_attempts_are_limited_per_client_address(sqlite_url: str) -> None:
    """Spraying many accounts from one address is stopped too."""
    settings = make_settings(sqlite_url, admin_ui={"sign_in_limit_per_ip": 2})
    async with api_client(settings) as (client, container):
        await container.admins.create("operator@example.org", PASSWORD)
        for name in ("a", "b"):
            assert (await sign_in(client, f"{name}@example.org")).status_code == 401
        assert (await sign_in(client, "operator@example.org")).status_code == 429


async def test_sessions_end_after_idle_and_absolute_timeouts(sqlite_url: str) -> None:
    """A forgotten browser tab must not stay signed in forever."""
    clock = Clock()
    settings = make_settings(
        sqlite_url, admin_ui={"session_idle_minutes": 30, "session_absolute_hours": 2}
    )
    async with api_client(settings, clock=clock) as (client, container):
        await signed_in(client, container)
        clock.advance(timedelta(minutes=29))
        assert (await client.get("/admin")).status_code == 200
        clock.advance(timedelta(minutes=31))
        assert (await client.get("/admin")).status_code == 303  # idle for 31 minutes
        assert (await sign_in(client)).status_code == 303
        for _ in range(4):  # busy, never idle, yet past the absolute lifetime at the end
            clock.advance(timedelta(minutes=25))
            assert (await client.get("/admin")).status_code == 200
        clock.advance(timedelta(minutes=25))
        assert (await client.get("/admin")).status_code == 303


async def test_sign_out_everywhere_ends_every_session_of_the_operator(sqlite_url: str) -> None:
    """A lost laptop is handled from another device: every session of the account ends."""
    async with ui_app(make_settings(sqlite_url)) as (browser, container):
        laptop, phone = browser(), browser()
        await signed_in(laptop, container)
        assert (await sign_in(phone)).status_code == 303
        csrf = csrf_from(await phone.get("/admin"))
        out = await phone.post("/admin/sign-out-everywhere", data={"csrf_token": csrf})
        assert out.status_code == 303
        assert (await laptop.get("/admin")).status_code == 303
        assert (await phone.get("/admin")).status_code == 303


async def test_sign_out_ends_only_this_session(sqlite_url: str) -> None:
    """Signing out must make the old cookie worthless, not just delete it from the browser."""
    async with ui_app(make_settings(sqlite_url)) as (browser, container):
        client = browser()
        csrf = await signed_in(client, container)
        token = client.cookies["tidings_admin"]
        assert (await client.post("/admin/sign-out", data={"csrf_token": csrf})).status_code == 303
        replay = browser()
        replay.cookies.set("tidings_admin", token)
        assert (await replay.get("/admin")).status_code == 303


async def test_sign_in_never_redirects_off_site(sqlite_url: str) -> None:
    """A crafted sign-in link must not send the operator to another site afterwards."""
    async with api_client(make_settings(sqlite_url)) as (client, container):
        await container.admins.create("operator@example.org", PASSWORD)
        for target in ("https://evil.example/", "//evil.example/admin", "/admin/\\evil"):
            form = await client.get("/admin/sign-in", params={"next": target})
            answer = await _sign_in_from(client, form, next_path=target)
            assert answer.headers["location"] == "/admin"


def test_admins_create_prompts_for_the_password(tmp_path: object) -> None:
    """The first operator can only be made from the command line, so it must work there."""
    url = f"sqlite:///{tmp_path}/cli.db"
    env = {**os.environ, "TIDINGS_DATABASE_URL": url, "TIDINGS_LOG_FORMAT": "json"}

    def tidings(*args: str, given: str = "") -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "tidings", *args],
            input=given,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )

    assert tidings("migrate").returncode == 0
    short = tidings("admins", "create", "op@example.org", given="short\nshort\n")
    assert short.returncode == 2
    assert "password" in short.stderr
    made = tidings("admins", "create", "op@example.org", given=f"{PASSWORD}\n{PASSWORD}\n")
    assert made.returncode == 0, made.stderr
    assert PASSWORD not in made.stdout + made.stderr
    listed = tidings("admins", "list", "--json")
    assert '"email": "op@example.org"' in listed.stdout
    again = tidings("admins", "create", "op@example.org", given=f"{PASSWORD}\n{PASSWORD}\n")
    assert again.returncode == 1
    assert "exists" in again.stderr


async def test_the_sign_in_return_path_keeps_its_query_string_whole(sqlite_url: str) -> None:
    """An operator following a bookmarked filtered list must land on that list after signing
    in, every parameter intact (and a value's own escapes too)."""
    async with ui_app(make_settings(sqlite_url)) as (browser, container):
        await container.admins.create("operator@example.org", PASSWORD)
        client = browser()
        wanted = "/admin/campaigns?status=sent&page=2&q=a%26b%3Dc"
        sent_away = await client.get(wanted)
        assert sent_away.status_code == 303
        form = await client.get(sent_away.headers["location"])
        found = re.search(r'name="next" value="([^"]*)"', form.text)
        assert found is not None
        next_path = html.unescape(found.group(1))
        assert next_path == wanted
        answer = await _sign_in_from(client, form, next_path=next_path)
        assert answer.status_code == 303
        assert answer.headers["location"] == wanted


async def _sign_in_from(
    client: httpx.AsyncClient, form: httpx.Response, *, next_path: str
) -> httpx.Response:
    """Post the sign-in `form` as a browser would, with its hidden `next`."""
    return await client.post(
        "/admin/sign-in",
        data={
            "email": "operator@example.org",
            "password": PASSWORD,
            "csrf_token": csrf_from(form),
            "next": next_path,
        },
    )
