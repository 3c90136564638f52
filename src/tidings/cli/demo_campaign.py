"""The campaign part of `tidings demo`: 10,000 generated confirmed subscribers (free and paid)
imported from CSV with `tidings subscribers import`, a campaign with a free and a paid block,
sent by the server's workers to the local SMTP sink and followed with
`tidings campaign status --follow`, then checked against every message the sink stored."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
import tempfile
from collections import Counter
from email import policy
from email.message import Message
from email.parser import BytesHeaderParser, BytesParser
from email.utils import getaddresses
from pathlib import Path
from typing import Any

import httpx

from tidings.cli.context import fail, out_console
from tidings.domain.email_headers import message_id

SUBSCRIBERS = 10_000  # the default audience: four in five free, one in five paid
SUBJECT = "Issue 1: hello from tidings"
# Two subscribers the local SMTP sink answers for (dev-smtp --reports-to): a mailbox that does not
# exist and a subscriber who marks the issue as spam (demo_hearing.py).
HEARING_SUBSCRIBERS = (
    ("bounce-gone@example.org", "Gone Reader"),
    ("complain-cross@example.org", "Cross Reader"),
)
SENDER = "editors@example.org"
MEMBERS_ONLY = "Members' corner: the full data set is attached to this issue online."
FREE_ONLY = "Enjoying it? Members get the data behind every story."
BODY = f"""Hello {{{{ name | fallback: "reader" }}}},

This is the first issue of **The Weekly**, sent by tidings to every confirmed subscriber.
This week: [how the harbour got its lighthouse back](https://demo.example.org/lighthouse).

::: only paid
{MEMBERS_ONLY}
:::

::: only free
{FREE_ONLY}
:::
"""


def create_newsletter(base: str, token: str) -> str:
    _post(
        base,
        "/api/admin/newsletters",
        {"Authorization": f"Bearer {token}"},
        json={
            "slug": "weekly",
            "name": "The Weekly",
            "sender_name": "The Editors",
            "sender_address": SENDER,
            "tracking": "aggregate",
        },
    )
    out_console.print(
        "[green]✓[/] newsletter 'The Weekly' (slug weekly) created, opens and clicks counted "
        "in aggregate (nothing tied to a person; docs/engagement.md)"
    )
    return "weekly"


def paid_subscribers(subscribers: int) -> int:
    """How many of `subscribers` generated subscribers are paid members (one in five)."""
    return subscribers // 5


def generated_subscribers(subscribers: int) -> list[tuple[str, str, str]]:
    """(email, name, tier) of the imported subscribers: the two who hear back, then free
    subscribers, then paid members."""
    paid = paid_subscribers(subscribers)
    rows = [(address, name, "free") for address, name in HEARING_SUBSCRIBERS]
    rows += [
        (f"reader{n:05d}@example.org", f"Reader {n}", "free")
        for n in range(subscribers - paid - len(HEARING_SUBSCRIBERS))
    ]
    rows += [(f"member{n:05d}@example.org", f"Member {n}", "paid") for n in range(paid)]
    return rows


def import_subscribers(newsletter: str, env: dict[str, str], subscribers: int) -> None:
    """Generate the CSV in a temporary directory and import it with the CLI: importing
    `confirmed` rows is the operator asserting consent (no confirmation emails)."""
    with tempfile.TemporaryDirectory(prefix="tidings-demo-csv-") as scratch:
        path = Path(scratch) / "subscribers.csv"
        with path.open("w", newline="", encoding="utf-8") as file:
            writer = csv.writer(file)
            writer.writerow(["email", "name", "tier", "status"])
            writer.writerows((*row, "confirmed") for row in generated_subscribers(subscribers))
        out_console.print(
            f"  $ tidings subscribers import {path.name} --newsletter {newsletter}", markup=False
        )
        done = subprocess.run(  # noqa: S603 - our own executable with fixed arguments
            [
                sys.executable,
                "-m",
                "tidings",
                "subscribers",
                "import",
                str(path),
                "--newsletter",
                newsletter,
                "--json",
            ],
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )
    if done.returncode != 0:
        fail(f"the import failed: {done.stderr.strip() or done.stdout.strip()}")
    report = json.loads(done.stdout)
    if report["created"] != subscribers:
        fail(f"the import created {report['created']} subscribers: {report}")
    paid = paid_subscribers(subscribers)
    out_console.print(
        f"[green]✓[/] {report['created']:,} generated confirmed subscribers imported "
        f"({subscribers - paid:,} free, {paid:,} paid) — an "
        "explicit consent assertion, so no confirmation emails"
    )


def send_a_campaign(
    base: str,
    token: str,
    newsletter: str,
    mail_dir: Path,
    env: dict[str, str],
    form_subscriber: str,
    subscribers: int,
) -> int:
    """Draft the campaign over the admin API, send it from the CLI, follow it with the
    progress bar, and check what reached the sink."""
    headers = {"Authorization": f"Bearer {token}"}
    campaign = _post(
        base,
        "/api/admin/campaigns",
        headers,
        json={"newsletter": newsletter, "subject": SUBJECT, "body": BODY},
    )
    campaign_id = int(campaign["id"])
    out_console.print(
        f"[green]✓[/] campaign {campaign_id} drafted, one version per segment: "
        f"{', '.join(campaign['segments'])} (a free block and a members-only block)"
    )
    queued = _tidings_json(env, "campaign", "send", str(campaign_id), "--yes", "--json")
    out_console.print(
        f"  $ tidings campaign send {campaign_id} --yes  → queued for "
        f"{queued['preflight_email_count']:,} recipient(s)",
        markup=False,
    )
    out_console.print(f"  $ tidings campaign status {campaign_id} --follow", markup=False)
    followed = subprocess.run(  # noqa: S603 - our own executable with fixed arguments
        [
            sys.executable,
            "-m",
            "tidings",
            "campaign",
            "status",
            str(campaign_id),
            "--follow",
            "--interval",
            "0.5",
        ],
        env=env,
        check=False,
    )
    if followed.returncode != 0:
        fail(f"campaign {campaign_id} did not end submitted (status --follow exit code 1)")
    found = httpx.get(f"{base}/api/admin/campaigns/{campaign_id}/status", headers=headers)
    if found.status_code != 200:
        fail(f"GET /api/admin/campaigns/{campaign_id}/status: {found.status_code} {found.text}")
    status: dict[str, Any] = found.json()
    _verify(campaign_id, status, mail_dir, form_subscriber, subscribers, base)
    return campaign_id


def _tidings_json(env: dict[str, str], *args: str) -> dict[str, Any]:
    done = subprocess.run(  # noqa: S603 - our own executable with fixed arguments
        [sys.executable, "-m", "tidings", *args],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        fail(f"tidings {' '.join(args)} failed: {done.stderr.strip() or done.stdout.strip()}")
    answer: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return answer


def _post(base: str, path: str, headers: dict[str, str], **body: Any) -> dict[str, Any]:
    response = httpx.post(f"{base}{path}", headers=headers, timeout=30, **body)
    if response.status_code not in (200, 201, 202):
        fail(f"POST {path} failed: {response.status_code} {response.text}")
    answer: dict[str, Any] = response.json()
    return answer


_parser = BytesParser(policy=policy.compat32)  # ~8x faster than policy.default


def _text(message: Message) -> str:
    """The text/plain part, decoded, whitespace folded."""
    for part in message.walk():
        if part.get_content_type() == "text/plain":
            payload = part.get_payload(decode=True)
            if isinstance(payload, bytes):
                charset = part.get_content_charset() or "utf-8"
                return " ".join(payload.decode(charset).split())
    return ""


def _verify(
    campaign_id: int,
    status: dict[str, Any],
    mail_dir: Path,
    form_subscriber: str,
    subscribers: int,
    base: str,
) -> None:
    """Every stored message of this campaign is read back: recipients counted (each subscriber
    exactly once, nobody else), the paid block only in paid subscribers' copies, Message-IDs."""
    headers_only = BytesHeaderParser(policy=policy.compat32)
    to: Counter[str] = Counter()
    paid_copies = 0
    for path in mail_dir.glob("*.eml"):
        data = path.read_bytes()
        head = headers_only.parsebytes(data)
        if head["Subject"] != SUBJECT:
            continue  # the confirmation email
        address = getaddresses([str(head["To"])])[0][1]
        to[address] += 1
        if head["Message-ID"] != message_id(str(campaign_id), address, SENDER.rpartition("@")[2]):
            fail(f"unexpected Message-ID {head['Message-ID']} for {address}")
        text = _text(_parser.parsebytes(data))
        paid = MEMBERS_ONLY in text and FREE_ONLY not in text
        free = FREE_ONLY in text and MEMBERS_ONLY not in text
        if (paid, free) != (address.startswith("member"), not address.startswith("member")):
            fail(f"{address} got the wrong version of the issue")
        paid_copies += paid
    expected = {row[0] for row in generated_subscribers(subscribers)} | {form_subscriber}
    duplicates = sum(count - 1 for count in to.values())
    recipients = status["recipients"]
    out_console.rule("verification")
    lines = [
        ("candidates", status["total"]),
        ("submitted", recipients["sent"]),
        ("excluded", recipients["excluded"]),
        ("failed", recipients["failed"]),
        ("uncertain", recipients["uncertain"]),
        ("subscribers mailed at the sink", len(to)),
        ("duplicates found in the sink", duplicates),
    ]
    for label, value in lines:
        out_console.print(f"  {label:<29} {value:>7,}", markup=False)
    if (
        status["status"] != "submitted"
        or set(to) != expected
        or duplicates
        or recipients["sent"] != len(expected)
        or paid_copies != paid_subscribers(subscribers)
    ):
        missing = sorted(expected - set(to))[:3]
        strangers = sorted(set(to) - expected)[:3]
        fail(
            f"the sink does not hold one message per subscriber: missing {missing}, unexpected "
            f"{strangers}, {duplicates} duplicate(s), {paid_copies} paid copies"
        )
    out_console.print(
        f"[green]✓[/] campaign {campaign_id} submitted: every one of the {len(expected):,} "
        f"subscribers exactly once, {form_subscriber} (signed up through the form) included; "
        f"{paid_copies:,} paid copies carry the members-only block, free copies the free one"
    )
    out_console.print(
        "[green]✓[/] Message-ID per subscriber: <campaign id>.<first 32 hex of "
        "sha256('<campaign id>:<address>')>@<sending domain>"
    )
    out_console.print(
        f"  the messages: {mail_dir} (one .eml each; open them in any mail client)", markup=False
    )
    out_console.print(
        f"  the API docs: {base}/docs while the server runs (tidings demo --keep)", markup=False
    )
