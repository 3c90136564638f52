"""Showing settings: every key in order, the effective values with every secret masked."""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Any

from pydantic import BaseModel, SecretStr

from tidings.config.settings import Settings


def iter_keys(model: type[BaseModel] = Settings, prefix: str = "") -> list[tuple[str, Any]]:
    """Every leaf key as (`section.name`, field info), in declaration order."""
    keys: list[tuple[str, Any]] = []
    for name, field in model.model_fields.items():
        annotation = field.annotation
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            keys.extend(iter_keys(annotation, f"{prefix}{name}."))
        else:
            keys.append((f"{prefix}{name}", field))
    return keys


def masked(settings: Settings) -> dict[str, dict[str, Any]]:
    """The effective settings as plain data with every secret replaced by `********`."""
    shown: dict[str, dict[str, Any]] = {}
    for section_name in type(settings).model_fields:
        section = getattr(settings, section_name)
        values: dict[str, Any] = {}
        for key in type(section).model_fields:
            value = getattr(section, key)
            if isinstance(value, SecretStr):
                value = "********"
            elif isinstance(value, timedelta):
                value = format_duration(value)  # a form `--config` reads back
            elif isinstance(value, dict):
                value = {str(name): item for name, item in value.items()}  # domain_rates
            elif isinstance(value, list | tuple | set | frozenset):
                value = [
                    item if isinstance(item, int | float | str) else str(item) for item in value
                ]
            elif value is not None and not isinstance(value, bool | int | float | str):
                value = str(value)
            if isinstance(value, str) and "://" in value:
                value = mask_url_password(value)  # database.url, mailgun.api_base_url, ...
            values[key] = value
        shown[section_name] = values
    return shown


def format_duration(value: timedelta) -> str:
    """`24h`, `90m`, `2d` or seconds: the shortest form the duration settings read back."""
    seconds = value.total_seconds()
    for unit, size in (("d", 86_400), ("h", 3_600), ("m", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{int(seconds // size)}{unit}"
    return f"{seconds:g}s"


_SECRET_PARAMETER = re.compile(r"pass|pwd|secret|token|key|auth|credential|sig", re.IGNORECASE)


def mask_url_password(url: str) -> str:
    """The URL with its secrets replaced by `********`: the password in its userinfo
    (`postgresql://u:********@h/db`), the whole userinfo of a web URL, where a lone name is a
    key (`https://********@host`), and query parameters that carry one
    (`?password=********`, `sslpassword`, `token`, `api_key`...)."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        return url
    cut = min((i for i in (rest.find(c) for c in "/?#") if i >= 0), default=len(rest))
    authority, tail = rest[:cut], rest[cut:]
    if "@" in authority:
        credentials, _, host = authority.rpartition("@")
        user, colon, _ = credentials.partition(":")
        if colon:
            credentials = f"{user}:********"
        elif scheme.lower() in {"http", "https"}:
            credentials = "********"
        authority = f"{credentials}@{host}"
    path, question, query = tail.partition("?")
    if question:
        query, hash_sign, fragment = query.partition("#")
        pairs = []
        for pair in query.split("&"):
            name, equals, _ = pair.partition("=")
            pairs.append(f"{name}=********" if equals and _SECRET_PARAMETER.search(name) else pair)
        tail = f"{path}?{'&'.join(pairs)}{hash_sign}{fragment}"
    return f"{scheme}://{authority}{tail}"
