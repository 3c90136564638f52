"""`tidings smtp check` and `tidings mailgun check`: connect to the relay or the API with the
configured settings and report each step (connect, greeting, EHLO, STARTTLS, login; the API key
and sending domain), before a campaign waits on a wrong port or a refused login."""

from __future__ import annotations

import json
from dataclasses import asdict

import typer

from tidings.cli.context import EXIT_CONFIG, fail, out_console, run, state_of
from tidings.delivery.connection_check import ConnectionCheck

smtp_app = typer.Typer(help="The SMTP relay: check the connection.", no_args_is_help=True)
mailgun_app = typer.Typer(help="The Mailgun-compatible API: check the key.", no_args_is_help=True)

JSON_OPTION = typer.Option(False, "--json", help="Print JSON.")


@smtp_app.command("check")
def smtp_check(ctx: typer.Context, as_json: bool = JSON_OPTION) -> None:
    """Connect to smtp.host:smtp.port, read the greeting, EHLO, STARTTLS (smtp.security),
    log in (when smtp.username is set) and QUIT, reporting each step. Sends nothing. Exit code
    0 when every step passed, 1 otherwise."""
    from tidings.bootstrap import check_smtp_relay

    settings = state_of(ctx).settings()
    _report(run(lambda: check_smtp_relay(settings.smtp)), as_json)


@mailgun_app.command("check")
def mailgun_check(ctx: typer.Context, as_json: bool = JSON_OPTION) -> None:
    """Read mailgun.domain from mailgun.api_base_url with mailgun.api_key, reporting whether the
    API answered, the key was accepted and the domain is on the account. Sends nothing. Exit
    code 0 when it passed, 1 otherwise."""
    mailgun = state_of(ctx).settings().mailgun
    for key, value in (("mailgun.api_key", mailgun.api_key), ("mailgun.domain", mailgun.domain)):
        if value is None:
            fail(f"{key} is not set", code=EXIT_CONFIG)
    from tidings.bootstrap import check_mailgun_account

    _report(run(lambda: check_mailgun_account(mailgun)), as_json)


def _report(check: ConnectionCheck, as_json: bool) -> None:
    if as_json:
        print(json.dumps({**asdict(check), "ok": check.ok}))
    else:
        out_console.print(f"{check.provider} {check.target}", highlight=False)
        for step in check.steps:
            mark = "[green]✓[/]" if step.ok else "[bold red]✗[/]"
            out_console.print(
                f"  {mark} {step.name}: {step.detail} ({step.milliseconds} ms)",
                highlight=False,
                soft_wrap=True,
            )
    if not check.ok:
        raise typer.Exit(1)
