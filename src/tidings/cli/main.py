"""The `tidings` command: global options and the command tree."""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path

import typer

from tidings import __version__
from tidings.cli import (
    admins,
    audit,
    bench,
    campaign,
    config_cmd,
    demo,
    dev_provider,
    dev_smtp,
    inbound,
    inbound_review,
    jobs,
    keys,
    media,
    newsletters,
    outbox,
    provider_check,
    serve,
    subscribers,
    webhooks,
)
from tidings.cli.context import CliState

app = typer.Typer(
    name="tidings",
    help="tidings: newsletters with double opt-in, accounted sends and signed webhooks.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)


class LogLevel(StrEnum):
    debug = "debug"
    info = "info"
    warning = "warning"
    error = "error"


def _version(value: bool) -> None:
    if value:
        print(f"tidings {__version__}")
        raise typer.Exit()


@app.callback()
def root(
    ctx: typer.Context,
    config: Path | None = typer.Option(
        None,
        "--config",
        "-c",
        envvar="TIDINGS_CONFIG",
        help="TOML configuration file. Environment variables (TIDINGS_*) override it.",
    ),
    log_level: LogLevel | None = typer.Option(
        None,
        "--log-level",
        case_sensitive=False,
        help="Lowest level of log events written to stderr. Default: log.level for `serve`, "
        "`api` and `worker`; warning for every other command, so that output stays clean.",
    ),
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Print the version and exit."
    ),
) -> None:
    ctx.obj = CliState(config_file=config, log_level=log_level.value if log_level else None)


app.command()(serve.serve)
app.command()(serve.api)
app.command()(serve.worker)
app.command()(serve.migrate)
app.command()(demo.demo)
app.command("dev-smtp")(dev_smtp.dev_smtp)
app.command("dev-provider")(dev_provider.dev_provider)
inbound_review.register(inbound.app)
app.add_typer(inbound.app, name="inbound")
app.add_typer(newsletters.app, name="newsletters")
app.add_typer(subscribers.app, name="subscribers")
app.add_typer(campaign.app, name="campaign")
app.add_typer(keys.app, name="keys")
app.add_typer(admins.app, name="admins")
app.add_typer(audit.app, name="audit")
app.add_typer(jobs.app, name="jobs")
app.add_typer(outbox.app, name="outbox")
app.add_typer(webhooks.app, name="webhooks")
app.add_typer(media.app, name="media")
app.add_typer(bench.app, name="bench")
app.add_typer(config_cmd.app, name="config")
app.add_typer(provider_check.smtp_app, name="smtp")
app.add_typer(provider_check.mailgun_app, name="mailgun")


def main() -> None:
    app()
