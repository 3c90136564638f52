"""Audience values: address normalisation, names, tiers and sources (AUD-2, AUD-3).

Subscription states and the consent rule live in `tidings.domain.consent`.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from tidings.domain.email_headers import address_problem, header_text_problem
from tidings.domain.errors import InvalidInput

MAX_EMAIL_LENGTH = 320
MAX_LOCAL_PART_LENGTH = 64
MAX_NAME_LENGTH = 200


class Tier(StrEnum):
    FREE = "free"
    PAID = "paid"
    COMPED = "comped"


class Source(StrEnum):
    FORM = "form"
    API = "api"
    IMPORT = "import"
    ADMIN = "admin"


@dataclass(frozen=True, slots=True)
class Address:
    email: str  # trimmed, domain lower-cased: how we write to the person
    key: str  # fully lower-cased: what makes two spellings one subscriber


def normalise_email(raw: str, *, field: str = "email") -> Address:
    """Loose on purpose (AUD-2): one `@`, no whitespace or control characters, length limits,
    and one plain addr-spec (it is written into To headers). The confirmation email arriving
    is the real check."""
    candidate = raw.strip()
    local, at, domain = candidate.rpartition("@")
    problem = None
    if not at or not local or not domain or "@" in local:
        problem = "must contain exactly one @ with text on both sides"
    elif len(candidate) > MAX_EMAIL_LENGTH or len(local) > MAX_LOCAL_PART_LENGTH:
        problem = f"must be at most {MAX_EMAIL_LENGTH} characters"
    elif any(ch.isspace() or not ch.isprintable() for ch in candidate):
        problem = "must not contain spaces or control characters"
    elif "." not in domain or domain.startswith(".") or domain.endswith("."):
        problem = "must have a domain like example.org"
    else:  # it goes into To headers: one plain addr-spec, the rule every address meets
        problem = address_problem(candidate)
    if problem:
        raise InvalidInput(f"{field} {problem}", field=field)
    email = f"{local}@{domain.lower()}"
    return Address(email=email, key=email.lower())


def validate_name(name: str | None, *, field: str = "name") -> str | None:
    """A display name: trimmed, at most 200 characters, printable, and header text by the one
    header rule (names end up in To headers: no encoded-words either)."""
    if name is None:
        return None
    name = name.strip()
    if not name:
        return None
    if len(name) > MAX_NAME_LENGTH:
        raise InvalidInput(f"{field} must be at most {MAX_NAME_LENGTH} characters", field=field)
    if any(not ch.isprintable() for ch in name):
        raise InvalidInput(
            f"{field} must not contain line breaks or control characters", field=field
        )
    problem = header_text_problem(name)
    if problem is not None:
        raise InvalidInput(f"{field} {problem}", field=field)
    return name
