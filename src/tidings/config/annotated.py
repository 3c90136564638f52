"""Reusable annotated types for settings: durations, domain-rate maps, strict positive integers."""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Annotated, Any

from pydantic import BeforeValidator
from pydantic_settings import NoDecode


def duration(value: Any) -> Any:
    """`24h`, `90m`, `2d`, `30s` or a number of seconds as a timedelta; ISO 8601 text and
    anything else left to pydantic."""
    if not isinstance(value, str) or value.strip().upper().startswith("P"):
        return value
    match = re.fullmatch(r"(\d+(?:\.\d+)?)\s*([smhd]?)", value.strip().lower())
    if match is None:
        raise ValueError("expected a duration such as 24h, 90m, 2d or 86400 (seconds)")
    unit = {"": "seconds", "s": "seconds", "m": "minutes", "h": "hours", "d": "days"}
    return timedelta(**{unit[match[2]]: float(match[1])})


def domain_rates(value: Any) -> Any:
    """`gmail.com=600,example.net=300` from the environment, or a TOML table, as messages per
    minute by lower-cased domain name."""
    if isinstance(value, str):
        pairs: dict[str, Any] = {}
        for item in filter(None, (part.strip() for part in value.split(","))):
            domain, equals, rate = item.partition("=")
            if not equals:
                raise ValueError(f"expected domain=messages_per_minute, got {item!r}")
            pairs[domain.strip()] = rate.strip()
        value = pairs
    if isinstance(value, dict):
        checked: dict[str, float] = {}
        for domain, rate in value.items():
            name = str(domain).strip().lower().rstrip(".")
            if not re.fullmatch(r"[a-z0-9-]+(\.[a-z0-9-]+)+", name) or len(name) > 255:
                raise ValueError(f"{domain!r} is not a domain name")
            try:
                per_minute = float(rate)
            except (TypeError, ValueError):
                raise ValueError(f"the rate of {name} is not a number") from None
            if not 0 < per_minute <= 1_000_000 or per_minute != per_minute:
                raise ValueError(f"the rate of {name} must be above 0 messages per minute")
            checked[name] = per_minute
        return checked
    return value


def positive_integer(value: Any) -> int:
    """Strictly a positive integer: no booleans, fractions, or words."""
    if isinstance(value, bool):
        raise ValueError("must be a positive integer")
    if isinstance(value, float):
        if not value.is_integer():
            raise ValueError("must be a positive integer, not a fraction")
        value = int(value)
    if isinstance(value, str):
        if not value.strip().isdigit():
            raise ValueError("must be a positive integer")
        value = int(value.strip())
    if not isinstance(value, int) or value < 1:
        raise ValueError("must be a positive integer")
    return value


# The validators wrap the whole field, so `None` (an unset optional duration) passes through.
Duration = Annotated[timedelta, BeforeValidator(duration)]
OptionalDuration = Annotated[timedelta | None, BeforeValidator(duration)]
# NoDecode: the environment's `a=1,b=2` reaches the validator as text, not as JSON.
DomainRates = Annotated[dict[str, float], NoDecode, BeforeValidator(domain_rates)]
StrictPositiveInt = Annotated[int, BeforeValidator(positive_integer)]
