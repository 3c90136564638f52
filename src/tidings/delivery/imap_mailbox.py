"""A bounce mailbox read over IMAP (PRV-6), for sites whose MX cannot deliver to `tidings
inbound` directly (listmonk's "bounce mailbox"): bytes out, no tables.

The mailbox is drained, as a bounce mailbox is meant to be: every message is fetched without
marking it read (`BODY.PEEK[]`), handed to the caller, and only once the caller has recorded
it flagged `\\Deleted` and expunged (by UID when the server has UIDPLUS, so mail that
arrived meanwhile is never touched). A crash in between leaves the message in place, read
again next time: the events it gives are idempotent. Nothing is lost by deleting: mail
tidings cannot read is kept in the database for the operator.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

from tidings.domain.errors import TidingsError

MAX_MESSAGES_PER_POLL = 500


class MailboxUnavailable(TidingsError):
    """The IMAP mailbox could not be reached, logged in to or opened (no address in it)."""

    code = "mailbox_unavailable"
    title = "The bounce mailbox could not be read"


@dataclass(frozen=True, slots=True)
class MailboxAccount:
    host: str
    port: int
    tls: bool
    user: str
    password: str
    mailbox: str = "INBOX"
    timeout_seconds: float = 30.0
    ca_file: str | None = None

    @property
    def where(self) -> str:
        return f"{self.host}:{self.port}/{self.mailbox}"


class OpenMailbox:
    """A logged-in, selected mailbox (from `open_mailbox`)."""

    def __init__(self, client: Any, account: MailboxAccount) -> None:
        self._client = client
        self._account = account

    async def uids(self) -> list[str]:
        """Every message's UID, oldest first (at most `MAX_MESSAGES_PER_POLL`)."""
        response = await self._command(self._client.uid_search("ALL", charset=None), "SEARCH")
        found = [
            part
            for line in response.lines[:-1]
            for part in _text(line).removeprefix("SEARCH").split()
            if part.isdigit()
        ]
        return found[:MAX_MESSAGES_PER_POLL]

    async def fetch(self, uid: str) -> bytes | None:
        """The message as stored (RFC 5322 bytes), without marking it read; None if gone."""
        response = await self._command(self._client.uid("fetch", uid, "(BODY.PEEK[])"), "FETCH")
        literals = [bytes(line) for line in response.lines if isinstance(line, bytearray)]
        return literals[0] if literals else None

    async def remove(self, uids: list[str]) -> None:
        """Delete these messages (flag each `\\Deleted`, then expunge)."""
        if not uids:
            return
        for uid in uids:  # one at a time: some servers (aioimaplib's test server) take no UID sets
            await self._command(self._client.uid("store", uid, "+FLAGS", "(\\Deleted)"), "STORE")
        if "UIDPLUS" in self._client.protocol.capabilities:
            # UIDs only grow, so first:last holds only messages listed by `uids` (and only
            # those flagged go): mail that arrived meanwhile is never touched.
            numbers = sorted(int(uid) for uid in uids)
            span = f"{numbers[0]}:{numbers[-1]}"
            await self._command(self._client.uid("expunge", span), "EXPUNGE")
        else:  # only what is flagged \Deleted goes, which is ours alone
            await self._command(self._client.expunge(), "EXPUNGE")

    async def _command(self, call: Any, name: str) -> Any:
        import aioimaplib

        try:
            response = await asyncio.wait_for(call, self._account.timeout_seconds)
        except (TimeoutError, aioimaplib.Abort, OSError) as exc:
            raise MailboxUnavailable(
                f"IMAP {name} on {self._account.where} failed ({type(exc).__name__})"
            ) from None
        if response.result != "OK":
            raise MailboxUnavailable(f"IMAP {name} on {self._account.where} was refused")
        return response


@asynccontextmanager
async def open_mailbox(account: MailboxAccount) -> AsyncIterator[OpenMailbox]:
    """Connect, log in and select `account`'s mailbox; log out at the end."""
    import aioimaplib  # loaded by `tidings inbound --imap` only, never by a worker

    client: Any
    if account.tls:
        context = ssl.create_default_context(cafile=account.ca_file)
        client = aioimaplib.IMAP4_SSL(
            account.host, account.port, timeout=account.timeout_seconds, ssl_context=context
        )
    else:
        client = aioimaplib.IMAP4(account.host, account.port, timeout=account.timeout_seconds)
    try:
        await client.wait_hello_from_server()
    except (TimeoutError, OSError, ssl.SSLError) as exc:
        _hang_up(client)
        raise MailboxUnavailable(
            f"cannot reach the IMAP server {account.host}:{account.port} ({type(exc).__name__})"
        ) from None
    opened = OpenMailbox(client, account)
    try:
        login = await asyncio.wait_for(
            client.login(account.user, account.password), account.timeout_seconds
        )
        if login.result != "OK":
            raise MailboxUnavailable(f"the IMAP server {account.host} refused the login")
        await opened._command(client.select(account.mailbox), "SELECT")
        yield opened
    finally:
        # The server may have gone first: then there is nothing to log out of.
        with contextlib.suppress(TimeoutError, OSError, aioimaplib.Abort):
            await asyncio.wait_for(client.logout(), account.timeout_seconds)
        _hang_up(client)


def _hang_up(client: Any) -> None:
    """Close the connection from our side. aioimaplib's logout leaves that to the server, whose
    close can arrive after a `--once` run's event loop has ended: the socket then outlives the
    loop (an unclosed-transport warning later, a descriptor held until then)."""
    transport = getattr(client.protocol, "transport", None)
    if transport is not None:
        transport.close()


def _text(line: object) -> str:
    return line.decode("ascii", "replace") if isinstance(line, bytes | bytearray) else str(line)
