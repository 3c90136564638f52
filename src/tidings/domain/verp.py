"""VERP return paths (PRV-6): the envelope sender of each campaign message names its
recipient row, so a bounce the relay or a remote MTA sends back says whom it is about even
when it quotes no address tidings can read.

`bounces@mail.example.org` becomes `bounces+<recipient id>-<mac>@mail.example.org`; the MAC
(16 hex characters of an HMAC keyed with the site secret) is what authenticates a report by
mail (PRV-6): only the holder of the site secret can name a row, so a report acts on the row
its verified address names and nothing else. Hex and digits only: MTAs may change the case
of a local part.
"""

from __future__ import annotations

import hashlib
import hmac
import re

MAC_LENGTH = 16
_TAG = re.compile(rf"^([0-9]{{1,19}})-([0-9a-f]{{{MAC_LENGTH}}})$")
# Transactional mail (confirmations, welcomes, the API's): `t<mail job id>-<mac>`.
_MAIL_TAG = re.compile(rf"^t([0-9]{{1,19}})-([0-9a-f]{{{MAC_LENGTH}}})$")


def _mac(secret: str, recipient_id: int, namespace: str = "") -> str:
    message = f"verp:{namespace}{recipient_id}".encode()
    return hmac.new(secret.encode(), message, hashlib.sha256).hexdigest()[:MAC_LENGTH]


def return_path(bounce_address: str, secret: str, recipient_id: int) -> str:
    """The envelope sender of the message to recipient row `recipient_id`."""
    local, _, domain = bounce_address.rpartition("@")
    return f"{local}+{recipient_id}-{_mac(secret, recipient_id)}@{domain}"


def mail_return_path(bounce_address: str, secret: str, job_id: int) -> str:
    """The envelope sender of transactional mail job `job_id` (its MAC in its own namespace,
    so a campaign row's tag never names a job, nor the reverse)."""
    local, _, domain = bounce_address.rpartition("@")
    return f"{local}+t{job_id}-{_mac(secret, job_id, 't:')}@{domain}"


def mail_job_of(tag: str, secret: str) -> int | None:
    """The transactional mail job a VERP tag names, or None (not one, or a wrong MAC)."""
    found = _MAIL_TAG.match(tag.lower())
    if found is None:
        return None
    job_id = int(found.group(1))
    if not hmac.compare_digest(found.group(2), _mac(secret, job_id, "t:")):
        return None
    return job_id


def tag_of(address: str, bounce_address: str) -> str | None:
    """The `+tag` of `address` when it is the bounce address (tagged or not; "" untagged),
    or None when it is another address."""
    local, _, domain = address.strip().strip("<>").rpartition("@")
    base_local, _, base_domain = bounce_address.rpartition("@")
    if domain.lower() != base_domain.lower():
        return None
    name, plus, tag = local.partition("+")
    if name.lower() != base_local.lower():
        return None
    return tag if plus else ""


def recipient_of(tag: str, secret: str) -> int | None:
    """The recipient row a VERP tag names, or None (no tag, malformed, or a wrong MAC)."""
    found = _TAG.match(tag.lower())
    if found is None:
        return None
    recipient_id = int(found.group(1))
    if not hmac.compare_digest(found.group(2), _mac(secret, recipient_id)):
        return None
    return recipient_id
