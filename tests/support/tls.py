"""A self-signed certificate for loopback servers in tests (SMTP sinks, webhook receivers),
made with the openssl command; the test is skipped where that command is missing."""

from __future__ import annotations

import shutil
import ssl
import subprocess
from pathlib import Path

import pytest


def self_signed_certificate(directory: Path) -> tuple[Path, Path]:
    """A certificate and key for 127.0.0.1 and localhost, valid for a day."""
    if shutil.which("openssl") is None:
        pytest.skip("the openssl command is needed to make a test certificate")
    cert, key = directory / "cert.pem", directory / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
         "-subj", "/CN=localhost", "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost",
         "-keyout", str(key), "-out", str(cert)],
        check=True,
        capture_output=True,
    )  # fmt: skip
    return cert, key


def server_context(certificate: tuple[Path, Path]) -> ssl.SSLContext:
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(*certificate)
    return context


def client_context(certificate: tuple[Path, Path]) -> ssl.SSLContext:
    """A client context that trusts only this certificate."""
    return ssl.create_default_context(cafile=str(certificate[0]))
