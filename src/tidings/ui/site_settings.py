"""The settings page (owner only, issue 25 item 6): the effective configuration with secrets
masked and where each value came from (default, file, environment, start-up), and a go-live
checklist whose items link to the sections of docs/going-live.md that fix them."""

from __future__ import annotations

from dataclasses import dataclass

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse

from tidings.bootstrap import check_email_provider
from tidings.config import Settings, iter_keys, masked, placeholder_identity, setting_origins
from tidings.delivery.connection_check import ConnectionCheck
from tidings.ui.guard import Session, container_of
from tidings.ui.templating import UiRoute, page

router = APIRouter(prefix="/settings", route_class=UiRoute)
GOING_LIVE = "going-live.md"


@dataclass(frozen=True, slots=True)
class ChecklistItem:
    title: str
    ok: bool
    detail: str
    section: str  # the docs/going-live.md heading that explains it
    anchor: str


@dataclass(frozen=True, slots=True)
class SettingLine:
    key: str
    value: object
    origin: str
    env_var: str
    description: str


def go_live_checklist(
    settings: Settings, provider_check: ConnectionCheck | None = None
) -> list[ChecklistItem]:
    """What must be true before real readers get mail, judged from the settings (and the
    provider check, when the operator ran it on this page)."""
    placeholders = {key.split(" ", 1)[0] for key in placeholder_identity(settings)}
    identity = ("1. The identity settings", "1-the-identity-settings")
    https = str(settings.site.public_url).startswith("https://")
    site_name_set = settings.site.name != Settings.model_fields["site"].default.name
    provider = settings.email.provider
    if provider == "capture":
        provider_ok, provider_detail = False, "email.provider is capture: mail stays here"
    elif provider_check is None:
        provider_ok, provider_detail = False, f"{provider} is set; run the check below"
    elif provider_check.ok:
        provider_ok, provider_detail = (
            True,
            f"{provider} {provider_check.target}: every step passed",
        )
    else:
        failed = provider_check.steps[-1]
        provider_ok = False
        provider_detail = f"{provider} {provider_check.target}: failed at {failed.name}"
    if provider == "mailgun":
        bounces_ok = settings.mailgun.webhook_signing_key is not None
        bounces_detail = (
            "Mailgun events are signed and accepted at /api/events/mailgun"
            if bounces_ok
            else "set mailgun.webhook_signing_key so Mailgun's bounce events are accepted"
        )
    elif provider == "smtp":
        bounces_ok = bool(settings.inbound.bounce_address or settings.ses.topic_arns)
        bounces_detail = (
            "bounces return to inbound.bounce_address (deliver its mail to `tidings inbound`)"
            if settings.inbound.bounce_address
            else "SES events arrive through SNS at /api/events/ses"
            if bounces_ok
            else "set inbound.bounce_address (or SES topics) so bounces come back"
        )
    else:
        bounces_ok, bounces_detail = False, "no provider yet, so no bounces to hear"
    return [
        ChecklistItem(
            "Public URL on https",
            https,
            f"site.public_url is {settings.site.public_url}",
            "4. HTTPS with a reverse proxy",
            "4-https-with-a-reverse-proxy",
        ),
        ChecklistItem(
            "Postal address",
            "theme.postal_address" not in placeholders,
            "theme.postal_address is "
            + ("still the placeholder" if "theme.postal_address" in placeholders else "set"),
            *identity,
        ),
        ChecklistItem(
            "From address and site name",
            "email.from_address" not in placeholders and site_name_set,
            f"email.from_address is {settings.email.from_address}; "
            f"site.name is {settings.site.name}",
            *identity,
        ),
        ChecklistItem(
            "Provider configured and tested",
            provider_ok,
            provider_detail,
            "3. A provider, step by step",
            "3-a-provider-step-by-step",
        ),
        ChecklistItem(
            "Bounce intake",
            bounces_ok,
            bounces_detail,
            "2. DNS: SPF, DKIM, DMARC and the bounce domain",
            "2-dns-spf-dkim-dmarc-and-the-bounce-domain",
        ),
    ]


def setting_lines(settings: Settings) -> list[SettingLine]:
    shown = masked(settings)
    origins = setting_origins(settings)
    lines = []
    for key, field in iter_keys():
        section, name = key.split(".", 1)
        lines.append(
            SettingLine(
                key=key,
                value=shown[section][name],
                origin=origins[key],
                env_var="TIDINGS_" + key.replace(".", "_").upper(),
                description=field.description or "",
            )
        )
    return lines


async def _settings_page(
    request: Request, session: Session, provider_check: ConnectionCheck | None = None
) -> HTMLResponse:
    settings = container_of(request).settings
    lines = setting_lines(settings)
    return page(
        request,
        session,
        "settings.html",
        checklist=go_live_checklist(settings, provider_check),
        lines=lines,
        changed=sum(1 for line in lines if line.origin != "default"),
        docs_url=settings.admin_ui.docs_url.rstrip("/"),
        going_live=GOING_LIVE,
        provider=settings.email.provider,
        provider_check=provider_check,
    )


@router.get("")
async def settings_page(request: Request, session: Session) -> HTMLResponse:
    return await _settings_page(request, session)


@router.post("/provider-check")
async def provider_check(request: Request, session: Session) -> HTMLResponse:
    """Connect to the configured provider now: the checklist's "tested" item."""
    check = await check_email_provider(container_of(request).settings)
    return await _settings_page(request, session, check)
