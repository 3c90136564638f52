"""A queue policy for tests: the `queue.*` settings' defaults (defined once, in config) with
the overrides a test needs, e.g. fast polling."""

from __future__ import annotations

from typing import Any

from tidings.bootstrap import queue_policy
from tidings.config import QueueSettings
from tidings.queue.policy import QueuePolicy


def policy(**overrides: Any) -> QueuePolicy:
    return queue_policy(QueueSettings(**overrides))
