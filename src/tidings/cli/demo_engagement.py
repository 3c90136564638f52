"""The engagement part of `tidings demo` (ENG-1..5): the issue went out tracked (`aggregate`);
some people open it and click, Apple's privacy proxy fetches the images of many more copies,
a security scanner follows every link of a few — and `tidings campaign stats` tells them apart.
"""

from __future__ import annotations

import re
import time
from email import message_from_bytes, policy
from email.message import EmailMessage
from pathlib import Path
from typing import Any

import httpx

from tidings.cli.context import fail, out_console
from tidings.cli.demo_campaign import SUBJECT, _tidings_json

PEOPLE = 40  # copies a person opens; a third of them also click the first link
PROXIED = 100  # copies whose images Apple Mail Privacy Protection fetches on delivery
SCANNED = 10  # copies whose every link a security scanner follows
# The demo's people read within seconds of the send; the server it starts takes a hit this soon
# after hand-over as a machine's (tracking.machine_window_seconds, 10 by default).
MACHINE_WINDOW_SECONDS = 3
BROWSER = (
    "Mozilla/5.0 (Macintosh; Intel Mac OS X 14_4) AppleWebKit/605.1.15 (KHTML, like Gecko) "
    "Version/17.4 Safari/605.1.15"
)
APPLE_PROXY = "Mozilla/5.0"
SCANNER = "Barracuda Sentinel (EE)"
_TRACKED = re.compile(r"""(?:href|src)="(https?://[^"]+/([co])/[^"/]+/([^"/]+))\"""")
# The link no person sees (ENG-4): only the scanner follows it.
_TRAP = re.compile(r"""<a class="tracking-trap"[^>]*href="([^"]+)\"""")


def _html(path: Path) -> str | None:
    message = message_from_bytes(path.read_bytes(), policy=policy.default)
    assert isinstance(message, EmailMessage)
    if message["Subject"] != SUBJECT:
        return None  # the confirmation email
    part = message.get_body(preferencelist=("html",))
    return None if part is None else str(part.get_content())


def _tracked_copies(mail_dir: Path) -> list[tuple[str, list[str], int]]:
    """(pixel URL, click URLs, hand-over time) of each tracked copy of the issue at the sink."""
    copies = []
    for path in sorted(mail_dir.glob("*.eml")):
        html = _html(path)
        if html is None:
            continue
        found = _TRACKED.findall(html)
        pixels = [url for url, kind, _ in found if kind == "o"]
        traps = set(_TRAP.findall(html))
        clicks = list(dict.fromkeys(url for url, kind, _ in found if kind == "c"))
        # People's links first, the trap last: people click links[0].
        clicks.sort(key=lambda url: url in traps)
        if len(pixels) != 1 or len(clicks) < 2 or clicks[0] in traps:
            fail(f"{path.name}: the issue went out without its pixel or tracked links")
        sent = int(next(token for url, kind, token in found if kind == "o").split(".")[1])
        copies.append((pixels[0], clicks, sent))
    if len(copies) < PEOPLE + PROXIED + SCANNED:
        fail(f"only {len(copies)} tracked copies at the sink")
    return copies


def _hit(client: httpx.Client, url: str, user_agent: str, address: str) -> None:
    answer = client.get(
        url, headers={"user-agent": user_agent, "x-forwarded-for": address}, follow_redirects=False
    )
    if answer.status_code not in (200, 302):
        fail(f"a tracked link answered {answer.status_code}")


def _local(url: str, base: str) -> str:
    """The tracked URL on the demo's own server (the mail carries site.public_url, the same)."""
    return base + "/" + url.split("://", 1)[1].split("/", 1)[1]


def read_and_click(base: str, campaign_id: int, mail_dir: Path, env: dict[str, str]) -> None:
    """People, a privacy proxy and a scanner at the issue; then the stats, apart."""
    copies = _tracked_copies(mail_dir)
    out_console.rule("engagement (tracking: aggregate)")
    people, proxied = copies[:PEOPLE], copies[PEOPLE : PEOPLE + PROXIED]
    scanned = copies[PEOPLE + PROXIED : PEOPLE + PROXIED + SCANNED]
    clicked = 0
    with httpx.Client() as client:
        for number, (_, links, _) in enumerate(scanned):  # on arrival, every link, hidden too
            for link in links:
                _hit(client, _local(link, base), SCANNER, f"198.51.{number}.9")
        for number, (pixel, _, _) in enumerate(proxied):
            _hit(client, _local(pixel, base), APPLE_PROXY, f"17.58.{number}.1")
        # People read later than machines do: past the window in which a hit is a machine's.
        latest = max(sent for _, _, sent in people)
        while time.time() < latest + MACHINE_WINDOW_SECONDS + 1:
            time.sleep(0.2)
        for number, (pixel, links, _) in enumerate(people):
            address = f"203.0.{number}.20"
            _hit(client, _local(pixel, base), BROWSER, address)
            if number % 3 == 0:
                _hit(client, _local(links[0], base), BROWSER, address)
                clicked += 1
    scanner_clicks = sum(len(links) for _, links, _ in scanned)
    out_console.print(
        f"[green]✓[/] {PEOPLE} people opened the issue and {clicked} clicked its first link; "
        f"Apple's privacy proxy fetched the images of {PROXIED} more copies; a security scanner "
        f"followed all {scanner_clicks} links of {SCANNED} copies on arrival"
    )
    expected = {
        "opens": {"human_unique": PEOPLE, "human_total": PEOPLE, "machine_total": PROXIED},
        "clicks": {"human_unique": clicked, "human_total": clicked},
    }
    engagement = _counted(env, campaign_id, expected, PEOPLE + clicked + PROXIED + scanner_clicks)
    out_console.print(
        f"[green]✓[/] people and machines counted apart: "
        f"{engagement['opens']['human_unique']} human opens, "
        f"{engagement['opens']['machine_total']} machine; "
        f"{engagement['clicks']['human_unique']} human clicks, "
        f"{engagement['clicks']['machine_total']} machine"
    )


def _counted(
    env: dict[str, str], campaign_id: int, expected: dict[str, dict[str, int]], hits: int
) -> dict[str, Any]:
    """The campaign's engagement once the workers have folded every hit into its counters."""
    deadline = time.monotonic() + 30
    while True:
        stats = _tidings_json(env, "campaign", "stats", str(campaign_id), "--json")
        engagement: dict[str, Any] = stats["engagement"]
        counted = sum(
            engagement[kind][figure]
            for kind in ("opens", "clicks")
            for figure in ("human_total", "machine_total")
        )
        if counted >= hits:
            break
        if time.monotonic() > deadline:
            fail(f"only {counted} of {hits} hits were counted after 30 s: {engagement}")
        time.sleep(0.3)
    for kind, figures in expected.items():
        for figure, value in figures.items():
            if engagement[kind][figure] != value:
                fail(f"{kind}.{figure} is {engagement[kind][figure]}, expected {value}")
    return engagement
