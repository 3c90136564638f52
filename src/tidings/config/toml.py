"""The TOML file as a settings source, typed as strictly as the environment is read (CFG-1)."""

from __future__ import annotations

from datetime import timedelta
from types import UnionType
from typing import Any, Union, get_args, get_origin

from pydantic_settings import TomlConfigSettingsSource

from tidings.config.base import env_var
from tidings.config.display import iter_keys


class StrictToml(TomlConfigSettingsSource):
    """The TOML file, typed as strictly as the environment is read (CFG-1): TOML has types,
    so a value of the wrong one (`"2"` or `2.0` for an integer, `"30"` for a number) is a
    mistake to report, not a value to coerce."""

    def __call__(self) -> dict[str, Any]:
        values = super().__call__()
        problems = []
        fields = dict(iter_keys())
        for section, keys in values.items():
            if not isinstance(keys, dict):
                continue  # a key outside any section: pydantic reports it
            for name, value in keys.items():
                field = fields.get(f"{section}.{name}")
                problem = None if field is None else _toml_type_problem(field.annotation, value)
                if problem is not None:
                    key = f"{section}.{name}"
                    problems.append(f"{key} ({env_var(key)}): {problem} in the configuration file")
        if problems:
            raise TomlTypeError("invalid configuration: " + "; ".join(problems))
        return values


class TomlTypeError(ValueError):
    """A TOML value of the wrong type; the message names the key."""


def _toml_type_problem(annotation: Any, value: Any) -> str | None:
    """Why `value`, as TOML typed it, cannot be a setting of type `annotation` (or None)."""
    origin = get_origin(annotation)
    if origin in (Union, UnionType):
        return _union_problem(annotation, value)
    if origin in (list, tuple, set, frozenset):
        return _array_problem(annotation, value)
    if origin is dict:
        return _table_problem(annotation, value)
    return _scalar_problem(annotation, value)


def _union_problem(annotation: Any, value: Any) -> str | None:
    """None when any option (`None` aside) takes the value, else the first option's problem."""
    options = [arg for arg in get_args(annotation) if arg is not type(None)]
    problems = [_toml_type_problem(option, value) for option in options]
    return None if None in problems else problems[0]


def _array_problem(annotation: Any, value: Any) -> str | None:
    if not isinstance(value, list):
        return 'expected a TOML array, such as ["a", "b"]'
    (item,) = {arg for arg in get_args(annotation) if arg is not Ellipsis} or {str}
    problems = [_toml_type_problem(item, element) for element in value]
    return next((f"in the array: {problem}" for problem in problems if problem), None)


def _table_problem(annotation: Any, value: Any) -> str | None:
    if not isinstance(value, dict):
        return 'expected a TOML table, such as { "gmail.com" = 600 }'
    _key, item = get_args(annotation)
    problems = [_toml_type_problem(item, element) for element in value.values()]
    return next((f"in the table: {problem}" for problem in problems if problem), None)


def _scalar_problem(annotation: Any, value: Any) -> str | None:
    if isinstance(value, bool) and annotation is not bool:
        return "expected " + _TOML_FORMS.get(annotation, "a string") + ", found true/false"
    if isinstance(value, _TOML_ACCEPTED.get(annotation, (str,))):
        return None
    found = "a string" if isinstance(value, str) else f"a TOML {type(value).__name__}"
    return f"expected {_TOML_FORMS.get(annotation, 'a string')}, found {found}"


# The TOML types each setting type takes (anything else: a string), and how to write it.
_TOML_ACCEPTED: dict[Any, tuple[type, ...]] = {
    bool: (bool,),
    int: (int,),
    float: (int, float),
    timedelta: (int, float, str),  # seconds, or `24h` / ISO 8601 text
}
_TOML_FORMS: dict[Any, str] = {
    bool: "true or false",
    int: 'a whole number without quotes (2, not "2" or 2.0)',
    float: "a number without quotes",
    timedelta: 'a duration such as "24h" or a number of seconds',
}
