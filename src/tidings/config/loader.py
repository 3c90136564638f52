"""Loading settings: environment over TOML file over defaults, each value's origin, error text."""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from tidings.config.base import env_var
from tidings.config.display import iter_keys
from tidings.config.settings import Settings
from tidings.config.toml import StrictToml, TomlTypeError

CONFIG_FILE_ENV = "TIDINGS_CONFIG"


class ConfigurationError(Exception):
    """Raised for an invalid setting; the message names the key and the expected form."""


class _Sourced(Settings):
    """Settings read from the start-up overrides, then the environment, then the TOML file."""

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        return (init_settings, env_settings, StrictToml(settings_cls))


def load_settings(config_file: Path | None = None, **overrides: Any) -> Settings:
    """Read settings from the environment and an optional TOML file, fully validated."""
    if config_file is None and os.environ.get(CONFIG_FILE_ENV):
        config_file = Path(os.environ[CONFIG_FILE_ENV])
    if config_file is not None and not config_file.is_file():
        raise ConfigurationError(f"configuration file not found: {config_file}")

    class _FromFile(_Sourced):
        model_config = SettingsConfigDict(toml_file=config_file)

    try:
        settings = _FromFile(**overrides)
    except TomlTypeError as exc:
        raise ConfigurationError(str(exc)) from None
    except ValidationError as exc:
        raise ConfigurationError(describe_validation_error(exc)) from None
    except (ValueError, OSError) as exc:  # malformed TOML
        raise ConfigurationError(f"cannot read configuration file {config_file}: {exc}") from None
    settings._config_file = config_file
    settings._given = frozenset(_leaf_keys(overrides))
    return settings


def _leaf_keys(values: dict[str, Any], prefix: str = "") -> list[str]:
    """`{"site": {"name": ...}}` -> ["site.name"]; a section given whole names all its keys."""
    keys: list[str] = []
    for name, value in values.items():
        if isinstance(value, dict):
            keys.extend(_leaf_keys(value, f"{prefix}{name}."))
        elif isinstance(value, BaseModel):
            keys.extend(f"{prefix}{name}.{field}" for field in value.model_fields_set)
        else:
            keys.append(f"{prefix}{name}")
    return keys


def setting_origins(settings: Settings, environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """Where each key's effective value came from, by the precedence `load_settings` applies:
    `start-up` (given by the program that started it), `environment`, `file` (the TOML file)
    or `default`."""
    environ = os.environ if environ is None else environ
    present = {name.upper() for name in environ}
    from_file: set[str] = set()
    config_file = settings._config_file
    if config_file is not None and config_file.is_file():
        with config_file.open("rb") as handle:
            table = tomllib.load(handle)
        from_file = set(_leaf_keys(table))
    origins = {}
    for key, _field in iter_keys():
        if key in settings._given:
            origins[key] = "start-up"
        elif env_var(key) in present or (key == "log.sentry_dsn" and "SENTRY_DSN" in present):
            origins[key] = "environment"
        elif key in from_file:
            origins[key] = "file"
        else:
            origins[key] = "default"
    return origins


def describe_validation_error(exc: ValidationError) -> str:
    """One line per invalid key: `key (ENV_VAR): problem`. Values are never echoed."""
    lines = []
    for error in exc.errors(include_input=False, include_url=False):
        key = ".".join(str(part) for part in error["loc"])
        message = error["msg"].removeprefix("Value error, ")
        if error["type"] == "extra_forbidden":
            message = "unknown setting"
        # Cross-key rules (raised by a model validator) name their keys in the message.
        lines.append(f"{key} ({env_var(key)}): {message}" if key else message)
    return "invalid configuration: " + "; ".join(lines)
