"""The audit log cannot be flooded by strangers and keeps entries for a set time (issue 35
item 5, UI-2)."""

from __future__ import annotations

from datetime import timedelta

from argon2 import PasswordHasher

from tests.factories import make_settings
from tests.support.admin_ui import PASSWORD, ui_app
from tests.support.clock import Clock
from tidings.access.admins import AdminAccounts, SessionPolicy
from tidings.access.audit import MOST_REPEATED_TARGETS, OTHER_TARGETS, AuditLog
from tidings.access.passwords import PasswordHashing
from tidings.access.sign_in_limits import SignInClient, SignInLimiter, SignInLimits
from tidings.access.two_factor import TwoFactor
from tidings.domain.audit import Actor
from tidings.domain.errors import Unauthenticated
from tidings.storage.database import Database

OWNER = "owner@example.org"
UNLIMITED = SignInLimits(
    per_client=10**6, per_ip=10**6, window_seconds=900, per_account=10**6, max_delay_seconds=60
)


def _accounts(db: Database, clock: Clock, audit: AuditLog) -> AdminAccounts:
    def secret() -> str:
        return "s" * 32

    hour = timedelta(hours=1)
    # A cheap argon2: the test is about the log, not the hashing.
    hasher = PasswordHasher(time_cost=1, memory_cost=64, parallelism=1)
    return AdminAccounts(
        db,
        clock,
        policy=SessionPolicy(idle_timeout=hour, absolute_timeout=hour),
        limiter=SignInLimiter(db, clock, secret, UNLIMITED),
        passwords=PasswordHashing(2, hasher=hasher),
        audit=audit,
        two_factor=TwoFactor(db, clock, secret, audit, issuer="tests"),
    )


async def _fail(accounts: AdminAccounts, email: str, n: int) -> None:
    try:
        await accounts.sign_in(
            email, "wrong-password", client=SignInClient(ip=f"198.51.100.{n % 250}"), browser="b"
        )
    except Unauthenticated:
        return
    raise AssertionError("a wrong password signed in")


async def test_failed_sign_ins_are_counted_not_written_one_row_each(db: Database) -> None:
    """Anyone can post the sign-in form: 60 guesses at the owner and 240 at made-up accounts
    must not write 300 rows (the reviewer flooded the log with failed sign-ins), yet the owner
    still reads how many guesses each account took."""
    clock = Clock()
    audit = AuditLog(db, clock)
    accounts = _accounts(db, clock, audit)
    owner = await accounts.create(OWNER, PASSWORD)
    for n in range(60):
        await _fail(accounts, OWNER, n)
    for n in range(240):
        await _fail(accounts, f"made-up-{n}@example.org", n)
    failed = await audit.list(action="admin.sign_in.failed", limit=1000)
    assert len(failed) == MOST_REPEATED_TARGETS + 1
    assert sum(entry.occurrences for entry in failed) == 300
    by_target = {entry.target: entry for entry in failed}
    assert by_target[f"admin:{owner.id}"].occurrences == 60
    assert by_target[OTHER_TARGETS].occurrences == 300 - 60 - (MOST_REPEATED_TARGETS - 1)
    assert not any("made-up" in str(entry) for entry in failed)
    # The next hour begins new entries: the log shows when the guessing happened.
    clock.advance(timedelta(hours=1))
    await _fail(accounts, OWNER, 1)
    latest = (await audit.list(action="admin.sign_in.failed", limit=1))[0]
    assert (latest.target, latest.occurrences) == (f"admin:{owner.id}", 1)


async def test_entries_older_than_the_retention_are_purged(db: Database) -> None:
    """The log holds operators' addresses and actions: it is kept as long as the owner set,
    not for ever, and a recent entry survives the purge."""
    clock = Clock()
    audit = AuditLog(db, clock, retention=timedelta(days=30))
    await audit.record(Actor.operator(1, "192.0.2.1"), "campaign.send", "campaign:1")
    clock.advance(timedelta(days=20))
    await audit.record(Actor.operator(1, "192.0.2.1"), "campaign.send", "campaign:2")
    assert await audit.purge() == 0
    clock.advance(timedelta(days=11))
    assert await audit.purge() == 1
    assert [entry.target for entry in await audit.list()] == ["campaign:2"]


async def test_the_retention_setting_reaches_the_purge(database_url: str) -> None:
    """`admin_ui.audit_retention_days` is what the worker's purge keeps: an owner who sets 7
    days keeps a week of entries, not the default year."""
    clock = Clock()
    settings = make_settings(database_url, admin_ui={"audit_retention_days": 7})
    async with ui_app(settings, clock=clock) as (_, container):
        await container.audit.record(Actor.command_line("root"), "campaign.send", "campaign:1")
        clock.advance(timedelta(days=6))
        assert await container.audit.purge() == 0
        clock.advance(timedelta(days=2))
        assert await container.audit.purge() == 1
        assert await container.audit.list() == []
