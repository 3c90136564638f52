"""The demo's last act (issue 22): the campaign hears back. The local SMTP sink mails a DSN
for the subscriber whose mailbox does not exist and an ARF complaint for the one who marks it as
spam to `tidings inbound`, over the VERP return path; both are suppressed, and the campaign's
statistics show it."""

from __future__ import annotations

import subprocess
import sys
import time

import httpx

from tidings.cli.context import fail, out_console
from tidings.cli.demo_campaign import HEARING_SUBSCRIBERS

WAIT_SECONDS = 60


def hear_back(base: str, token: str, campaign_id: int, env: dict[str, str]) -> None:
    headers = {"Authorization": f"Bearer {token}"}
    deadline = time.monotonic() + WAIT_SECONDS
    while True:
        answer = httpx.get(
            f"{base}/api/admin/campaigns/{campaign_id}/stats", headers=headers, timeout=30
        )
        if answer.status_code != 200:
            fail(f"GET /api/admin/campaigns/{campaign_id}/stats: {answer.status_code}")
        total = answer.json()["total"]
        if total["hard_bounced"] >= 1 and total["complained"] >= 1:
            break
        if time.monotonic() > deadline:
            fail(f"the bounce and the complaint did not arrive in {WAIT_SECONDS} s: {total}")
        time.sleep(0.5)
    out_console.print(
        "[green]✓[/] the sink mailed back a DSN and an ARF complaint; `tidings inbound` "
        f"read them: {total['hard_bounced']} hard bounce, {total['complained']} complaint, "
        f"{total['delivered']} delivered reported"
    )
    for address, _name in HEARING_SUBSCRIBERS:
        answer = httpx.get(
            f"{base}/api/admin/suppressions/check",
            params={"email": address},
            headers=headers,
            timeout=30,
        )
        if answer.status_code != 200 or not answer.json()["suppressed"]:
            fail(f"{address} is not suppressed: {answer.status_code} {answer.text}")
    out_console.print(
        f"[green]✓[/] {', '.join(address for address, _ in HEARING_SUBSCRIBERS)} suppressed: "
        "no more mail to them"
    )
    out_console.print(f"  $ tidings campaign stats {campaign_id}", markup=False)
    subprocess.run(  # noqa: S603 - our own executable with fixed arguments
        [sys.executable, "-m", "tidings", "campaign", "stats", str(campaign_id)],
        env=env,
        check=False,
    )
