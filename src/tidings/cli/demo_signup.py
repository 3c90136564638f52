"""The signup part of `tidings demo`: a subscriber subscribes through the public form, and confirms
through the link in the confirmation email the local SMTP sink captured, as a browser would
(the page first, then its button's POST)."""

from __future__ import annotations

import re
import time
from email import message_from_bytes, policy
from email.message import EmailMessage
from pathlib import Path

import httpx

from tidings.cli.context import fail, out_console

FORM_SUBSCRIBER = "ada@example.net"
CONFIRM_LINK = re.compile(r"https?://[^\s\"'<>]+/confirm/[A-Za-z0-9._~-]+")


def sign_up_through_the_form(base: str, newsletter: str, mail_dir: Path) -> str:
    """POST the public form, read the confirmation email at the sink, GET then POST the
    `/confirm/{token}` link in it. Returns the confirmed address."""
    with httpx.Client(base_url=base, timeout=30) as browser:
        form = browser.get("/subscribe")
        if form.status_code != 200 or f'value="{newsletter}"' not in form.text:
            fail(f"GET /subscribe: {form.status_code}, newsletter {newsletter!r} not offered")
        posted = browser.post(
            "/subscribe",
            data={"email": FORM_SUBSCRIBER, "name": "Ada", "newsletter": newsletter},
        )
        if posted.status_code != 303 or posted.headers.get("location") != "/subscribe/thanks":
            fail(f"POST /subscribe: {posted.status_code} {posted.text[:200]}")
        out_console.print(
            f"[green]✓[/] {FORM_SUBSCRIBER} signed up through the public form at {base}/subscribe "
            "(303 → /subscribe/thanks)"
        )
        email = _wait_for_mail_to(FORM_SUBSCRIBER, mail_dir, deadline_s=30)
        link = _confirmation_link(email)
        path = link[link.index("/confirm/") :]
        page = browser.get(path)
        if page.status_code != 200 or f'action="{path}"' not in page.text:
            fail(f"GET {path}: {page.status_code}; expected a page with a confirm button")
        confirmed = browser.post(path)
        if confirmed.status_code != 200:
            fail(f"POST {path}: {confirmed.status_code} {confirmed.text[:200]}")
    out_console.print(
        f"[green]✓[/] the confirmation email ({email['Subject']!s}) reached the sink; its link "
        f"{base}/confirm/… was opened (GET: a page, no change) and its button pressed (POST)"
    )
    return FORM_SUBSCRIBER


def _wait_for_mail_to(address: str, mail_dir: Path, deadline_s: float) -> EmailMessage:
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        for path in sorted(mail_dir.glob("*.eml")) if mail_dir.exists() else []:
            message = message_from_bytes(path.read_bytes(), policy=policy.default)
            assert isinstance(message, EmailMessage)
            if any(a.addr_spec == address for a in message["To"].addresses):
                return message
        time.sleep(0.2)
    fail(f"no confirmation email for {address} reached the sink in {deadline_s:.0f} s")


def _confirmation_link(message: EmailMessage) -> str:
    part = message.get_body(preferencelist=("plain", "html"))
    text = str(part.get_content()) if part is not None else ""
    found = CONFIRM_LINK.search(text)
    if found is None:
        fail("the confirmation email has no /confirm/ link")
    return found.group(0)
