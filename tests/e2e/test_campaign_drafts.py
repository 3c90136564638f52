"""Campaign drafts, validation at save time, preview and test send (CMP-1, CMP-4, CMP-5)."""

from __future__ import annotations

import asyncio
import hashlib
import sys
from collections.abc import AsyncIterator
from email import message_from_bytes, policy
from email.message import EmailMessage
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.e2e.audience_helpers import create_newsletter, snapshot
from tests.e2e.test_delivery_engine import FAST_QUEUE, serving
from tests.factories import admin_headers, make_settings
from tests.support.cli import tidings_cli
from tests.support.waiting import wait_for
from tidings.bootstrap import Container

BODY = """# Issue 12

Hello {{ name | fallback: "reader" }}, this week in brief.

::: only paid
The long read is below, for members.
:::
::: except paid
[Become a member](https://example.org/join) to read on.
:::
"""


@pytest.fixture
async def studio(
    database_url: str,
) -> AsyncIterator[tuple[httpx.AsyncClient, Container, dict[str, str]]]:
    async with serving(make_settings(database_url, queue=FAST_QUEUE)) as (client, container):
        headers = await admin_headers(container)
        await create_newsletter(client, headers)
        yield client, container, headers


async def _draft(
    client: httpx.AsyncClient, headers: dict[str, str], **extra: Any
) -> dict[str, Any]:
    body = {
        "newsletter": "weekly",
        "subject": "Issue 12",
        "preheader": "This week",
        "body": BODY,
        **extra,
    }
    response = await client.post("/api/admin/campaigns", json=body, headers=headers)
    assert response.status_code == 201, response.text
    return dict(response.json())


async def test_draft_is_saved_listed_and_edited(studio: Any) -> None:
    """A draft round-trips through the API exactly as written, and edits change only what they name.
    A draft round-trips through the API exactly as written, and edits change only what they name."""
    client, _, headers = studio
    draft = await _draft(client, headers, audience_filter="TIER:paid, tier:comped")
    assert draft["status"] == "draft"
    assert draft["audience_filter"] == "tier:paid,tier:comped"
    assert draft["segments"] == ["paid", "comped"]
    edited = await client.patch(
        f"/api/admin/campaigns/{draft['id']}",
        headers=headers,
        json={"subject": "Issue 12, revised"},
    )
    assert edited.json()["subject"] == "Issue 12, revised"
    listed = (await client.get("/api/admin/campaigns", headers=headers)).json()["items"]
    assert [c["id"] for c in listed] == [draft["id"]]


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"subject": "Hi\r\nBcc: all@example.org"}, "subject"),
        ({"preheader": "a\nb"}, "preheader"),
        ({"sender_name": "Ed\rX"}, "sender_name"),
        ({"reply_to": "x@example.org\nBcc: y@example.org"}, "reply_to"),
        ({"audience_filter": "tier:gold"}, "audience_filter"),
        ({"audience_filter": "labels=beta"}, "audience_filter"),
        ({"body": "::: only platinum\nx\n:::"}, "body"),
        ({"body": "Hi {{ 7*7 }}"}, "body"),
        ({"subject": "=?utf-8?q?Hi=0D=0AX-Injected:_yes?="}, "subject"),
        ({"sender_name": "=?utf-8?q?Ed=0D=0AX:_y?="}, "sender_name"),
        ({"subject": None}, "subject"),
        ({"body": None}, "body"),
        ({"body": "::: callout\n" * 12 + "deep\n" + ":::\n" * 12}, "body"),
        (
            {"body_format": "html", "body": '<div data-only="paid">\n::: callout\nx\n:::\n</div>'},
            "body",
        ),
    ],
)
async def test_invalid_fields_are_refused_at_save_time_and_change_nothing(
    studio: Any, change: dict[str, str], field: str
) -> None:
    """CR/LF in a header-bound field is rejected at input, never stripped at send (CMP-4)."""
    client, container, headers = studio
    draft = await _draft(client, headers)
    before = await snapshot(container)
    created = await client.post(
        "/api/admin/campaigns",
        headers=headers,
        json={"newsletter": "weekly", "subject": "S", "body": "B", **change},
    )
    edited = await client.patch(f"/api/admin/campaigns/{draft['id']}", headers=headers, json=change)
    for response in (created, edited):
        assert response.status_code == 422, response.text
        assert response.headers["content-type"] == "application/problem+json"
        assert response.json()["errors"][0]["field"].endswith(field)
    assert await snapshot(container) == before
    current = (await client.get(f"/api/admin/campaigns/{draft['id']}", headers=headers)).json()
    assert current["subject"] == "Issue 12"


async def test_only_drafts_can_be_edited_or_deleted(studio: Any) -> None:
    """Once a campaign leaves draft, its content is what was (or will be) sent: no edits, no
    deletes."""
    client, container, headers = studio
    draft = await _draft(client, headers)
    from sqlalchemy import update

    from tidings.storage.tables import campaigns

    async with container.db.write() as conn:
        await conn.execute(update(campaigns).values(status="scheduled"))
    assert (
        await client.patch(
            f"/api/admin/campaigns/{draft['id']}", headers=headers, json={"subject": "x"}
        )
    ).status_code == 409
    assert (
        await client.delete(f"/api/admin/campaigns/{draft['id']}", headers=headers)
    ).status_code == 409


async def test_preview_renders_each_segment_with_its_own_passages(studio: Any) -> None:
    """Authors check each segment's version before sending (CMP-5): paid passages stay out of free.
    Authors check each segment's version before sending (CMP-5): paid passages stay out of free."""
    client, _, headers = studio
    draft = await _draft(client, headers)
    url = f"/api/admin/campaigns/{draft['id']}/preview"
    paid = await client.get(url, params={"segment": "paid"}, headers=headers)
    free = await client.get(url, params={"segment": "free"}, headers=headers)
    text = await client.get(url, params={"segment": "free", "format": "text"}, headers=headers)
    assert paid.headers["content-type"].startswith("text/html")
    assert "The long read is below" in paid.text
    assert "Become a member" not in paid.text
    assert "Become a member" in free.text
    assert "The long read is below" not in free.text
    assert "Become a member (https://example.org/join)" in text.text
    assert "style=" in free.text  # CSS inlined
    bad = await client.get(url, params={"segment": "gold"}, headers=headers)
    assert bad.status_code == 422


async def _test_sent(
    client: httpx.AsyncClient, headers: dict[str, str], draft_id: int, segment: str
) -> EmailMessage:
    """Test-send the draft's `segment` to editor@example.org; the message as captured."""
    sent = await client.post(
        f"/api/admin/campaigns/{draft_id}/test-send",
        headers=headers,
        json={"to": ["editor@example.org"], "segment": segment},
    )
    assert sent.status_code == 202

    async def captured() -> list[dict[str, Any]]:
        return list((await client.get("/api/admin/outbox", headers=headers)).json()["items"])

    (item,) = await wait_for(captured)
    raw = (await client.get(f"/api/admin/outbox/{item['id']}/raw", headers=headers)).content
    message = message_from_bytes(raw, policy=policy.default)
    assert isinstance(message, EmailMessage)
    return message


async def test_list_unsubscribe_offers_a_mailto_only_when_a_mailbox_is_configured(
    database_url: str,
) -> None:
    """A `mailto:` nobody reads would let a reader believe they left while mail keeps coming;
    one that is configured (someone or something acts on it) is offered beside the URL."""
    settings = make_settings(
        database_url, queue=FAST_QUEUE, email={"unsubscribe_address": "leave@example.org"}
    )
    async with serving(settings) as (client, container):
        headers = await admin_headers(container)
        await create_newsletter(client, headers)
        draft = await _draft(client, headers)
        message = await _test_sent(client, headers, draft["id"], "free")
    unsubscribe = message["List-Unsubscribe"]
    https_part, mailto_part = unsubscribe.split(", ")
    assert https_part.startswith("<http://127.0.0.1:8000/unsubscribe/")
    token = https_part.removesuffix(">").rpartition("/")[2]
    assert mailto_part == f"<mailto:leave@example.org?subject=unsubscribe-{token}>"


async def test_test_send_delivers_the_real_message_and_leaves_the_campaign_alone(
    studio: Any,
) -> None:
    """A test send shows the real message without touching the campaign's state or counts."""
    client, _, headers = studio
    draft = await _draft(client, headers)
    before = (await client.get(f"/api/admin/campaigns/{draft['id']}", headers=headers)).json()
    message = await _test_sent(client, headers, draft["id"], "paid")
    digest = hashlib.sha256(f"{draft['id']}:editor@example.org".encode()).hexdigest()[:32]
    # A test send carries a one-off id ending in the campaign's formula, so it is findable but
    # never collides with the real send to the same address (providers drop repeats).
    assert message["Message-ID"].startswith("<test-")
    assert message["Message-ID"].endswith(f".{draft['id']}.{digest}@example.org>")
    assert message["List-Unsubscribe-Post"] == "List-Unsubscribe=One-Click"
    # No unsubscribe mailbox configured: only the one-click URL, which tidings honours.
    assert message["List-Unsubscribe"].startswith("<http://127.0.0.1:8000/unsubscribe/")
    assert "mailto:" not in message["List-Unsubscribe"]
    assert message["List-Id"] is not None
    assert message["Feedback-ID"] is not None
    parts = {
        part.get_content_type(): part.get_content()
        for part in message.walk()
        if part.get_content_maintype() == "text"
    }
    assert "The long read is below" in parts["text/html"]
    assert "The long read is below" in parts["text/plain"]
    after = (await client.get(f"/api/admin/campaigns/{draft['id']}", headers=headers)).json()
    assert after == before  # state, counts and timestamps untouched
    too_many = await client.post(
        f"/api/admin/campaigns/{draft['id']}/test-send",
        headers=headers,
        json={"to": [f"t{i}@example.org" for i in range(11)]},
    )
    assert too_many.status_code == 422
    bad_address = await client.post(
        f"/api/admin/campaigns/{draft['id']}/test-send",
        headers=headers,
        json={"to": ["not-an-address"]},
    )
    assert bad_address.status_code == 422


def test_campaign_cli_creates_previews_and_lists(tmp_path: Path, sqlite_url: str) -> None:
    """The CLI composes the same drafts as the API, from a Markdown or HTML file."""
    tidings = tidings_cli(sqlite_url)

    assert tidings("migrate").returncode == 0
    created = tidings(
        "newsletters",
        "create",
        "weekly",
        "--name",
        "Weekly",
        "--sender-name",
        "Ed",
        "--sender-address",
        "ed@example.org",
    )
    assert created.returncode == 0, created.stderr
    post = tmp_path / "post.md"
    post.write_text(BODY)
    made = tidings(
        "campaign",
        "create",
        "--newsletter",
        "weekly",
        "--subject",
        "Hi",
        "--from-file",
        str(post),
        "--json",
    )
    assert made.returncode == 0, made.stderr
    out = tmp_path / "paid.html"
    shown = tidings("campaign", "preview", "1", "--segment", "paid", "--out", str(out))
    assert shown.returncode == 0, shown.stderr
    assert "The long read is below" in out.read_text()
    bad = tidings("campaign", "edit", "1", "--subject", "a\nb")
    assert bad.returncode == 2  # a usage error, refused by the option itself
    assert "--subject" in bad.stderr
    listed = tidings("campaign", "list", "--json")
    assert '"subject": "Hi"' in listed.stdout


async def test_bench_render_prints_well_formed_json() -> None:
    """The render benchmark's JSON is read by scripts; a malformed report breaks them."""
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "tidings",
        "bench",
        "render",
        "--recipients",
        "200",
        "--compare-sample",
        "5",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    output, errors = await process.communicate()
    assert process.returncode == 0, errors.decode()
    import json

    result = json.loads(output)
    assert result["recipients"] == 200
    assert result["template_renders"] == 1
    assert result["personalised"]["messages_per_second"] > 0
    assert result["full_render_per_recipient"]["messages_per_second"] > 0
