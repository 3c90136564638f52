"""Every admin page needs a session, every form post the session's CSRF token, and no page
reflects input unescaped (UI-1). The routes are walked from the UI's own router list, so a
page added later is covered without editing this file."""

import re
from collections.abc import Iterator

from tests.factories import make_settings
from tests.support.admin_ui import NEWSLETTER, csrf_from, signed_in, ui_app
from tidings.ui.app import guarded_routers

MARKER = '"><script>alert("tidings")</script><img src=x onerror=alert(1)>'
RAW = re.compile(r"<script>alert|<img src=x")
PATH_VALUES = {"current": "weekly", "run_id": "nosuchrun"}
QUERY_NAMES = ("q", "newsletter", "state", "tier", "label", "segment", "next", "format", "before")


def admin_routes() -> Iterator[tuple[str, str]]:
    for router in guarded_routers():
        for route in router.routes:
            path = "/admin" + route.path  # type: ignore[attr-defined]
            concrete = re.sub(r"\{(\w+)\}", lambda m: PATH_VALUES.get(m.group(1), "1"), path)
            for method in sorted(route.methods - {"HEAD"}):  # type: ignore[attr-defined]
                yield method, concrete


async def test_no_admin_page_or_form_answers_without_a_session(sqlite_url: str) -> None:
    """An admin page reachable without signing in would expose every reader's data."""
    routes = list(admin_routes())
    assert len(routes) >= 35
    async with ui_app(make_settings(sqlite_url)) as (browser, container):
        client = browser()
        await container.admins.create("operator@example.org", "correct horse battery staple")
        for method, path in routes:
            answer = await client.request(method, path, data={"csrf_token": "x"})
            assert answer.status_code == 303, (method, path, answer.status_code)
            assert answer.headers["location"].startswith("/admin/sign-in?next=/admin"), path
        assert (await client.get("/admin/sign-in")).status_code == 200


async def test_no_form_post_is_accepted_without_the_sessions_csrf_token(sqlite_url: str) -> None:
    """A page on another site must not be able to make a signed-in operator's browser act."""
    async with ui_app(make_settings(sqlite_url)) as (browser, container):
        client = browser()
        csrf = await signed_in(client, container)
        await client.post("/admin/newsletters/new", data={**NEWSLETTER, "csrf_token": csrf})
        other = browser()
        other_csrf = await signed_in(other, container, "second@example.org")
        posts = [(method, path) for method, path in admin_routes() if method != "GET"]
        assert len(posts) >= 15
        for method, path in posts:
            for token in (None, "", other_csrf, csrf[:-1]):
                data = {**NEWSLETTER, "name": "Changed"}
                if token is not None:
                    data["csrf_token"] = token
                answer = await client.request(method, path, data=data)
                assert answer.status_code == 403, (method, path, token, answer.status_code)
            json_post = await client.request(method, path, json={"csrf_token": csrf})
            assert json_post.status_code == 403, (method, path)
        assert (await container.newsletters.get("weekly")).name == "Weekly Notes"
        assert (await client.get("/admin")).status_code == 200  # still signed in
        # The sign-in form's own token: its cookie must match the posted field.
        stranger = browser()
        forged = await stranger.post(
            "/admin/sign-in",
            data={"email": "operator@example.org", "password": "x" * 20, "csrf_token": "forged"},
        )
        assert forged.status_code == 403


async def test_no_page_reflects_input_or_stored_data_unescaped(database_url: str) -> None:
    """Names, subjects and query strings come from readers and strangers: shown raw, they
    would run script in the operator's session."""
    async with ui_app(make_settings(database_url)) as (browser, container):
        client = browser()
        csrf = await signed_in(client, container)
        stored = {**NEWSLETTER, "description": MARKER, "sender_name": "Editors"}
        made = await client.post("/admin/newsletters/new", data={**stored, "csrf_token": csrf})
        assert made.status_code == 303, made.text
        await container.subscribers.create(
            email="reader@example.org",
            name=MARKER,
            tier="free",
            labels=[],
            attributes={},
            subscribe_to=[("weekly", True)],
            actor="tests",
        )
        campaign = await client.post(
            "/admin/campaigns/new",
            data={"newsletter": "weekly", "subject": MARKER, "body": MARKER, "csrf_token": csrf},
        )
        assert campaign.status_code == 303, campaign.text
        hook = await client.post(
            "/admin/webhooks",
            data={
                "url": "https://hooks.example.org/x",
                "event_types": "*",
                "description": MARKER,
                "csrf_token": csrf,
            },
        )
        assert hook.status_code == 200
        query = dict.fromkeys(QUERY_NAMES, MARKER)
        for method, path in admin_routes():
            if "/sign-out" in path:
                continue  # would end the session the walk needs
            if method == "GET":
                if path.endswith("/preview") or path.endswith("/html"):
                    continue  # the mail itself, served under a sandboxing CSP
                answer = await client.get(path, params=query)
            else:
                fields = dict.fromkeys(
                    (
                        "name",
                        "slug",
                        "subject",
                        "body",
                        "to",
                        "q",
                        "note",
                        "email",
                        "url",
                        "description",
                        "confirm_email",
                        "scheduled_at",
                        "newsletter",
                        "segment",
                    ),
                    MARKER,
                )
                answer = await client.post(path, data={**fields, "csrf_token": csrf})
            if answer.headers.get("content-type", "").startswith("text/html"):
                assert not RAW.search(answer.text), (method, path)
            else:  # downloads (JSON, CSV) and the script: never rendered as a page
                assert answer.headers["x-content-type-options"] == "nosniff", path
            assert answer.status_code < 500, (method, path)
            assert not answer.headers.get("location", "").startswith("/admin/sign-in"), path
        for page in ("/admin", "/admin/subscribers", "/admin/campaigns/1", "/admin/webhooks"):
            text = (await client.get(page)).text
            assert "&lt;script&gt;alert" in text, page  # the data is there, escaped
        sign_in = await browser().get("/admin/sign-in", params={"next": MARKER})
        assert not RAW.search(sign_in.text)
        assert csrf_from(sign_in)
