"""The SMTP relay provider (PRV-1): a bounded pool of reused connections.

aiosmtplib opens each connection (TLS, STARTTLS, EHLO, AUTH); `smtp_session` runs its
transactions, pipelined where the relay offers it (RFC 2920). Each `send` runs one SMTP
transaction (MAIL, one RCPT per recipient, DATA, the content) on a pooled connection and
classifies the outcome at the boundary (HOUSE rule 8): a refused recipient is
reported in `SendResult.rejected`; a refused or lost transaction raises `TemporaryFailure`
(4xx, dropped connection, timeout) or `PermanentFailure` (5xx on DATA).

A refusal of the sender is no recipient's failure and raises `SenderRefused`: a 5xx to MAIL; a
RCPT refused for authentication or relaying (530, 535, 5.7.0, 5.7.8, "relay access denied");
a 5.7.x policy refusal before this relay ever accepted a recipient; the same 5xx refusal
(code and enhanced status, but never 5.1.x or 5.2.x, the recipient's own) for
`SAME_REFUSAL_DOMAINS` different recipient domains with no acceptance in between (a
`SenderWatch` per provider); and a login refused or a certificate not trusted at connect,
which no retry mends (`smtp_failures`).

A pooled connection may have been closed by the relay while it sat idle. If that shows up
before DATA was issued, nothing was handed over, so the transaction is replayed once on a
fresh connection. Once the content has started it never is: the relay may already have accepted the
message, and sending it twice is worse than retrying it later. Nothing here logs: reply text
echoes addresses. Exception details carry only the command, reply code and enhanced status.
"""

from __future__ import annotations

import asyncio
import re
import ssl

from aiosmtplib import SMTP, SMTPException, SMTPHeloError

from tidings.delivery.provider import (
    Envelope,
    PermanentFailure,
    ProviderUnreachable,
    Rejection,
    SenderRefused,
    SendResult,
    TemporaryFailure,
    UncertainDelivery,
)
from tidings.delivery.smtp_failures import (
    Security,
    SenderWatch,
    connect_failure,
    reply_summary,
    sender_refusal,
)
from tidings.delivery.smtp_session import (
    START_INPUT,
    Reply,
    SessionLost,
    SmtpSession,
    content,
    path,
)

# 421 means the relay is closing the channel: the connection is gone, not the message refused.
SERVICE_CLOSING = 421
QUEUE_ID = re.compile(r"queued as\s+<?([\w.@-]+)>?", re.IGNORECASE)
MAX_DETAIL_LENGTH = 300


class _DroppedBeforeData(Exception):
    """The connection died before DATA was issued: safe to replay on a fresh connection."""


class _Stage:
    """How far one send got, to classify a deadline by what the relay actually received."""

    __slots__ = ("connected", "data_issued")

    def __init__(self) -> None:
        self.connected = False
        self.data_issued = False

    def deadline_failure(self) -> Exception:
        if self.data_issued:
            return UncertainDelivery("the deadline struck after DATA was issued")
        if not self.connected:
            return ProviderUnreachable(
                "the relay did not greet within the deadline", cause="no greeting in time"
            )
        return TemporaryFailure("the deadline struck before DATA was issued")


class SmtpProvider:
    """Sends envelopes through one SMTP relay over at most `pool_size` reused connections."""

    name = "smtp"

    def __init__(
        self,
        *,
        host: str,
        port: int,
        username: str | None = None,
        password: str | None = None,
        security: Security = "starttls",
        timeout_seconds: float = 30.0,
        pool_size: int = 4,
        validate_certs: bool = True,
        tls_context: ssl.SSLContext | None = None,
        local_hostname: str | None = None,
        deadline_seconds: float | None = None,
    ) -> None:
        if pool_size < 1:
            raise ValueError("pool_size must be at least 1")
        if security not in ("none", "starttls", "tls"):
            raise ValueError(f"unknown SMTP security mode: {security!r}")
        self._host = host
        self._port = port
        self._username = username
        self._password = password
        self._security: Security = security
        self._timeout = timeout_seconds
        self._validate_certs = validate_certs
        self._tls_context = tls_context
        self._local_hostname = local_hostname
        self._deadline = deadline_seconds  # one transaction, once it holds a connection
        # A connection is either idle here or held by one sender inside the semaphore, and a
        # new one is opened only when none is idle, so at most `pool_size` ever exist.
        self._slots = asyncio.Semaphore(pool_size)
        self._idle: list[SmtpSession] = []
        self._closed = False
        self._watch = SenderWatch()

    @property
    def endpoint(self) -> str:
        """host:port of the relay, to name it when it fails (SND-26); no credentials."""
        return f"{self._host}:{self._port}"

    async def send(self, envelope: Envelope) -> SendResult:
        """One transaction on a pooled connection. The deadline starts once a connection slot
        is held (waiting for the pool is not the relay's slowness), and when it strikes, what
        the relay got decides (PRV-1): nothing yet (no greeting, or no DATA issued) is a
        temporary failure, retried later; a message handed over by DATA without a reply is
        `UncertainDelivery`, never resent automatically."""
        if self._closed:
            raise TemporaryFailure("the SMTP provider is closed")
        try:
            async with self._slots:
                stage = _Stage()
                try:
                    async with asyncio.timeout(self._deadline):
                        return await self._send_pooled(envelope, stage)
                except TimeoutError:
                    raise stage.deadline_failure() from None
        except (ProviderUnreachable, SenderRefused) as exc:
            exc.endpoint = exc.endpoint or self.endpoint  # named with the relay (SND-26)
            raise

    async def _send_pooled(self, envelope: Envelope, stage: _Stage) -> SendResult:
        connection, reused = await self._checkout()
        stage.connected = True
        try:
            return await self._send_on(connection, envelope, stage)
        except _DroppedBeforeData:
            if not reused:
                raise TemporaryFailure("connection lost before DATA") from None
        # The idle connection had died unnoticed; nothing was handed over, so replay once.
        stage.connected = False
        connection = await self._connect()
        stage.connected = True
        try:
            return await self._send_on(connection, envelope, stage)
        except _DroppedBeforeData:
            raise TemporaryFailure("connection lost before DATA") from None

    async def close(self) -> None:
        """Quit every idle connection; connections in use are closed when they come back."""
        self._closed = True
        idle, self._idle = self._idle, []
        await asyncio.gather(*(self._quit(connection) for connection in idle))

    async def _send_on(
        self, connection: SmtpSession, envelope: Envelope, stage: _Stage
    ) -> SendResult:
        """One transaction; the connection goes back to the pool only in a known-clean state,
        and not after the relay deferred us (a 4xx such as 452, too many recipients on this
        connection): the next try goes out on a fresh connection."""
        try:
            result = await self._transact(connection, envelope, stage)
        except TemporaryFailure:
            connection.close()
            raise
        except PermanentFailure:  # SenderRefused too: refused and reset, the connection is clean
            self._checkin(connection)
            raise
        except BaseException:
            # Cancelled (a caller's deadline) or something unexpected mid-command: the
            # conversation state is unknown, so this connection must never carry another message.
            connection.close()
            raise
        if any(not rejection.permanent for rejection in result.rejected.values()):
            connection.close()
        else:
            self._checkin(connection)
        return result

    async def _transact(
        self, connection: SmtpSession, envelope: Envelope, stage: _Stage
    ) -> SendResult:
        """MAIL, RCPT and DATA (one round trip where the relay pipelines), then the content.
        Before the content nothing can have been accepted; from then on it may have been."""
        mail_options, encoding = self._mail_options(connection, envelope)
        try:
            mail = b" ".join([b"MAIL FROM:" + path(envelope.sender, encoding), *mail_options])
        except ValueError:
            raise SenderRefused(
                "the sender address cannot be sent over SMTP", cause="sender address unusable"
            ) from None
        sendable: list[str] = []
        rcpt_lines: list[bytes] = []
        rejected: dict[str, Rejection] = {}
        for recipient in envelope.recipients:
            try:
                rcpt_lines.append(b"RCPT TO:" + path(recipient, encoding))
            except ValueError:
                rejected[recipient] = Rejection(
                    permanent=True, status=None, detail="address cannot be sent over SMTP"
                )
            else:
                sendable.append(recipient)
        if not sendable:
            return SendResult(accepted=[], rejected=rejected)
        try:
            replies = await connection.envelope(mail, rcpt_lines)
        except TimeoutError:
            # A slow relay is not a dead connection, but this one is no longer in step.
            raise TemporaryFailure("timed out waiting for a reply before DATA") from None
        except (SessionLost, OSError):
            raise _DroppedBeforeData from None
        if replies.mail.code == SERVICE_CLOSING:
            raise _DroppedBeforeData
        accepted = _recipient_outcomes(sendable, replies.recipients, rejected)
        refused_us = None
        if _is_success(replies.mail.code):
            refused_us = self._watch.observe(sendable, replies.recipients, accepted)
        started = replies.data is not None and replies.data.code == START_INPUT
        if not _is_success(replies.mail.code) or not accepted:
            if started:  # a relay that opened DATA anyway gets an empty one, ended at once
                await self._end_empty_data(connection)
            await self._reset_or_drop(connection)
            if not _is_success(replies.mail.code):
                raise _transaction_failure("MAIL", replies.mail)
            if refused_us is not None:
                raise SenderRefused(f"RCPT refused: {refused_us}", cause=refused_us)
            return SendResult(accepted=[], rejected=rejected)
        if replies.data is None or not started:
            refusal = replies.data or Reply(SERVICE_CLOSING, "")
            if refusal.code == SERVICE_CLOSING:
                raise _DroppedBeforeData
            await self._reset_or_drop(connection)
            raise _transaction_failure("DATA", refusal)

        # From here the relay may accept the message at any moment: never replay.
        stage.data_issued = True
        try:
            reply = await connection.content(content(envelope.data))
        except TimeoutError:
            connection.close()
            raise UncertainDelivery("timed out waiting for the DATA reply") from None
        except (SessionLost, OSError):
            connection.close()
            raise UncertainDelivery("connection lost during DATA") from None
        if not _is_success(reply.code):
            await self._reset_or_drop(connection)
            raise _transaction_failure("DATA", reply)
        queue_id = QUEUE_ID.search(reply.text)
        return SendResult(
            accepted=accepted,
            rejected=rejected,
            provider_message_id=queue_id.group(1) if queue_id else None,
        )

    async def _end_empty_data(self, connection: SmtpSession) -> None:
        try:
            await connection.content(b".\r\n")
        except (TimeoutError, SessionLost, OSError):
            connection.close()

    def _mail_options(self, connection: SmtpSession, envelope: Envelope) -> tuple[list[bytes], str]:
        """MAIL parameters the relay advertised: SIZE, 8BITMIME, and SMTPUTF8 when needed."""
        options: list[bytes] = []
        if connection.supports("size"):
            options.append(b"SIZE=%d" % len(envelope.data))
        if not envelope.data.isascii() and connection.supports("8bitmime"):
            options.append(b"BODY=8BITMIME")
        addresses = [envelope.sender, *envelope.recipients]
        if all(address.isascii() for address in addresses):
            return options, "ascii"
        if not connection.supports("smtputf8"):
            raise PermanentFailure("the relay does not support internationalised addresses")
        options.append(b"SMTPUTF8")
        return options, "utf-8"

    async def _checkout(self) -> tuple[SmtpSession, bool]:
        """An idle connection that still looks alive (reused=True), else a new one."""
        while self._idle:
            connection = self._idle.pop()
            if connection.is_connected:
                return connection, True
            connection.close()
        return await self._connect(), False

    def _checkin(self, connection: SmtpSession) -> None:
        if connection.is_connected and not self._closed:
            self._idle.append(connection)
        else:
            connection.close()

    async def _connect(self) -> SmtpSession:
        """Open, secure, authenticate and greet one connection (aiosmtplib), then take it over
        for its transactions. A failure no retry mends (a login refused, a certificate not
        trusted, the wrong TLS mode) is `SenderRefused`; any other is temporary."""
        connection = SMTP(
            hostname=self._host,
            port=self._port,
            username=self._username,
            password=self._password,
            local_hostname=self._local_hostname,
            timeout=self._timeout,
            use_tls=self._security == "tls",
            start_tls=self._security == "starttls",
            validate_certs=self._validate_certs,
            tls_context=self._tls_context,
        )
        try:
            await connection.connect()
            if connection.is_ehlo_or_helo_needed:
                try:
                    await connection.ehlo()
                except SMTPHeloError:
                    await connection.helo()
            return SmtpSession(connection, timeout=self._timeout)
        except (SMTPException, SessionLost, OSError) as exc:
            # A refused greeting or login is the relay's or the configuration's problem, never
            # the message's: failing it permanently would bounce good addresses.
            connection.close()
            fault = connect_failure(exc, security=self._security, timeout_seconds=self._timeout)
            status = getattr(exc, "code", None)
            status = status if isinstance(status, int) and status >= 400 else None
            if fault.lasting:
                raise SenderRefused(
                    f"cannot use the relay: {fault.cause}", cause=fault.cause, status=status
                ) from None
            raise ProviderUnreachable(
                f"cannot connect to the relay: {fault.cause}", status=status, cause=fault.cause
            ) from None
        except BaseException:
            connection.close()
            raise

    async def _reset_or_drop(self, connection: SmtpSession) -> None:
        """RSET after a refused command so the connection can be reused; drop it if that fails."""
        if not connection.is_connected:
            return
        try:
            if _is_success((await connection.command(b"RSET")).code):
                return
        except (TimeoutError, SessionLost, OSError):
            pass
        connection.close()

    async def _quit(self, connection: SmtpSession) -> None:
        try:
            if connection.is_connected:
                await connection.command(b"QUIT")
        except (TimeoutError, SessionLost, OSError):
            pass
        finally:
            connection.close()


def _recipient_outcomes(
    recipients: list[str], replies: list[Reply], rejected: dict[str, Rejection]
) -> list[str]:
    """The accepted recipients; each refused one into `rejected`, settled on its own (never
    for the envelope). A 421 is the relay closing the channel, not a refusal."""
    accepted: list[str] = []
    for recipient, reply in zip(recipients, replies, strict=False):
        if reply.code == SERVICE_CLOSING:
            raise _DroppedBeforeData
        if _is_success(reply.code):
            accepted.append(recipient)
        else:
            rejected[recipient] = Rejection(
                permanent=_is_permanent(reply.code),
                status=reply.code,
                detail=reply.text[:MAX_DETAIL_LENGTH],
            )
    return accepted


def _is_success(code: int) -> bool:
    return 200 <= code <= 299


def _is_permanent(code: int) -> bool:
    return 500 <= code <= 599


def _transaction_failure(command: str, reply: Reply) -> Exception:
    summary = reply_summary(reply.code, reply.text)
    detail = f"{command} refused: {summary}"
    if command == "MAIL" and _is_permanent(reply.code):
        # The sender refused: every message of the send would be, whoever it is for.
        cause = sender_refusal(reply.code, reply.text) or f"sender refused, {summary}"
        return SenderRefused(detail, cause=cause, status=reply.code)
    if _is_permanent(reply.code):
        return PermanentFailure(detail, status=reply.code)
    return TemporaryFailure(detail, status=reply.code)
