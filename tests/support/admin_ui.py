"""Admin UI helpers for tests: an operator account, a signed-in client, CSRF tokens from pages."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack, asynccontextmanager

import httpx
from asgi_lifespan import LifespanManager

from tests.factories import STARTUP_SECONDS
from tests.support.sending import seed
from tidings.api.app import create_app
from tidings.bootstrap import Container, build, utcnow
from tidings.config import Settings
from tidings.domain.clock import Clock

PASSWORD = "correct horse battery staple"
_CSRF = re.compile(r'name="csrf_token" value="([^"]+)"')


def csrf_from(page: httpx.Response) -> str:
    """The CSRF token of the first form on `page`."""
    found = _CSRF.search(page.text)
    assert found is not None, "the page has no form with a CSRF token"
    return found.group(1)


async def sign_in(
    client: httpx.AsyncClient,
    email: str = "operator@example.org",
    password: str = PASSWORD,
) -> httpx.Response:
    """Post the sign-in form the way a browser does: fetch it (its token and cookie), post."""
    form = await client.get("/admin/sign-in")
    return await client.post(
        "/admin/sign-in",
        data={"email": email, "password": password, "csrf_token": csrf_from(form)},
    )


async def signed_in(
    client: httpx.AsyncClient, container: Container, email: str = "operator@example.org"
) -> str:
    """Create an operator, sign `client` in, return the session's CSRF token."""
    await container.admins.create(email, PASSWORD)
    answer = await sign_in(client, email)
    assert answer.status_code == 303, answer.text
    return csrf_from(await client.get("/admin"))


@asynccontextmanager
async def ui_app(
    settings: Settings, *, clock: Clock = utcnow
) -> AsyncIterator[tuple[Callable[..., httpx.AsyncClient], Container]]:
    """The real app with its lifespan, and a factory of browsers-to-be: each call gives a
    client with its own cookie jar at `base_url` (https for Secure cookies), connecting from
    `client_ip`."""
    container = build(settings, clock=clock)
    app = create_app(settings, apply_migrations=True, container=container)
    async with (
        LifespanManager(app, startup_timeout=STARTUP_SECONDS) as manager,
        AsyncExitStack() as clients,
    ):
        # Cookies are Secure when the site is served over https: browse it the same way.
        scheme = "https" if str(settings.site.public_url).startswith("https") else "http"

        def client(
            base_url: str = f"{scheme}://tidings.test", client_ip: str = "127.0.0.1"
        ) -> httpx.AsyncClient:
            transport = httpx.ASGITransport(app=manager.app, client=(client_ip, 50123))
            made = httpx.AsyncClient(transport=transport, base_url=base_url)
            clients.push_async_callback(made.aclose)
            return made

        yield client, container


NEWSLETTER = {
    "name": "Weekly Notes",
    "slug": "weekly",
    "description": "Every Friday",
    "sender_name": "The Editors",
    "sender_address": "editors@example.org",
    "reply_to": "",
    "double_opt_in": "on",
}
BODY = 'Hello {{ name | fallback: "reader" }}.\n\n::: only paid\nMembers only.\n:::\n'
DRAFT = {"subject": "Issue 1", "preheader": "", "body": BODY, "body_format": "markdown"}


async def composed_campaign(
    client: httpx.AsyncClient, container: Container, csrf: str, readers: int
) -> tuple[str, int]:
    """Through the UI: the `weekly` newsletter with `readers` confirmed readers and a draft
    campaign to it. Returns the campaign's page URL and id."""
    await client.post("/admin/newsletters/new", data={**NEWSLETTER, "csrf_token": csrf})
    await seed(container, "weekly", readers)
    made = await client.post(
        "/admin/campaigns/new", data={**DRAFT, "newsletter": "weekly", "csrf_token": csrf}
    )
    assert made.status_code == 303, made.text
    campaign_url = made.headers["location"]
    return campaign_url, int(campaign_url.rsplit("/", 1)[1])
