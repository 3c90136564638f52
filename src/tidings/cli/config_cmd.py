"""`tidings config show`: the effective settings, secrets masked."""

from __future__ import annotations

import json

import typer

from tidings.cli.context import out_console, state_of
from tidings.config import masked

app = typer.Typer(help="Inspect configuration.", no_args_is_help=True)


def _toml(value: object) -> str:
    """A value as TOML: JSON's form for scalars and arrays, an inline table for a mapping."""
    if isinstance(value, dict):
        pairs = ", ".join(
            f"{json.dumps(name)} = {json.dumps(item)}" for name, item in value.items()
        )
        return f"{{ {pairs} }}" if pairs else "{}"
    return json.dumps(value)


@app.command("show")
def show(
    ctx: typer.Context,
    as_json: bool = typer.Option(False, "--json", help="Print JSON instead of TOML."),
) -> None:
    """Print the effective settings (environment over file over defaults), secrets masked.
    The TOML printed is a file `--config` reads back to the same settings (secrets aside)."""
    shown = masked(state_of(ctx).settings())
    if as_json:
        print(json.dumps(shown, indent=2))
        return
    for section, values in shown.items():
        out_console.print(f"[bold]\\[{section}][/]")
        for key, value in values.items():
            line = f"# {key} unset" if value is None else f"{key} = {_toml(value)}"
            # Verbatim: no markup read into values, no wrapping of a long one mid-string.
            out_console.print(line, markup=False, highlight=False, soft_wrap=True)
        out_console.print()
