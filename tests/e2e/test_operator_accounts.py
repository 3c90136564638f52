"""Operators manage accounts (UI-2): their own password, the owner's operators page, the
command line, and the audit log of it all."""

import json
from pathlib import Path

import structlog

from tests.factories import make_settings
from tests.support.admin_ui import PASSWORD, sign_in, signed_in, ui_app
from tests.support.cli import clean_env, tidings
from tidings.domain.roles import Role

NEW_PASSWORD = "mellow quince under lantern"


async def test_changing_your_password_ends_your_other_sessions(database_url: str) -> None:
    """Whoever might have learnt the old password is signed out; the one changing stays."""
    async with ui_app(make_settings(database_url)) as (browser, container):
        laptop, phone = browser(), browser()
        csrf = await signed_in(laptop, container)
        assert (await sign_in(phone)).status_code == 303
        wrong = await laptop.post(
            "/admin/account/password",
            data={
                "csrf_token": csrf,
                "current_password": "not the password at all",
                "new_password": NEW_PASSWORD,
                "confirm_password": NEW_PASSWORD,
            },
        )
        assert wrong.status_code == 422
        assert "current password is not right" in wrong.text
        weak = await laptop.post(
            "/admin/account/password",
            data={
                "csrf_token": csrf,
                "current_password": PASSWORD,
                "new_password": "password1234",
                "confirm_password": "password1234",
            },
        )
        assert weak.status_code == 422
        assert "common passwords" in weak.text
        assert (await phone.get("/admin")).status_code == 200  # nothing changed yet
        changed = await laptop.post(
            "/admin/account/password",
            data={
                "csrf_token": csrf,
                "current_password": PASSWORD,
                "new_password": NEW_PASSWORD,
                "confirm_password": NEW_PASSWORD,
            },
        )
        assert changed.status_code == 200
        assert "Password changed" in changed.text
        assert (await laptop.get("/admin")).status_code == 200
        assert (await phone.get("/admin")).status_code == 303
        assert (await sign_in(browser())).status_code == 401
        assert (await sign_in(browser(), password=NEW_PASSWORD)).status_code == 303


async def test_the_owner_adds_disables_and_removes_operators(database_url: str) -> None:
    """Staff come and go: the owner manages them in the UI, and can never remove the last
    owner (nobody could manage operators afterwards)."""
    async with ui_app(make_settings(database_url)) as (browser, container):
        owner = browser()
        csrf = await signed_in(owner, container, "owner@example.org")
        added = await owner.post(
            "/admin/operators",
            data={
                "csrf_token": csrf,
                "email": "Editor@Example.org",
                "role": "editor",
                "password": PASSWORD,
            },
        )
        assert added.status_code == 303, added.text
        weak = await owner.post(
            "/admin/operators",
            data={"csrf_token": csrf, "email": "x@example.org", "role": "viewer", "password": "a"},
        )
        assert weak.status_code == 422
        assert "(password)" in weak.text
        listing = await owner.get("/admin/operators")
        assert "editor@example.org" in listing.text
        editor_row = await container.admins.find("editor@example.org")
        assert editor_row.role == "editor"
        editor = browser()
        assert (await sign_in(editor, "editor@example.org")).status_code == 303
        assert (await editor.get("/admin/operators")).status_code == 403
        disabled = await owner.post(
            f"/admin/operators/{editor_row.id}/disable", data={"csrf_token": csrf}
        )
        assert disabled.status_code == 303
        assert (await editor.get("/admin")).status_code == 303  # the session ended at once
        assert (await sign_in(browser(), "editor@example.org")).status_code == 401
        await owner.post(f"/admin/operators/{editor_row.id}/enable", data={"csrf_token": csrf})
        assert (await sign_in(browser(), "editor@example.org")).status_code == 303
        owner_row = await container.admins.find("owner@example.org")
        for action in ("disable", "delete"):
            refused = await owner.post(
                f"/admin/operators/{owner_row.id}/{action}", data={"csrf_token": csrf}
            )
            assert refused.status_code == 409
            assert "only enabled owner" in refused.text
        demoted = await owner.post(
            f"/admin/operators/{owner_row.id}/role", data={"csrf_token": csrf, "role": "viewer"}
        )
        assert demoted.status_code == 409
        removed = await owner.post(
            f"/admin/operators/{editor_row.id}/delete", data={"csrf_token": csrf}
        )
        assert removed.status_code == 303
        assert [row.email for row in await container.admins.list()] == ["owner@example.org"]
        audit = await owner.get("/admin/audit", params={"action": "admin."})
        for action in ("admin.created", "admin.disabled", "admin.enabled", "admin.deleted"):
            assert action in audit.text
        only_sign_ins = await owner.get("/admin/audit", params={"action": "admin.sign_in"})
        assert "admin.deleted" not in only_sign_ins.text


async def test_admin_requests_are_logged_under_their_route_with_the_operator(
    database_url: str,
) -> None:
    """Operators' actions must be traceable in the logs by id, and every /admin page must be
    measured under its route rather than lumped together as `unmatched`."""
    async with ui_app(make_settings(database_url)) as (browser, container):
        client = browser()
        await signed_in(client, container)
        admin = await container.admins.find("operator@example.org")
        capture = structlog.testing.LogCapture()
        saved = structlog.get_config()
        # capture_logs() drops bound context; here the context is what is checked.
        structlog.configure(
            processors=[structlog.contextvars.merge_contextvars, capture],
            wrapper_class=structlog.make_filtering_bound_logger(0),  # whatever a CLI test set
        )
        try:
            await client.get("/admin/subscribers/987654")
            await client.get("/admin/campaigns")
        finally:
            structlog.configure(**saved)
        events = capture.entries
        requests = [event for event in events if event["event"] == "http.request"]
        assert [event["route"] for event in requests] == [
            "/admin/subscribers/{subscriber_id}",
            "/admin/campaigns",
        ]
        assert all(event["admin_id"] == admin.id for event in requests)
        assert all("operator@example.org" not in json.dumps(event) for event in events)


def test_operators_are_managed_from_the_command_line(tmp_path: Path) -> None:
    """The owner's tools on the server: reset a password, disable, enable, change a role,
    delete, and read the audit log, which records each as the login that ran it."""
    env = {"TIDINGS_DATABASE_URL": f"sqlite:///{tmp_path}/cli.db", "TIDINGS_LOG_FORMAT": "json"}

    def ok(*args: str, given: str | None = None) -> str:
        result = tidings(*args, input=given, env=clean_env() | env)
        assert result.returncode == 0, (args, result.output)
        return result.output

    twice = f"{PASSWORD}\n{PASSWORD}\n"
    ok("migrate")
    ok("admins", "create", "owner@example.org", given=twice)
    ok("admins", "create", "ed@example.org", "--role", "editor", given=twice)
    bad_role = tidings("admins", "create", "x@example.org", "--role", "god", env=clean_env() | env)
    assert bad_role.returncode == 2
    assert "--role" in bad_role.output
    weak = tidings(
        "admins",
        "set-password",
        "ed@example.org",
        input=" " * 12 + "\n" + " " * 12 + "\n",
        env=clean_env() | env,
    )
    assert weak.returncode == 2
    assert "whitespace" in weak.output
    ok("admins", "set-password", "ed@example.org", given=f"{NEW_PASSWORD}\n{NEW_PASSWORD}\n")
    ok("admins", "set-role", "ed@example.org", "viewer")
    ok("admins", "disable", "ed@example.org")
    listed = json.loads(ok("admins", "list", "--json"))
    assert [(a["email"], a["role"], a["disabled"]) for a in listed] == [
        ("owner@example.org", "owner", False),
        ("ed@example.org", "viewer", True),
    ]
    ok("admins", "enable", "ed@example.org")
    last_owner = tidings("admins", "disable", "owner@example.org", env=clean_env() | env)
    assert last_owner.returncode == 1
    assert "only enabled owner" in last_owner.output
    ok("admins", "delete", "ed@example.org", "--yes")
    entries = json.loads(ok("audit", "list", "--json"))
    assert [entry["action"] for entry in entries] == [
        "admin.deleted",
        "admin.enabled",
        "admin.disabled",
        "admin.role_changed",
        "admin.password_reset",
        "admin.created",
        "admin.created",
    ]
    assert all(entry["actor"].startswith("cli:") for entry in entries)
    assert "@" not in json.dumps(entries)  # ids, never addresses
    filtered = json.loads(ok("audit", "list", "--json", "--action", "admin.created"))
    assert len(filtered) == 2
    assert Role.VIEWER == "viewer"
