"""The site secret and the suppression key: loaded by `start()`, read lazily by services."""

from __future__ import annotations

from typing import TYPE_CHECKING

from tidings.config import (
    PrivacySettings,
)
from tidings.domain.errors import InvalidInput

if TYPE_CHECKING:
    pass


class SiteSecret:
    """The site secret, loaded by `start()` (from settings, or generated once and kept in the
    database). Services read it lazily, after start-up."""

    def __init__(self) -> None:
        self.value: str | None = None

    def __call__(self) -> str:
        if self.value is None:
            raise RuntimeError("the site secret is not loaded yet: start the container first")
        return self.value


class SuppressionKey:
    """The suppression key from outside the database (privacy.suppression_key or its file),
    loaded by `start()`; None when not configured (the site secret alone keys the hashes)."""

    def __init__(self) -> None:
        self.value: str | None = None

    def __call__(self) -> str | None:
        return self.value


def suppression_key_from(privacy: PrivacySettings) -> str | None:
    if privacy.suppression_key is not None:
        return privacy.suppression_key.get_secret_value()
    if privacy.suppression_key_file is None:
        return None
    try:
        lines = privacy.suppression_key_file.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise InvalidInput(
            f"cannot read the suppression key file: {exc.strerror}",
            field="privacy.suppression_key_file",
        ) from None
    key = lines[0].strip() if lines else ""
    if len(key) < 16:
        raise InvalidInput(
            "the suppression key file must hold a key of at least 16 characters",
            field="privacy.suppression_key_file",
        )
    return key
