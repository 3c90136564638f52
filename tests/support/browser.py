"""Browser tests: pytest-playwright driving Debian's Chromium (never a Playwright browser
download), shared by every test that looks at a page.

Registered as a plugin by tests/conftest.py. It points pytest-playwright's `browser` at the
system `chromium` (`make test` installs it through its `browser` target); without one a
browser test is skipped with the reason shown, except under CI=true, where it fails. Use the
`page` fixture as pytest-playwright documents it, `offline_page` for a page that may reach
nothing but loopback, and `live_server` for a real `tidings serve` to point it at.

Playwright's sync API marks its event loop as running between calls, for as long as it is
started; pytest-playwright starts it once per session, after which every asyncio test fails
("Cannot run the event loop while another loop is running"). So Playwright and the browser
are started per test here, and stopped before the next test runs.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from playwright.sync_api import Browser, BrowserType, Page, Playwright, Route, sync_playwright

from tests.support.cli import Served, clean_env, serve_process

IN_CI = os.environ.get("CI", "").lower() in {"1", "true", "yes"}
LOOPBACK_HOSTS = {"127.0.0.1", "localhost", "[::1]", "::1"}


def chromium_executable() -> str:
    """The system Chromium, or a skip with the reason (a failure under CI)."""
    for name in ("chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found:
            return found
    reason = "Chromium is not installed (`make browser`, or Debian: apt-get install chromium)"
    if IN_CI:
        pytest.fail(f"{reason}; CI=true requires it")
    pytest.skip(f"{reason}: browser test skipped")


@pytest.fixture(scope="session")
def browser_type_launch_args(browser_type_launch_args: dict[str, Any]) -> dict[str, Any]:
    """pytest-playwright's launch arguments, pointed at the system Chromium."""
    return {**browser_type_launch_args, "executable_path": chromium_executable()}


@pytest.fixture
def playwright() -> Iterator[Playwright]:
    """Playwright for one test (pytest-playwright's is session-wide, see above)."""
    with sync_playwright() as started:
        yield started


@pytest.fixture
def browser_type(playwright: Playwright, browser_name: str) -> BrowserType:
    browser_type: BrowserType = getattr(playwright, browser_name)
    return browser_type


@pytest.fixture
def launch_browser(
    browser_type_launch_args: dict[str, Any], browser_type: BrowserType
) -> Callable[..., Browser]:
    def launch(**options: Any) -> Browser:
        return browser_type.launch(**{**browser_type_launch_args, **options})

    return launch


@pytest.fixture
def browser_context_args(
    playwright: Playwright, device: str | None, base_url: str | None
) -> dict[str, Any]:
    """pytest-playwright's context arguments (`--device`, `--base-url`), per test."""
    args: dict[str, Any] = dict(playwright.devices[device]) if device else {}
    if base_url:
        args["base_url"] = base_url
    return args


@pytest.fixture
def browser(launch_browser: Callable[..., Browser]) -> Iterator[Browser]:
    """The system Chromium for one test; pytest-playwright's `context` and `page` use it."""
    launched = launch_browser()
    yield launched
    launched.close()


@dataclass
class OfflinePage:
    """A page whose requests reach only loopback; `blocked` lists every other URL it tried."""

    page: Page
    blocked: list[str] = field(default_factory=list)


@pytest.fixture
def offline_page(page: Page) -> OfflinePage:
    """A browser page with the network cut off: any request to a host other than loopback is
    aborted (never sent) and recorded, as on a machine with no internet."""
    offline = OfflinePage(page)

    def only_loopback(route: Route) -> None:
        url = route.request.url
        host = urlsplit(url).hostname or ""
        if url.startswith(("data:", "blob:")) or host in LOOPBACK_HOSTS:
            route.continue_()
        else:
            offline.blocked.append(url)
            route.abort("internetdisconnected")

    page.route("**/*", only_loopback)
    return offline


@pytest.fixture
def live_server(tmp_path: Path) -> Iterator[Served]:
    """`tidings serve` on a fresh SQLite file in `tmp_path`, capture provider, on a free port."""
    env = clean_env(DATABASE_URL=f"sqlite:///{tmp_path / 'tidings.db'}", LOG_FORMAT="json")
    with serve_process(tmp_path, env=env) as served:
        yield served
