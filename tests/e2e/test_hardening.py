"""The hardening a public release needs (UI-2): transport security on https sites, strict
headers on reader pages, HTML 404s for mangled links, quiet debug logs, gated API docs."""

import io
import json
import logging

import structlog

from tests.factories import admin_headers, api_client, make_settings
from tests.support.admin_ui import PASSWORD, sign_in, ui_app
from tidings.observability.logging import configure_logging

HTTPS = {"site": {"public_url": "https://news.example.org"}}
READER = "Rosalind.Reader@example.org"


async def test_https_site_sends_hsts_and_moves_plain_http_admin_to_https(sqlite_url: str) -> None:
    """Behind a TLS proxy, a sign-in form served over http would send the password in
    clear: it is redirected to https first, and browsers are told to stay on https."""
    async with ui_app(make_settings(sqlite_url, **HTTPS)) as (browser, container):
        await container.admins.create("operator@example.org", PASSWORD)
        plain = browser("http://news.example.org")
        moved = await plain.get("/admin/sign-in", params={"next": "/admin/campaigns"})
        assert moved.status_code == 308
        assert moved.headers["location"] == (
            "https://news.example.org/admin/sign-in?next=%2Fadmin%2Fcampaigns"
        )
        assert "password" not in moved.text
        forged_host = await plain.get("/admin", headers={"host": "evil.example"})
        assert forged_host.headers["location"] == "https://news.example.org/admin"
        secure = browser("https://news.example.org")
        form = await secure.get("/admin/sign-in")
        assert form.status_code == 200
        assert form.headers["strict-transport-security"] == "max-age=31536000"
        assert (await secure.get("/healthz")).headers["strict-transport-security"]
        assert (await sign_in(secure)).status_code == 303


async def test_plain_http_site_sends_no_hsts_and_no_redirect(sqlite_url: str) -> None:
    """A developer on http://localhost must not be pinned to https nor bounced away."""
    async with api_client(make_settings(sqlite_url)) as (client, _container):
        page = await client.get("/admin/sign-in")
        assert page.status_code == 200
        assert "strict-transport-security" not in page.headers


async def test_reader_pages_forbid_framing_sniffing_and_referrers(database_url: str) -> None:
    """Pages opened from an email carry a bearer token: no other site may frame them
    (clickjacking an unsubscribe) or receive their URL as a referrer."""
    async with api_client(make_settings(database_url)) as (client, container):
        headers = await admin_headers(container)
        made = await client.post(
            "/api/admin/newsletters",
            headers=headers,
            json={
                "name": "Weekly",
                "slug": "weekly",
                "sender_name": "Ed",
                "sender_address": "ed@example.org",
            },
        )
        assert made.status_code == 201, made.text
        for path in ("/subscribe", "/subscribe/weekly", "/unsubscribe/abc", "/confirm/abc"):
            page = await client.get(path)
            csp = page.headers["content-security-policy"]
            assert "frame-ancestors 'none'" in csp, path
            assert "script-src" not in csp, path
            assert "default-src 'none'" in csp, path
            assert page.headers["x-content-type-options"] == "nosniff", path
            assert page.headers["referrer-policy"] == "no-referrer", path
        posted = await client.post("/preferences/abc")
        assert "frame-ancestors 'none'" in posted.headers["content-security-policy"]


async def test_mangled_or_over_long_links_get_the_html_404_page(database_url: str) -> None:
    """A reader whose mail client mangled a link must see the page that says so, in HTML,
    not a JSON validation error."""
    async with api_client(make_settings(database_url)) as (client, _container):
        for token in ("a" * 101, "9" * 5000, "99999999999999999999999.x", "-1.x"):
            for kind in ("confirm", "unsubscribe", "preferences"):
                for method in ("GET", "POST"):
                    page = await client.request(method, f"/{kind}/{token}")
                    assert page.status_code == 404, (kind, method, len(token))
                    assert page.headers["content-type"].startswith("text/html"), (kind, method)
                    assert "<!DOCTYPE html>" in page.text
                    assert token not in page.text


async def test_debug_logging_never_prints_sql_parameters_or_rows(sqlite_url: str) -> None:
    """`--log-level debug` is turned on to chase a problem in production: it must not write
    readers' addresses (SQL parameters, result rows) into the logs."""
    stream = io.StringIO()
    root = logging.getLogger()
    saved = (root.handlers[:], root.level)
    try:
        configure_logging("debug", "json", stream=stream)
        async with api_client(make_settings(sqlite_url)) as (client, container):
            headers = await admin_headers(container)
            await client.post(
                "/api/admin/newsletters",
                headers=headers,
                json={
                    "name": "W",
                    "slug": "weekly",
                    "sender_name": "Ed",
                    "sender_address": "ed@example.org",
                },
            )
            answer = await client.post(
                "/api/admin/subscribers",
                headers=headers,
                json={
                    "email": READER,
                    "name": "Rosalind",
                    # `newsletters` here was ignored until unknown fields were refused.
                    "subscriptions": [{"newsletter": "weekly", "confirmed": True}],
                },
            )
            assert answer.status_code < 300, answer.text
            listed = await client.get("/api/admin/subscribers", headers=headers)
            assert READER.lower() in listed.text.lower()
            structlog.get_logger("tests").debug("tests.debug_probe")
    finally:
        root.handlers, level = saved
        root.setLevel(level)
        structlog.reset_defaults()
    written = stream.getvalue()
    assert '"event": "tests.debug_probe"' in written  # debug was really on
    assert "SELECT" not in written  # nor do statements (SQLAlchemy's info) reach the log
    assert READER.lower() not in written.lower()
    assert "ed@example.org" not in written
    for line in filter(None, written.splitlines()):
        json.loads(line)  # every line is still structured


async def test_api_docs_can_be_put_behind_sign_in_or_switched_off(sqlite_url: str) -> None:
    """Some operators do not want the API's map public: `admin_ui.api_docs` keeps it for
    signed-in operators, or serves it to nobody."""
    gated = make_settings(sqlite_url, admin_ui={"api_docs": "signed_in"})
    async with ui_app(gated) as (browser, container):
        await container.admins.create("operator@example.org", PASSWORD)
        stranger = browser()
        for path in ("/docs", "/redoc", "/openapi.json"):
            answer = await stranger.get(path)
            assert answer.status_code == 303, path
            assert answer.headers["location"] == f"/admin/sign-in?next={path}"
        operator = browser()
        form = await operator.get("/admin/sign-in", params={"next": "/docs"})
        assert form.status_code == 200
        assert (await sign_in(operator)).status_code == 303
        assert (await operator.get("/openapi.json")).json()["info"]["title"] == "tidings"
        assert (await operator.get("/docs")).status_code == 200
    async with api_client(make_settings(sqlite_url, admin_ui={"api_docs": "off"})) as (
        client,
        _container,
    ):
        for path in ("/docs", "/redoc", "/openapi.json", "/docs/assets/swagger-ui.css"):
            assert (await client.get(path)).status_code == 404, path
        assert (await client.get("/healthz")).status_code == 200
    async with api_client(make_settings(sqlite_url)) as (client, _container):
        assert (await client.get("/openapi.json")).status_code == 200  # public by default
