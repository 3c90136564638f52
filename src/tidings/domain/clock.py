"""The clock as a value: code that needs `now` is handed one (HOUSE rule 2)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

# Returns an aware UTC datetime. Only `bootstrap.utcnow` reads the real clock; tests pass
# their own through `bootstrap.build(settings, clock=...)`.
Clock = Callable[[], datetime]
