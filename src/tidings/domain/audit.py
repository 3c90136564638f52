"""Who did something, for the audit log (UI-2): an operator, an API key, the command line, or
someone not signed in; and from which address."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Actor:
    """`label` is `admin:<id>`, `key:<id>`, `cli:<login>` or `anonymous`: ids, never emails."""

    label: str
    client_ip: str | None = None

    @classmethod
    def operator(cls, admin_id: int, client_ip: str | None = None) -> Actor:
        return cls(f"admin:{admin_id}", client_ip)

    @classmethod
    def api_key(cls, key_id: str, client_ip: str | None = None) -> Actor:
        return cls(f"key:{key_id}", client_ip)

    @classmethod
    def command_line(cls, login: str) -> Actor:
        return cls(f"cli:{login}"[:100])

    @classmethod
    def anonymous(cls, client_ip: str | None = None) -> Actor:
        return cls("anonymous", client_ip)
