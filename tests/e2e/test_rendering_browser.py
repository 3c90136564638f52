"""The default theme in a real browser: nothing overflows at desktop or phone width (CMP-2).

Drives Debian's headless Chromium directly (no Playwright): `--dump-dom` on a copy of the
email with a tiny script that writes the page's measurements into the DOM on load. The
sample's photo is served from loopback and is wider than any phone, so the check covers
fluid images too. Set UPDATE_DOCS_SCREENSHOTS=1 to refresh docs/images/.
"""

from __future__ import annotations

import functools
import html
import http.server
import json
import os
import re
import shutil
import struct
import subprocess
import threading
import zlib
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.browser import chromium_executable
from tests.support.clock import START
from tidings.rendering import TemplateEngine, preview
from tidings.rendering.sample import SAMPLE_BASE_URL, SAMPLE_LIST, SAMPLE_SENDER, sample_content

ENGINE = TemplateEngine()  # one per test module, as bootstrap builds one per process

pytestmark = pytest.mark.slow

DOCS_IMAGES = Path(__file__).parents[2] / "docs" / "images"
WIDTHS = {"desktop": 1024, "mobile": 375}
# Runs in the outer page once the framed email has loaded; the email itself is untouched.
MEASURE = """
<script>
window.addEventListener("load", function () {
  var frame = document.getElementById("email");
  var inner = frame.contentWindow, doc = frame.contentDocument, root = doc.documentElement;
  var images = Array.prototype.slice.call(doc.images);
  document.body.setAttribute("data-measure", JSON.stringify({
    scrollWidth: Math.max(root.scrollWidth, doc.body.scrollWidth),
    innerWidth: inner.innerWidth,
    height: root.scrollHeight,
    imagesLoaded: images.every(function (i) { return i.complete && i.naturalWidth > 0; })
  }));
});
</script>
"""


def _framed(email_html: str, width: int, height: int) -> str:
    """The email in an iframe of exactly `width` CSS pixels: headless Chromium will not make
    a window narrower than 500px, but a frame's viewport (and its media queries) can be."""
    return (
        "<!DOCTYPE html><html><head><style>html, body { margin: 0; padding: 0; } "
        f"iframe {{ display: block; border: 0; width: {width}px; height: {height}px; }}"
        f'</style></head><body><iframe id="email" srcdoc="{html.escape(email_html)}"></iframe>'
        f"{MEASURE}</body></html>"
    )


def _run(browser: str, profile: Path, width: int, height: int, *args: str) -> str:
    completed = subprocess.run(
        [
            browser,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--no-first-run",
            "--hide-scrollbars",
            f"--user-data-dir={profile}",
            f"--window-size={width},{height}",
            "--virtual-time-budget=5000",
            *args,
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert completed.returncode == 0, completed.stderr[-2000:]
    return completed.stdout


def _measure(browser: str, tmp_path: Path, email_html: str, width: int) -> dict[str, object]:
    page = tmp_path / f"measure-{width}.html"
    page.write_text(_framed(email_html, width, 900))
    dom = _run(browser, tmp_path / "profile", max(width, 500), 900, "--dump-dom", page.as_uri())
    found = re.search(r"data-measure=\"([^\"]+)\"", dom)
    assert found is not None, "the measuring script did not run"
    measured: dict[str, object] = json.loads(html.unescape(found[1]))
    return measured


def _png(width: int, height: int) -> bytes:
    """A photo-like picture (sky over water) with no image library."""
    rows = []
    for y in range(height):
        t = y / height
        if t < 0.55:
            colour = (int(120 + 80 * t), int(150 + 70 * t), int(185 + 40 * t))
        else:
            wave = 12 if (y // 6) % 2 else 0
            colour = (int(40 + 30 * t) + wave, int(70 + 30 * t) + wave, int(100 + 20 * t) + wave)
        rows.append(b"\x00" + bytes(colour) * width)

    def chunk(kind: bytes, data: bytes) -> bytes:
        crc = zlib.crc32(kind + data)
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", crc)

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(b"".join(rows), 9))
        + chunk(b"IEND", b"")
    )


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def image_server(tmp_path: Path) -> Iterator[str]:
    """Serves a 1200px-wide photo on loopback; yields its URL."""
    (tmp_path / "harbour.png").write_bytes(_png(1200, 640))
    handler = functools.partial(_QuietHandler, directory=str(tmp_path))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/harbour.png"
    finally:
        server.shutdown()
        server.server_close()


def test_the_default_theme_does_not_overflow_at_desktop_or_phone_width(
    tmp_path: Path, image_server: str
) -> None:
    """A newsletter that scrolls sideways on a phone is unreadable; most opens are on phones."""
    browser = chromium_executable()
    for segment in ("free", "paid"):
        shown = preview(
            sample_content(image_server),
            segment,
            sender=SAMPLE_SENDER,
            list_info=SAMPLE_LIST,
            base_url=SAMPLE_BASE_URL,
            engine=ENGINE,
            now=START,
        )
        for label, width in WIDTHS.items():
            measured = _measure(browser, tmp_path, shown.html, width)
            assert measured["innerWidth"] == width
            assert measured["imagesLoaded"] is True
            assert isinstance(measured["scrollWidth"], int)
            assert measured["scrollWidth"] <= width, f"{segment} overflows at {label} width"
            if segment == "free":
                _screenshot(browser, tmp_path, shown.html, label, width, measured["height"])


def test_the_overflow_measurement_notices_a_page_that_overflows(tmp_path: Path) -> None:
    """The check above is only worth something if it can fail."""
    browser = chromium_executable()
    wide = '<html><body><div style="width:2000px">x</div></body></html>'
    measured = _measure(browser, tmp_path, wide, 375)
    assert isinstance(measured["scrollWidth"], int)
    assert measured["scrollWidth"] > 375


def _screenshot(
    browser: str, tmp_path: Path, email_html: str, label: str, width: int, height: object
) -> None:
    assert isinstance(height, int)
    page = tmp_path / f"shot-{label}.html"
    page.write_text(_framed(email_html, width, height))
    target = tmp_path / f"rendering-{label}.png"
    _run(browser, tmp_path / "profile", width, height, f"--screenshot={target}", page.as_uri())
    assert target.stat().st_size > 10_000
    if os.environ.get("UPDATE_DOCS_SCREENSHOTS") == "1":
        DOCS_IMAGES.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(target, DOCS_IMAGES / target.name)
