"""The `tidings` command's entry point (the console script and `python -m tidings`).

Loading the command tree creates a few hundred thousand long-lived objects (modules, classes,
SQLAlchemy tables, pydantic models); the cyclic garbage collector would walk them again and
again while they load, for nothing. It is off while they load, and what loaded is then frozen
out of its reach (`gc.freeze`): a command starts about a tenth sooner, and a long-running
worker's full collections skip everything that was there at start.
"""

from __future__ import annotations

import gc


def main() -> None:
    gc.disable()
    try:
        from tidings.cli.main import main as run_command
    finally:
        gc.enable()
    gc.freeze()
    run_command()
