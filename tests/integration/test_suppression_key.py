"""The suppression key kept outside the database (issue 12, item 12): configured from the
environment or a file, adopted by an existing database without losing a suppression, and
refused at start when it does not match the stored hashes."""

from pathlib import Path

import pytest
from sqlalchemy import select

from tests.factories import make_settings
from tidings.audience.suppression_key import SuppressionKeyMismatch
from tidings.bootstrap import running
from tidings.domain import tokens
from tidings.storage import site_secrets
from tidings.storage.tables import subscribers, suppressions

KEY = "an-outside-key-of-32-characters!"


async def _stored_hashes(container: object) -> set[str]:
    db = container.db  # type: ignore[attr-defined]
    async with db.read() as conn:
        found = set((await conn.execute(select(suppressions.c.email_hash))).scalars())
        found |= set((await conn.execute(select(subscribers.c.email_hash))).scalars())
    return set(found)


async def test_an_existing_database_adopts_the_key_and_keeps_every_suppression(
    database_url: str,
) -> None:
    """Turning the protection on must not quietly drop a suppression (a complaint, a hard
    bounce, a deleted person's opt-out): mailing them again would be the worst outcome."""
    async with running(make_settings(database_url), apply_migrations=True) as container:
        await container.suppressions.suppress(
            "gone@example.org", reason="complaint", note=None, actor="t"
        )
        await container.subscribers.create(
            email="ada@example.org",
            name=None,
            tier="free",
            labels=[],
            attributes={},
            subscribe_to=[],
            actor="t",
        )
        await container.suppressions.suppress(
            "ada@example.org", reason="admin", note=None, actor="t"
        )
        async with container.db.read() as conn:
            site_secret = await site_secrets.get_secret(conn, "site")
    assert site_secret is not None

    settings = make_settings(database_url, privacy={"suppression_key": KEY})
    async with running(settings, apply_migrations=True) as container:
        assert await container.suppressions.is_suppressed("gone@example.org")
        assert await container.suppressions.is_suppressed("Ada@Example.org")
        assert not await container.suppressions.is_suppressed("new@example.org")
        stored = await _stored_hashes(container)
        (ada,) = await container.subscribers.search(text="ada")
    # A dump holds the site secret: guessing an address with it must not find a row.
    for address in ("gone@example.org", "ada@example.org"):
        assert tokens.keyed_email_hash(site_secret, address) not in stored
    assert tokens.keyed_email_hash(site_secret, "ada@example.org", KEY) in stored
    assert ada.suppressed, "the subscriber's hash and the suppression's still meet"

    async with running(settings, apply_migrations=True) as container:  # adopted once only
        assert await container.suppressions.is_suppressed("gone@example.org")


async def test_the_key_can_come_from_a_file(database_url: str, tmp_path: Path) -> None:
    """Secrets are often mounted as files (Docker, Kubernetes); the file and the variable must
    give the same hashes, so an operator can move between them."""
    key_file = tmp_path / "suppression.key"
    key_file.write_text(KEY + "\n")
    from_file = make_settings(database_url, privacy={"suppression_key_file": str(key_file)})
    async with running(from_file, apply_migrations=True) as container:
        await container.suppressions.suppress(
            "gone@example.org", reason="complaint", note=None, actor="t"
        )
    from_env = make_settings(database_url, privacy={"suppression_key": KEY})
    async with running(from_env, apply_migrations=True) as container:
        assert await container.suppressions.is_suppressed("gone@example.org")


@pytest.mark.parametrize("later", [{"suppression_key": "another-key-of-32-characters!!!!"}, {}])
async def test_a_different_or_missing_key_is_refused_at_start(
    database_url: str, later: dict[str, str]
) -> None:
    """With the wrong key every suppression would silently stop matching; better not to
    start, and say which setting to fix."""
    settings = make_settings(database_url, privacy={"suppression_key": KEY})
    async with running(settings, apply_migrations=True) as container:
        await container.suppressions.suppress(
            "gone@example.org", reason="complaint", note=None, actor="t"
        )
    with pytest.raises(SuppressionKeyMismatch, match=r"privacy\.suppression_key"):
        async with running(make_settings(database_url, privacy=later), apply_migrations=True):
            pass
