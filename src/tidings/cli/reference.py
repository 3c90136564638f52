"""Generates docs/cli.md and docs/configuration.md from the code, so the docs cannot drift.

`make docs` rewrites both; tests/unit/test_docs.py fails when either is stale.
"""

from __future__ import annotations

import sys
from typing import Any

import typer
import typer.main
from pydantic_core import PydanticUndefined

from tidings.config import ENV_PREFIX, iter_keys

CLI_INTRO = """# Command line reference

Generated from the commands' own `--help` text by `make docs`; a test fails when it is stale.
Every command accepts the global `--config FILE` option (a TOML file; `TIDINGS_*` environment
variables override it). An invalid setting stops any command with exit code 2 and a one-line
message naming the key.
"""

CONFIG_INTRO = """# Configuration reference

Generated from the settings in `tidings/config/` by `make docs`; a test fails when a key is
missing here.

Every key `section.name` can be set two ways:

- the environment variable `TIDINGS_SECTION_NAME` (for example `TIDINGS_DATABASE_URL`), or
- `name = value` under `[section]` in a TOML file passed with `tidings --config FILE` (or named
  by `TIDINGS_CONFIG`).

The environment wins over the file, and the file over the defaults. With no configuration at
all, `tidings serve` runs on `./tidings.db` with mail captured locally. Every value is validated
at start-up: an invalid one stops the process with exit code 2 and a message naming the key and
the expected form. In the file, values keep TOML's types and are checked as strictly as the
environment is: a whole number is written without quotes (`2`, not `"2"` or `2.0`), a number
without quotes, true/false as such, and a duration as text (`"24h"`) or seconds.
`tidings config show` prints the effective settings with secrets masked, as a file that
`--config` reads back to the same settings.

Example file:

```toml
[database]
url = "postgresql://tidings@db.internal:5432/tidings"

[site]
public_url = "https://news.example.org"
```
"""


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def _params(command: Any) -> list[str]:
    rows = []
    for param in command.params:
        if param.name == "help":
            continue
        help_text = getattr(param, "help", None) or ""
        if param.param_type_name == "argument":
            name = f"`{param.name.upper()}`"
        else:
            name = ", ".join(f"`{opt}`" for opt in param.opts)
        rows.append(f"| {name} | {_cell(help_text)} |")
    if not rows:
        return []
    return ["| argument / option | meaning |", "| --- | --- |", *rows, ""]


def _walk(command: Any, path: list[str], out: list[str]) -> None:
    out.append(f"{'#' * min(len(path) + 1, 4)} `{' '.join(path)}`\n")
    out.append((command.help or "").strip() + "\n")
    out.extend(_params(command))
    if hasattr(command, "list_commands"):
        context = typer.Context(command)
        for name in command.list_commands(context):
            _walk(command.get_command(context, name), [*path, name], out)


def cli_reference() -> str:
    from tidings.cli.main import app

    out = [CLI_INTRO]
    _walk(typer.main.get_command(app), ["tidings"], out)
    return "\n".join(out).rstrip() + "\n"


def configuration_reference() -> str:
    out = [
        CONFIG_INTRO,
        "| key | environment variable | type | default | meaning |",
        "| --- | --- | --- | --- | --- |",
    ]
    for key, field in iter_keys():
        env = ENV_PREFIX + key.replace(".", "_").upper()
        type_name = getattr(field.annotation, "__name__", None) or str(field.annotation)
        type_name = type_name.replace("typing.", "").replace("pydantic.types.", "")
        default = field.default
        shown = "*(unset)*" if default in (None, PydanticUndefined) else f"`{default}`"
        type_name = type_name.replace(" | ", " or ")
        out.append(
            f"| `{key}` | `{env}` | {type_name} | {shown} | {_cell(field.description or '')} |"
        )
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    which = sys.argv[1] if len(sys.argv) > 1 else "cli"
    sys.stdout.write(cli_reference() if which == "cli" else configuration_reference())
