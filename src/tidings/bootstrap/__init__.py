"""The composition root (HOUSE rule 4): settings -> database -> services. Nothing else reads
settings. Entrypoints (the API, the CLI, workers) call `build()` and get a `Container`; nothing is
constructed at import time.

- `root.py`: `build`, `start`, `running` — the face every entrypoint uses;
- `container.py`: `Container`, what one process holds, and the parts built on first use;
- `providers.py`: email providers and their checks, the webhook client, SNS, the bounce mailbox;
- `policies.py`: settings turned into the queue's, sending's and auto-pause's policies, the theme;
- `handlers.py`: the worker's handler registry;
- `keys.py`: the site secret and the suppression key, loaded at start;
- `schema.py`: the database's revision and migrations, for the entry points;
- `clock.py`: the production clock.

The names below are loaded on first use (PEP 562), so `tidings --help`, which imports every
command's module, does not load the whole root: a command loads it when it runs.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tidings.bootstrap.clock import utcnow
    from tidings.bootstrap.container import Container
    from tidings.bootstrap.policies import queue_policy, theme_from
    from tidings.bootstrap.providers import (
        check_email_provider,
        check_mailgun_account,
        check_smtp_relay,
        mailgun_provider,
    )
    from tidings.bootstrap.root import build, running, start

_FACE = {
    "utcnow": "clock",
    "Container": "container",
    "queue_policy": "policies",
    "theme_from": "policies",
    "check_email_provider": "providers",
    "check_mailgun_account": "providers",
    "check_smtp_relay": "providers",
    "mailgun_provider": "providers",
    "build": "root",
    "running": "root",
    "start": "root",
}

__all__ = [
    "Container",
    "build",
    "check_email_provider",
    "check_mailgun_account",
    "check_smtp_relay",
    "mailgun_provider",
    "queue_policy",
    "running",
    "start",
    "theme_from",
    "utcnow",
]


def __getattr__(name: str) -> Any:
    module = _FACE.get(name)
    if module is None:
        raise AttributeError(f"module 'tidings.bootstrap' has no attribute {name!r}")
    return getattr(import_module(f"tidings.bootstrap.{module}"), name)
