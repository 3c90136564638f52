"""Reading captured mail from the CLI (`tidings outbox show`), and where the links in a test
send lead (issue 13, items 6 and 7)."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

import httpx

from tests.e2e.audience_helpers import create_newsletter
from tests.e2e.test_delivery_engine import FAST_QUEUE, serving
from tests.factories import admin_headers, make_settings
from tests.support.cli import Ran, clean_env, tidings_cli, tidings_process
from tests.support.waiting import wait_for


async def _tidings(database_url: str, *args: str, **env: str) -> Ran:
    return await asyncio.to_thread(tidings_cli(database_url, **env), *args)


async def _captured(client: httpx.AsyncClient, headers: dict[str, str]) -> list[dict[str, Any]]:
    return list((await client.get("/api/admin/outbox", headers=headers)).json()["items"])


async def test_outbox_show_lists_the_confirmation_link_and_each_part(
    database_url: str, tmp_path: Path
) -> None:
    """Before SMTP is set up the captured confirmation email is the only way to finish a
    signup: its link must be one command away, and the text and HTML readable on their own."""
    settings = make_settings(database_url, queue=FAST_QUEUE)
    async with serving(settings) as (client, container):
        headers = await admin_headers(container)
        await create_newsletter(client, headers)
        await client.post(
            "/api/subscribe", json={"email": "ann@example.org", "newsletter": "weekly"}
        )
        (item,) = await wait_for(lambda: _captured(client, headers))
        message_id = str(item["id"])

        shown = await _tidings(database_url, "outbox", "show", message_id)
        assert shown.returncode == 0, shown.stderr
        assert "To: ann@example.org" in shown.stdout
        assert "Links:" in shown.stdout
        links = await _tidings(database_url, "outbox", "show", message_id, "--links")
        (confirm_link,) = [line for line in links.stdout.splitlines() if "/confirm/" in line]
        assert confirm_link.startswith("http://127.0.0.1:8000/confirm/")
        assert f"[1] {confirm_link}" in shown.stdout
        page = await client.get(confirm_link.removeprefix("http://127.0.0.1:8000"))
        assert page.status_code == 200
        assert "The Weekly" in page.text

        text = await _tidings(database_url, "outbox", "show", message_id, "--text")
        html = await _tidings(database_url, "outbox", "show", message_id, "--html")
        assert confirm_link in text.stdout
        assert "<html" in html.stdout.lower()
        assert "<html" not in text.stdout.lower()
        raw = await _tidings(database_url, "outbox", "show", message_id, "--raw")
        assert raw.stdout.startswith(("From:", "Content-Type:", "MIME-Version:", "To:"))
        assert "Message-ID:" in raw.stdout

        # The browser: a script that copies the page it is given beside the test.
        opened_log = tmp_path / "opened.html"
        browser = tmp_path / "browser.py"
        browser.write_text(
            "import shutil, sys\n"
            f"shutil.copy(sys.argv[1].removeprefix('file://'), {str(opened_log)!r})\n"
        )
        # Python reads $BROWSER once per process: the browser is the command's own.
        opened = await asyncio.to_thread(
            tidings_process,
            *("outbox", "show", message_id, "--open"),
            env=clean_env(DATABASE_URL=database_url, LOG_FORMAT="json")
            | {"BROWSER": f"{sys.executable} {browser} %s"},
        )
        assert opened.returncode == 0, opened.stderr
        assert confirm_link in await asyncio.to_thread(opened_log.read_text)

        both = await _tidings(database_url, "outbox", "show", message_id, "--text", "--html")
        assert both.returncode == 2
        missing = await _tidings(database_url, "outbox", "show", "999")
        assert missing.returncode == 1
        assert "no captured message" in missing.stderr


async def test_links_in_a_test_send_open_a_page_that_says_it_was_a_test(database_url: str) -> None:
    """An editor clicking unsubscribe in their own test send must learn the link works in the
    real send, not be told it is broken."""
    settings = make_settings(database_url, queue=FAST_QUEUE)
    async with serving(settings) as (client, container):
        headers = await admin_headers(container)
        await create_newsletter(client, headers)
        draft = await client.post(
            "/api/admin/campaigns",
            headers=headers,
            json={"newsletter": "weekly", "subject": "Issue 1", "body": "Hello."},
        )
        campaign_id = draft.json()["id"]
        sent = await client.post(
            f"/api/admin/campaigns/{campaign_id}/test-send",
            headers=headers,
            json={"to": ["editor@example.org"]},
        )
        assert sent.status_code == 202
        (item,) = await wait_for(lambda: _captured(client, headers))
        links = await _tidings(database_url, "outbox", "show", str(item["id"]), "--links")
        paths = [
            line.removeprefix("http://127.0.0.1:8000")
            for line in links.stdout.splitlines()
            if "/unsubscribe/" in line or "/preferences/" in line
        ]
        assert {path.split("/")[1] for path in paths} == {"unsubscribe", "preferences"}
        for path in paths:
            for method in ("GET", "POST"):
                page = await client.request(method, path)
                assert page.status_code == 200, (method, path)
                assert "This was a test" in page.text
                assert "not valid" not in page.text
        # A real unsubscribe link that is forged still gets the "not valid" page.
        forged = await client.get("/unsubscribe/12.AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA")
        assert forged.status_code == 404
        assert "not valid" in forged.text
