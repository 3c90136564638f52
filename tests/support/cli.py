"""Running the real `tidings` command against a test database, as an operator would."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable

Cli = Callable[..., subprocess.CompletedProcess[str]]


def tidings_cli(database_url: str, **settings: str) -> Cli:
    """`tidings ARGS…` on `database_url` in a child process, with none of the developer's own
    `TIDINGS_*` settings; `settings` are extra environment variables by name."""
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("TIDINGS_")},
        "TIDINGS_DATABASE_URL": database_url,
        "TIDINGS_LOG_FORMAT": "json",
        **settings,
    }

    def tidings(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "tidings", *args],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )

    return tidings
