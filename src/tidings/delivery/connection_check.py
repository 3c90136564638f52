"""A provider's connection checked step by step (`tidings smtp check`, `tidings mailgun check`,
the dashboard's "Test connection"): what the relay or the API answered at each step, so that a
wrong port, a relay that never greets, a refused STARTTLS or login, or a bad key is named before
a campaign waits on it. Nothing is sent: the SMTP check ends with QUIT, the API check reads the
sending domain. What a failed SMTP step means is named by `smtp_failures`, the same words a
send's status uses when the relay fails it (SND-26)."""

from __future__ import annotations

import functools
import ssl
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Literal, TypeVar

import httpx
from aiosmtplib import SMTP, SMTPAuthenticationError, SMTPException, SMTPResponseException

from tidings.delivery.smtp_failures import NO_AUTH, NO_STARTTLS, Security, connect_failure

T = TypeVar("T")


@dataclass(frozen=True)
class CheckStep:
    """One step of a check: its name, whether it passed, what was seen, how long it took."""

    name: str
    ok: bool
    detail: str
    milliseconds: int


@dataclass(frozen=True)
class ConnectionCheck:
    """What `target` answered at each step, in order; the first failed step is the last."""

    provider: Literal["smtp", "mailgun"]
    target: str
    steps: tuple[CheckStep, ...]

    @property
    def ok(self) -> bool:
        return bool(self.steps) and all(step.ok for step in self.steps)


class _Steps:
    """Runs steps in order and stops at the first that fails."""

    def __init__(self) -> None:
        self.done: list[CheckStep] = []

    async def run(self, name: str, step: Callable[[], Awaitable[str]]) -> bool:
        started = time.monotonic()
        try:
            detail, ok = await step(), True
        except StepFailed as exc:
            detail, ok = str(exc), False
        elapsed = round((time.monotonic() - started) * 1000)
        self.done.append(CheckStep(name, ok, detail, elapsed))
        return ok


class StepFailed(Exception):
    """A step's failure, with the sentence that says what went wrong."""


async def check_smtp(
    *,
    host: str,
    port: int,
    security: Security,
    username: str | None,
    password: str | None,
    timeout_seconds: float,
    validate_certs: bool = True,
    tls_context: ssl.SSLContext | None = None,
) -> ConnectionCheck:
    """Connect (and TLS for `tls`), read the greeting, EHLO, STARTTLS (for `starttls`), log in
    (when a username is set), QUIT."""
    connection = SMTP(
        hostname=host,
        port=port,
        timeout=timeout_seconds,
        use_tls=security == "tls",
        start_tls=False,  # upgraded below, as its own step
        validate_certs=validate_certs,
        tls_context=tls_context,
    )
    steps = _Steps()
    failure = functools.partial(connect_failure, security=security, timeout_seconds=timeout_seconds)

    async def _command(call: Callable[[], Awaitable[T]]) -> T:
        try:
            return await call()
        except SMTPAuthenticationError as exc:
            raise StepFailed(failure(exc).sentence()) from None
        except SMTPResponseException as exc:
            raise StepFailed(f"refused: {_reply(exc)}") from None
        except (SMTPException, OSError) as exc:
            raise StepFailed(failure(exc).sentence()) from None

    async def connect() -> str:
        try:
            greeting = await connection.connect()
        except SMTPResponseException as exc:
            raise StepFailed(f"the relay refused the connection: {_reply(exc)}") from None
        except (SMTPException, OSError) as exc:
            raise StepFailed(failure(exc).sentence()) from None
        tls = ", TLS from the first byte" if security == "tls" else ""
        return f"connected{tls}; greeting {greeting.code} {_first_line(greeting.message)}"

    async def ehlo() -> str:
        answer = await _command(connection.ehlo)
        offered = sorted(name.upper() for name in connection.esmtp_extensions)
        return f"{answer.code}; offers {', '.join(offered) or 'no extensions'}"

    async def starttls() -> str:
        if not connection.supports_extension("starttls"):
            raise StepFailed(NO_STARTTLS.sentence())
        await _command(connection.starttls)
        await _command(connection.ehlo)  # the session starts again under TLS
        verified = "certificate verified" if validate_certs else "certificate not verified"
        return f"upgraded to TLS; {verified}"

    async def login() -> str:
        assert username is not None
        if not connection.supports_extension("auth"):
            raise StepFailed(NO_AUTH.sentence())
        answer = await _command(lambda: connection.login(username, password or ""))
        return f"{answer.code}; accepted as {username}"

    try:
        if await steps.run("connect", connect) and await steps.run("ehlo", ehlo):
            if security == "starttls" and not await steps.run("starttls", starttls):
                return _smtp_result(host, port, security, steps)
            if username is not None:
                await steps.run("login", login)
    finally:
        await _quit(connection)
    return _smtp_result(host, port, security, steps)


def _smtp_result(host: str, port: int, security: Security, steps: _Steps) -> ConnectionCheck:
    return ConnectionCheck("smtp", f"{host}:{port} ({security})", tuple(steps.done))


async def _quit(connection: SMTP) -> None:
    if not connection.is_connected:
        return
    try:
        await connection.quit()
    except (SMTPException, OSError):
        connection.close()


def _reply(exc: SMTPResponseException) -> str:
    return f"{exc.code} {_first_line(exc.message)}"


def _first_line(text: str) -> str:
    return text.strip().splitlines()[0] if text.strip() else ""


async def check_mailgun(
    *,
    api_key: str,
    domain: str,
    base_url: str,
    timeout_seconds: float,
    transport: httpx.AsyncBaseTransport | None = None,
) -> ConnectionCheck:
    """Read the sending domain with the API key (`GET /v3/domains/{domain}`): reachable, key
    accepted, domain on the account."""
    base = base_url.rstrip("/")
    steps = _Steps()

    async def read_domain() -> str:
        async with httpx.AsyncClient(
            auth=("api", api_key), timeout=timeout_seconds, transport=transport
        ) as client:
            try:
                response = await client.get(f"{base}/v3/domains/{domain}")
            except httpx.TimeoutException:
                raise StepFailed(f"no answer within {timeout_seconds:g} s") from None
            except httpx.HTTPError as exc:
                raise StepFailed(f"cannot connect ({type(exc).__name__})") from None
        if response.status_code == 401:
            raise StepFailed("401: the API key was refused (mailgun.api_key)")
        if response.status_code == 404:
            raise StepFailed(f"404: no domain {domain} on this account (mailgun.domain)")
        if response.status_code != 200:
            raise StepFailed(f"{response.status_code}: unexpected answer")
        state = _domain_state(response)
        return f"200; domain {domain} found, state {state}"

    await steps.run("api", read_domain)
    return ConnectionCheck("mailgun", f"{base} (domain {domain})", tuple(steps.done))


def _domain_state(response: httpx.Response) -> str:
    try:
        found = response.json().get("domain", {})
    except ValueError:
        return "unknown"
    return str(found.get("state", "unknown")) if isinstance(found, dict) else "unknown"
