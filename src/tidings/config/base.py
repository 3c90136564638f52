"""What every settings section shares: the frozen, strict base and the key's variable name."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

ENV_PREFIX = "TIDINGS_"
_LABEL = r"[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?"
HOSTNAME_PATTERN = rf"^{_LABEL}(?:\.{_LABEL})+$"


class Section(BaseModel):
    """One `[section]` of keys: unknown keys are refused and values never change."""

    model_config = ConfigDict(extra="forbid", frozen=True)


def env_var(key: str) -> str:
    """The environment variable that sets `section.name`: `TIDINGS_SECTION_NAME`."""
    return ENV_PREFIX + key.replace(".", "_").upper()
