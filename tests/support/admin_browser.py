"""Browser-test fixtures for the admin UI: Debian's Chromium under pytest-playwright (never a
downloaded browser), a real `tidings serve` on a free port with an operator account, and the
axe accessibility check.

Import the fixtures into a test module (`from tests.support.admin_browser import ...`)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from axe_playwright_python.sync_playwright import Axe

from tests.support.browser import chromium_executable
from tests.support.cli import tidings
from tests.support.waiting import wait_until

PASSWORD = "correct horse battery staple"
EMAIL = "operator@example.org"
SERIOUS = ("serious", "critical")


@pytest.fixture(scope="session")
def browser_type_launch_args() -> dict[str, Any]:
    """pytest-playwright launches this instead of a browser of its own."""
    return {"executable_path": chromium_executable(), "args": ["--no-sandbox", "--disable-gpu"]}


@dataclass(frozen=True)
class AdminServer:
    base_url: str
    email: str
    password: str


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@pytest.fixture
def admin_server(tmp_path: Path) -> Iterator[AdminServer]:
    """`tidings serve` (API, UI and workers in one process) on SQLite with the capture
    provider, and an operator made with `tidings admins create`."""
    with serving_admin(tmp_path) as server:
        yield server


@contextmanager
def serving_admin(tmp_path: Path, **settings: str) -> Iterator[AdminServer]:
    """The `admin_server` fixture's server, with extra `TIDINGS_*` settings (full names:
    `TIDINGS_SITE_TIMEZONE`), for a test module's own fixture."""
    port = _free_port()
    base_url = f"http://127.0.0.1:{port}"
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("TIDINGS_")},
        "TIDINGS_DATABASE_URL": f"sqlite:///{tmp_path / 'ui.db'}",
        "TIDINGS_SITE_PUBLIC_URL": base_url,
        "TIDINGS_HTTP_PORT": str(port),
        "TIDINGS_LOG_FORMAT": "json",
        "TIDINGS_LOG_LEVEL": "warning",
        "TIDINGS_QUEUE_POLL_INTERVAL_SECONDS": "0.1",
        "TIDINGS_BULK_EMAIL_BATCH_SIZE": "10",
        "TIDINGS_MEDIA_DIRECTORY": str(tmp_path / "media"),
        **settings,
    }
    migrated = tidings("migrate", env=env)
    assert migrated.returncode == 0, migrated.stderr
    made = tidings("admins", "create", EMAIL, input=f"{PASSWORD}\n{PASSWORD}\n", env=env)
    assert made.returncode == 0, made.stderr
    log = (tmp_path / "serve.log").open("wb")
    server = subprocess.Popen(
        [sys.executable, "-m", "tidings", "serve"], env=env, stdout=log, stderr=log
    )
    try:

        def ready() -> bool:
            assert server.poll() is None, (tmp_path / "serve.log").read_text()[-2000:]
            try:
                return httpx.get(f"{base_url}/readyz", timeout=1).status_code == 200
            except httpx.HTTPError:
                return False

        wait_until(ready, within_seconds=60, message="tidings serve did not become ready")
        yield AdminServer(base_url, EMAIL, PASSWORD)
    finally:
        server.terminate()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
        log.close()


def serious_violations(page: Any) -> list[str]:
    """axe-core's serious and critical findings on the page as it stands."""
    results = Axe().run(page)
    return [
        f"{violation['id']}: {violation['help']} ({len(violation['nodes'])} nodes)"
        for violation in results.response["violations"]
        if violation.get("impact") in SERIOUS
    ]


def screenshot_dir(tmp_path: Path) -> Path:
    """docs/images when ADMIN_UI_SCREENSHOTS=1 (to refresh the docs), else the test's tmp."""
    if os.environ.get("ADMIN_UI_SCREENSHOTS") == "1":
        target = Path(__file__).resolve().parents[2] / "docs" / "images"
    else:
        target = tmp_path / "screenshots"
    target.mkdir(parents=True, exist_ok=True)
    return target


def sign_in_and_add_newsletter(page: Any, server: AdminServer, name: str, slug: str) -> None:
    """Sign `page` in as the server's operator and create a newsletter through the UI, as an
    operator's first minutes go."""
    page.goto("/admin/sign-in")
    page.get_by_label("Email").fill(server.email)
    page.get_by_label("Password").fill(server.password)
    page.get_by_role("button", name="Sign in").click()
    add_newsletter(page, name, slug)


def add_newsletter(page: Any, name: str, slug: str) -> None:
    """Create a newsletter from the Newsletters section."""
    nav = page.get_by_role("navigation", name="Admin sections")
    nav.get_by_role("link", name="Newsletters").click()
    page.get_by_role("link", name="New newsletter").click()
    page.get_by_label("Name", exact=True).fill(name)
    page.get_by_role("textbox", name="Slug").fill(slug)
    page.get_by_label("Sender name").fill("The Editors")
    page.get_by_label("Sender address").fill("editors@example.org")
    page.get_by_role("button", name="Save").click()
