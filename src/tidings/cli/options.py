"""Option callbacks that apply the one header rule (domain.email_headers) at the command line:
a bad subject, name or address is a usage error naming the option (exit 2), before any work."""

from __future__ import annotations

from typing import TypeVar

import typer

from tidings.domain.email_headers import address_problem, header_text_problem

Value = TypeVar("Value", str, list[str], None)


def _each(value: str | list[str] | None) -> list[str]:
    if value is None:
        return []
    return [value] if isinstance(value, str) else list(value)


def header_text(value: Value) -> Value:
    """For options whose text ends up in a header: subject, display names."""
    for text in _each(value):
        problem = header_text_problem(text)
        if problem is not None:
            raise typer.BadParameter(problem)
    return value


def email_address(value: Value) -> Value:
    """For options that take addresses (repeatable ones too): each exactly one addr-spec."""
    for text in _each(value):
        problem = header_text_problem(text) or address_problem(text.strip())
        if problem is not None:
            raise typer.BadParameter(problem)
    return value
