"""Amazon SNS played on loopback: a signing key and certificate made by the openssl command,
messages signed as SNS signs them, and an https server that hands out the certificate and
counts subscription confirmations."""

from __future__ import annotations

import asyncio
import base64
import json
import shutil
import ssl
import subprocess
from collections import Counter
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from tidings.delivery.sns import string_to_sign

TOPIC = "arn:aws:sns:eu-west-1:123456789012:ses-events"


@dataclass
class FakeSns:
    """Signs messages with `key`, whose certificate `https://localhost:<port>/cert.pem` serves."""

    key: Path
    certificate: Path
    port: int = 0
    requests: Counter[str] = field(default_factory=Counter)

    @property
    def cert_url(self) -> str:
        return f"https://localhost:{self.port}/cert.pem"

    def sign(self, message: dict[str, Any], version: str = "2") -> dict[str, Any]:
        message = {**message, "SignatureVersion": version, "SigningCertURL": self.cert_url}
        digest = "-sha256" if version == "2" else "-sha1"
        signed = subprocess.run(
            ["openssl", "dgst", digest, "-sign", str(self.key)],
            input=string_to_sign(message),
            capture_output=True,
            check=True,
        ).stdout
        return {**message, "Signature": base64.b64encode(signed).decode()}

    def notification(
        self, body: dict[str, Any], *, message_id: str, **extra: Any
    ) -> dict[str, Any]:
        return {
            "Type": "Notification",
            "MessageId": message_id,
            "TopicArn": TOPIC,
            "Message": json.dumps(body),
            "Timestamp": datetime.now(UTC).isoformat().replace("+00:00", "Z"),
            **extra,
        }


def make_certificate(directory: Path) -> tuple[Path, Path]:
    if shutil.which("openssl") is None:
        pytest.skip("the openssl command is needed to play SNS")
    key, certificate = directory / "key.pem", directory / "cert.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key),
         "-out", str(certificate), "-days", "2", "-subj", "/CN=localhost",
         "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1"],
        capture_output=True,
        check=True,
    )  # fmt: skip
    return key, certificate


@asynccontextmanager
async def fake_sns(directory: Path) -> AsyncIterator[FakeSns]:
    key, certificate = make_certificate(directory)
    sns = FakeSns(key, certificate)
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(certificate, key)

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            path = head.split(b" ", 2)[1].decode()
            sns.requests[path.split("?")[0]] += 1
            body = (
                certificate.read_bytes()
                if path == "/cert.pem"
                else b"<ConfirmSubscriptionResponse/>"
            )
            writer.write(
                b"HTTP/1.1 200 OK\r\nContent-Length: " + str(len(body)).encode()
                + b"\r\nConnection: close\r\n\r\n" + body
            )  # fmt: skip
            await writer.drain()
        finally:
            writer.close()

    server = await asyncio.start_server(answer, "127.0.0.1", 0, ssl=context)
    sns.port = server.sockets[0].getsockname()[1]
    try:
        yield sns
    finally:
        server.close()
        await server.wait_closed()
