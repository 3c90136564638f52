"""The campaign part of `tidings demo`: a newsletter, 50 confirmed readers (free and paid), a
campaign with a members-only block, sent by the server's workers to the local SMTP sink while
the demo follows it, then checked message by message."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections import Counter
from email import message_from_bytes, policy
from email.message import EmailMessage
from pathlib import Path
from typing import Any

import httpx

from tidings.cli.context import fail, out_console
from tidings.domain.email_headers import message_id

FREE_READERS = 30
PAID_READERS = 20
SENDER = "editors@example.org"
MEMBERS_ONLY = "Members' corner: the full data set is attached to this issue online."
BODY = f"""Hello {{{{ name | fallback: "reader" }}}},

This is the first issue of **The Weekly**, sent by tidings to every confirmed reader.

::: only paid
{MEMBERS_ONLY}
:::

::: only free
Enjoying it? Members get the data behind every story.
:::
"""


def send_a_campaign(base: str, token: str, mail_dir: Path, env: dict[str, str]) -> None:
    """Create the newsletter, its readers and a campaign over the admin API, send it with
    `tidings campaign send --wait`, follow it, and check what reached the sink."""
    headers = {"Authorization": f"Bearer {token}"}
    already = set(mail_dir.glob("*.eml"))
    _post(
        base,
        "/api/admin/newsletters",
        headers,
        json={
            "slug": "weekly",
            "name": "The Weekly",
            "sender_name": "The Editors",
            "sender_address": SENDER,
        },
    )
    rows = [f"reader{n:02d}@example.org,Reader {n},free,confirmed" for n in range(FREE_READERS)]
    rows += [f"member{n:02d}@example.org,Member {n},paid,confirmed" for n in range(PAID_READERS)]
    imported = _post(
        base,
        "/api/admin/subscribers/import?newsletter=weekly",
        {**headers, "Content-Type": "text/csv"},
        content="email,name,tier,status\n" + "\n".join(rows) + "\n",
    )
    out_console.print(
        f"[green]✓[/] newsletter 'The Weekly' with {imported['created']} confirmed readers "
        f"({FREE_READERS} free, {PAID_READERS} paid), imported as CSV"
    )
    campaign = _post(
        base,
        "/api/admin/campaigns",
        headers,
        json={
            "newsletter": "weekly",
            "subject": "Issue 1: hello from tidings",
            "body": BODY,
        },
    )
    campaign_id = int(campaign["id"])
    out_console.print(
        f"[green]✓[/] campaign {campaign_id} drafted, one version per segment: "
        f"{', '.join(campaign['segments'])} (paid readers get a members-only paragraph)"
    )
    outcome = _send_and_follow(base, headers, campaign_id, mail_dir, already, env)
    messages = [_read(path) for path in sorted(set(mail_dir.glob("*.eml")) - already)]
    _check(campaign_id, outcome, messages, mail_dir)


def _post(base: str, path: str, headers: dict[str, str], **body: Any) -> dict[str, Any]:
    response = httpx.post(f"{base}{path}", headers=headers, timeout=30, **body)
    if response.status_code not in (200, 201, 202):
        fail(f"POST {path} failed: {response.status_code} {response.text}")
    answer: dict[str, Any] = response.json()
    return answer


def _send_and_follow(
    base: str,
    headers: dict[str, str],
    campaign_id: int,
    mail_dir: Path,
    already: set[Path],
    env: dict[str, str],
) -> dict[str, object]:
    """Send from the CLI (the server's workers do the work) and print each change of state
    with the messages that have reached the sink so far."""
    sender = subprocess.Popen(  # noqa: S603 - our own executable with fixed arguments
        [
            sys.executable,
            "-m",
            "tidings",
            "campaign",
            "send",
            str(campaign_id),
            "--yes",
            "--wait",
            "--json",
        ],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    out_console.print(f"  $ tidings campaign send {campaign_id} --yes --wait")
    seen: tuple[str, int] | None = None
    deadline = time.monotonic() + 45
    while sender.poll() is None and time.monotonic() < deadline:
        status = httpx.get(f"{base}/api/admin/campaigns/{campaign_id}", headers=headers).json()
        now = (str(status["status"]), len(set(mail_dir.glob("*.eml")) - already))
        if now != seen and now[0] != "draft":  # draft: the CLI has not queued it yet
            out_console.print(f"  … {now[0]:<10} {now[1]:>3} message(s) at the sink")
            seen = now
        time.sleep(0.2)
    if sender.poll() is None:
        sender.kill()
        fail("the campaign did not finish within 45 seconds")
    output, errors = sender.communicate()
    if sender.returncode != 0:
        fail(f"the send failed: {errors.strip() or output.strip()}")
    outcome: dict[str, object] = json.loads(output.strip().splitlines()[-1])
    return outcome


def _read(path: Path) -> EmailMessage:
    message = message_from_bytes(path.read_bytes(), policy=policy.default)
    assert isinstance(message, EmailMessage)
    return message


def _text(message: EmailMessage) -> str:
    part = message.get_body(preferencelist=("plain",))
    return str(part.get_content()) if part is not None else ""


def _check(
    campaign_id: int, outcome: dict[str, object], messages: list[EmailMessage], mail_dir: Path
) -> None:
    readers = FREE_READERS + PAID_READERS
    to = Counter(str(message["To"].addresses[0].addr_spec) for message in messages)
    if outcome.get("status") != "submitted" or len(to) != readers or set(to.values()) != {1}:
        fail(f"not every reader got one message: {outcome}; {len(to)} address(es) at the sink")
    members = [m for m in messages if MEMBERS_ONLY in " ".join(_text(m).split())]
    out_console.print(
        f"[green]✓[/] campaign {campaign_id} {outcome['status']}: {outcome['sent']} sent, "
        f"{outcome['excluded']} excluded, {outcome['failed']} failed, "
        f"{outcome['uncertain']} uncertain — each reader accounted for"
    )
    out_console.print(
        f"[green]✓[/] {len(messages)} messages in {mail_dir} (one .eml each, open them in any "
        f"mail client); {len(members)} carry the members-only paragraph"
    )
    if len(members) != PAID_READERS:
        fail(f"{len(members)} messages have the paid version; expected {PAID_READERS}")
    sample = messages[0]
    address = str(sample["To"].addresses[0].addr_spec)
    expected = message_id(str(campaign_id), address, SENDER.rpartition("@")[2])
    if sample["Message-ID"] != expected:
        fail(f"unexpected Message-ID {sample['Message-ID']}; expected {expected}")
    out_console.print(
        "[green]✓[/] Message-ID per reader: <campaign id>.<first 32 hex of "
        f"sha256('<campaign id>:<address>')>@<sending domain>, e.g. {address} → {expected}"
    )
