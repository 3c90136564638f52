"""DKIM signing of outgoing mail by tidings itself (PRV-7), with dkimpy.

For relays that do not sign: each message is signed just before the per-recipient provider
(SMTP, or the local capture, so `tidings outbox show ID --raw` shows what a relay would get)
takes it. Canonicalisation is relaxed/relaxed, which survives the header re-folding and
whitespace changes relays make. The signature covers the headers a reader and a mailbox
provider rely on; one the message lacks (Cc, Reply-To) is signed as absent, so it cannot be
added in transit, and From is over-signed (listed twice) so a second From cannot either.
Batch HTTP providers sign with the keys set up at the provider, not here.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from tidings.delivery.provider import Envelope, PerRecipientProvider, SendResult
from tidings.domain.errors import InvalidInput

SIGNED_HEADERS: tuple[bytes, ...] = (
    b"from",
    b"from",  # over-signed: no second From can be added without breaking the signature
    b"to",
    b"cc",
    b"reply-to",
    b"subject",
    b"date",
    b"message-id",
    b"mime-version",
    b"content-type",
    b"content-transfer-encoding",
    b"list-id",
    b"list-unsubscribe",
    b"list-unsubscribe-post",
    b"feedback-id",
    b"in-reply-to",
    b"references",
)
_CANONICALISATION = (b"relaxed", b"relaxed")


class DkimSigner:
    """Signs serialised messages with one selector, domain and RSA key."""

    def __init__(self, *, selector: str, domain: str, private_key: bytes) -> None:
        # dkimpy is loaded only where signing is configured: never by other processes.
        from dkim.crypto import UnparsableKeyError, parse_pem_private_key

        try:
            parse_pem_private_key(private_key)
        except (UnparsableKeyError, ValueError, IndexError) as exc:
            raise InvalidInput(
                "dkim.private_key_file must hold a PEM RSA private key", field="private_key_file"
            ) from exc
        self.selector = selector.encode("ascii")
        self.domain = domain.encode("ascii")
        self._key = private_key

    @classmethod
    def from_file(cls, *, selector: str, domain: str, path: Path) -> DkimSigner:
        try:
            key = path.read_bytes()
        except OSError as exc:
            raise InvalidInput(
                f"dkim.private_key_file: cannot read {path}: {exc.strerror}",
                field="private_key_file",
            ) from None
        return cls(selector=selector, domain=domain, private_key=key)

    def sign(self, message: bytes) -> bytes:
        """`message` with a DKIM-Signature header in front."""
        import dkim

        signature: bytes = dkim.sign(
            message,
            self.selector,
            self.domain,
            self._key,
            canonicalize=_CANONICALISATION,
            include_headers=list(SIGNED_HEADERS),
            linesep=b"\r\n",
        )
        return signature + message


class DkimSigningProvider:
    """A per-recipient provider that signs each message, then hands it to `inner`."""

    def __init__(self, inner: PerRecipientProvider, signer: DkimSigner) -> None:
        self.inner = inner
        self.signer = signer
        self.name = inner.name

    async def send(self, envelope: Envelope) -> SendResult:
        return await self.inner.send(replace(envelope, data=self.signer.sign(envelope.data)))

    async def close(self) -> None:
        await self.inner.close()
