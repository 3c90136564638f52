"""Two-factor sign-in (UI-2): TOTP set up from a QR code, a code accepted once, ten one-time
recovery codes stored hashed, and an owner's setting that requires it of everyone."""

import re
from datetime import UTC, datetime, timedelta

import pyotp
from sqlalchemy import select

from tests.factories import make_settings
from tests.support.admin_ui import PASSWORD, csrf_from, sign_in, signed_in, ui_app
from tests.support.cli import clean_env, tidings
from tests.support.clock import Clock
from tidings.storage.tables import admin_recovery_codes

_KEY = re.compile(r"Key: <code>([A-Z2-7]+)</code>")
_CODES = re.compile(r"\b([a-z2-9]{5}-[a-z2-9]{5})\b")


async def _enrol(client, clock: Clock) -> tuple[str, list[str]]:  # type: ignore[no-untyped-def]
    """Set up two-factor for the signed-in `client`: its secret and its recovery codes."""
    csrf = csrf_from(await client.get("/admin/account"))
    started = await client.post(
        "/admin/account/two-factor", data={"csrf_token": csrf, "current_password": PASSWORD}
    )
    assert started.status_code == 200
    assert "<svg" in started.text  # the QR code, inline
    secret = _KEY.search(started.text).group(1)  # type: ignore[union-attr]
    wrong = await client.post(
        "/admin/account/two-factor/confirm", data={"csrf_token": csrf, "code": "000000"}
    )
    assert wrong.status_code == 422
    code = pyotp.TOTP(secret).at(clock())
    confirmed = await client.post(
        "/admin/account/two-factor/confirm", data={"csrf_token": csrf, "code": code}
    )
    assert confirmed.status_code == 200, confirmed.text
    shown = confirmed.text.split("shown this once", 1)[1].split("</pre>", 1)[0]
    codes = _CODES.findall(shown)
    assert len(set(codes)) == 10
    return secret, codes


async def _code_step(client, code: str):  # type: ignore[no-untyped-def]
    form = await client.get("/admin/sign-in")
    return await client.post(
        "/admin/sign-in/code", data={"code": code, "csrf_token": csrf_from(form)}
    )


async def test_two_factor_sign_in_takes_a_code_once_and_recovery_codes_once(
    database_url: str,
) -> None:
    """A stolen password alone must not open the admin; a code seen over a shoulder must not
    work twice; a lost phone must not lock the operator out."""
    clock = Clock(datetime(2026, 12, 1, 12, 0, 10, tzinfo=UTC))
    async with ui_app(make_settings(database_url), clock=clock) as (browser, container):
        first = browser()
        await signed_in(first, container)
        secret, recovery = await _enrol(first, clock)
        async with container.db.read() as conn:
            stored = (await conn.execute(select(admin_recovery_codes))).mappings().all()
        assert len(stored) == 10
        assert not any(code in str(row) for row in stored for code in recovery)
        clock.advance(timedelta(seconds=60))
        laptop = browser()
        after_password = await sign_in(laptop)
        assert after_password.status_code == 200  # the code form, no session yet
        assert 'name="code"' in after_password.text
        assert (await laptop.get("/admin")).status_code == 303
        assert (await _code_step(laptop, "123456")).status_code == 401
        code = pyotp.TOTP(secret).at(clock())
        assert (await _code_step(laptop, code)).status_code == 303
        assert (await laptop.get("/admin")).status_code == 200
        replay = browser()
        assert (await sign_in(replay)).status_code == 200
        assert (await _code_step(replay, code)).status_code == 401  # the same code again
        assert (await _code_step(replay, recovery[0].upper())).status_code == 303
        again = browser()
        await sign_in(again)
        assert (await _code_step(again, recovery[0])).status_code == 401  # spent
        # Without the password step first, a code alone signs nobody in.
        stranger = browser()
        clock.advance(timedelta(seconds=60))
        fresh = pyotp.TOTP(secret).at(clock())
        assert (await _code_step(stranger, fresh)).status_code == 401
        # The password step expires.
        late = browser()
        await sign_in(late)
        clock.advance(timedelta(minutes=6))
        late_code = pyotp.TOTP(secret).at(clock())
        expired = await _code_step(late, late_code)
        assert expired.status_code == 401
        assert 'name="password"' in expired.text
        entries = await container.audit.list()
        assert "admin.two_factor.enabled" in [entry.action for entry in entries]
        failed = [entry for entry in entries if entry.action == "admin.sign_in.failed"]
        assert sum(entry.occurrences for entry in failed) >= 3


async def test_the_owner_can_require_two_factor_of_everyone(database_url: str) -> None:
    """With `admin_ui.require_two_factor`, an operator without it reaches only the page that
    sets it up, and cannot turn it off."""
    clock = Clock(datetime(2026, 12, 1, 12, 0, 10, tzinfo=UTC))
    settings = make_settings(database_url, admin_ui={"require_two_factor": True})
    async with ui_app(settings, clock=clock) as (browser, container):
        client = browser()
        await container.admins.create("operator@example.org", PASSWORD)
        assert (await sign_in(client)).status_code == 303
        blocked = await client.get("/admin/subscribers")
        assert blocked.status_code == 303
        assert blocked.headers["location"] == "/admin/account"
        assert "requires two-factor" in (await client.get("/admin/account")).text
        await _enrol(client, clock)
        assert (await client.get("/admin/subscribers")).status_code == 200
        account = await client.get("/admin/account")
        assert "Turn off two-factor" not in account.text
        refused = await client.post(
            "/admin/account/two-factor/off",
            data={"csrf_token": csrf_from(account), "current_password": PASSWORD},
        )
        assert refused.status_code == 422
        assert "required on this site" in refused.text


def test_reset_two_factor_from_the_command_line(tmp_path: object) -> None:
    """An operator who lost both phone and recovery codes gets back in through the owner."""
    env = {"TIDINGS_DATABASE_URL": f"sqlite:///{tmp_path}/cli.db", "TIDINGS_LOG_FORMAT": "json"}
    assert tidings("migrate", env=clean_env() | env).returncode == 0
    made = tidings(
        "admins",
        "create",
        "op@example.org",
        input=f"{PASSWORD}\n{PASSWORD}\n",
        env=clean_env() | env,
    )
    assert made.returncode == 0
    reset = tidings("admins", "reset-two-factor", "op@example.org", env=clean_env() | env)
    assert reset.returncode == 0, reset.output
    assert "Turned off two-factor" in reset.output


async def test_setting_up_two_factor_asks_for_the_current_password(database_url: str) -> None:
    """A stolen session alone must not put the account under an authenticator app the thief
    holds (issue 35 item 5, the reviewer's enrolment from a hijacked session)."""
    clock = Clock(datetime(2026, 12, 1, 12, 0, 10, tzinfo=UTC))
    async with ui_app(make_settings(database_url), clock=clock) as (browser, container):
        client = browser()
        csrf = await signed_in(client, container)
        for form in ({}, {"current_password": "not-the-password-at-all"}):
            refused = await client.post(
                "/admin/account/two-factor", data={"csrf_token": csrf, **form}
            )
            assert refused.status_code == 422
            assert "<svg" not in refused.text
        admin = await container.admins.find("operator@example.org")
        assert admin.totp_secret is None
        secret, _ = await _enrol(client, clock)
        assert secret
        account = await client.get("/admin/account")
        assert 'name="current_password"' in account.text.split("two-factor/off", 1)[1]


async def test_the_code_step_belongs_to_the_browser_that_passed_the_password(
    database_url: str,
) -> None:
    """The pending step, carried to another browser, is worth nothing there: whoever lifts the
    cookie between the password and the code cannot finish the sign-in elsewhere (issue 35
    item 5, the reviewer's replay of the pending cookie from a second browser)."""
    clock = Clock(datetime(2026, 12, 1, 12, 0, 10, tzinfo=UTC))
    async with ui_app(make_settings(database_url), clock=clock) as (browser, container):
        first = browser()
        await signed_in(first, container)
        secret, _ = await _enrol(first, clock)
        clock.advance(timedelta(seconds=60))
        laptop = browser()
        assert (await sign_in(laptop)).status_code == 200
        pending = laptop.cookies.get("tidings_admin_2fa")
        assert pending
        elsewhere = browser(client_ip="203.0.113.9")
        elsewhere.cookies.set("tidings_admin_2fa", pending, path="/admin")
        code = pyotp.TOTP(secret).at(clock())
        moved = await _code_step(elsewhere, code)
        assert moved.status_code == 401
        assert 'name="password"' in moved.text  # back to the first step
        assert (await elsewhere.get("/admin/account")).status_code == 303
        assert (await _code_step(laptop, code)).status_code == 303
        assert (await laptop.get("/admin/account")).status_code == 200


async def test_turning_two_factor_off_and_changing_the_password_ask_for_the_current_one(
    database_url: str,
) -> None:
    """A stolen session alone must not strip the account's second factor nor take it over
    by a new password (issue 35 item 5)."""
    clock = Clock(datetime(2026, 12, 1, 12, 0, 10, tzinfo=UTC))
    async with ui_app(make_settings(database_url), clock=clock) as (browser, container):
        client = browser()
        csrf = await signed_in(client, container)
        await _enrol(client, clock)
        wrong = "not-the-password-at-all"
        kept_on = await client.post(
            "/admin/account/two-factor/off", data={"csrf_token": csrf, "current_password": wrong}
        )
        assert kept_on.status_code == 422
        new = "a different horse battery staple"
        kept = await client.post(
            "/admin/account/password",
            data={
                "csrf_token": csrf,
                "current_password": wrong,
                "new_password": new,
                "confirm_password": new,
            },
        )
        assert kept.status_code == 422
        admin = await container.admins.find("operator@example.org")
        assert admin.totp_enabled_at is not None
        assert "current password is not right" in kept.text
        assert (await sign_in(browser())).status_code == 200  # the old password, then the code
