"""The media library's rules (CMP-6): which images are accepted, what an upload's name and alt
text may be, how a stored file is named (its content hash) and what refuses an upload."""

from __future__ import annotations

import hashlib
import html
import re
import unicodedata
from dataclasses import dataclass

from tidings.domain.errors import Conflict, InvalidInput, PayloadTooLarge

# Accepted formats by their file signature: (format, signature prefix, extension, media type).
# WebP is `RIFF....WEBP`: checked in two parts by `sniff_format`.
FORMATS: dict[str, tuple[str, str]] = {
    "png": ("png", "image/png"),
    "jpeg": ("jpg", "image/jpeg"),
    "gif": ("gif", "image/gif"),
    "webp": ("webp", "image/webp"),
}
ACCEPTED = "PNG, JPEG, GIF or WebP"
MAX_FILENAME_LENGTH = 255
MAX_ALT_LENGTH = 500
# A stored file's name: the first 32 hex digits of its bytes' SHA-256, and its extension.
STORED_NAME = re.compile(r"[0-9a-f]{32}\.(?:png|jpg|gif|webp)")
# Bytes that make a file something a browser or a server could run or render as a page: a tag
# with what follows a tag name, a doctype, a PHP opening, a script URL. None belongs in an
# image; an "image" carrying one is a polyglot, refused before and after it is re-encoded
# (pixel data can be shaped so the encoder writes such bytes). Requiring what follows a tag
# name keeps random compressed bytes from matching by chance (about once in 10^5 files).
ACTIVE_CONTENT = re.compile(
    rb"<(?:script|html|svg|iframe|object|embed|body|head|meta|link|style|img)[\s/>]"
    rb"|<!doctype\s|<\?php\s|javascript:|vbscript:",
    re.IGNORECASE,
)
_SVG_START = re.compile(rb"\A(?:\xef\xbb\xbf)?\s*(?:<\?xml[^>]*>\s*)?(?:<!--.*?-->\s*)*<svg", re.S)


class MediaRefused(InvalidInput):
    """An upload that is not an acceptable image; `detail` says why, `field` which part."""

    code = "media_refused"
    title = "The image was refused"


class MediaTooLarge(PayloadTooLarge):
    """An upload over `media.max_upload_bytes`: reading stopped at the limit."""


class MediaInUse(Conflict):
    """Deleting an image that content still links to, without `force`."""

    code = "media_in_use"
    title = "The image is used"

    def __init__(self, detail: str, used_by: list[dict[str, object]]) -> None:
        super().__init__(detail, field="force")
        self.used_by = used_by

    def problem_fields(self) -> dict[str, object]:
        return {"used_by": self.used_by}


@dataclass(frozen=True, slots=True)
class Usage:
    """Where an image is linked: a campaign's body or a newsletter's welcome email."""

    kind: str  # "campaign" or "newsletter"
    id: int
    title: str

    def as_dict(self) -> dict[str, object]:
        return {"kind": self.kind, "id": self.id, "title": self.title}


def sniff_format(head: bytes) -> str:
    """The accepted format the file's first bytes announce, or MediaRefused with why."""
    if head.startswith(b"\x89PNG\r\n\x1a\n"):
        return "png"
    if head.startswith(b"\xff\xd8\xff"):
        return "jpeg"
    if head.startswith((b"GIF87a", b"GIF89a")):
        return "gif"
    if head.startswith(b"RIFF") and head[8:12] == b"WEBP":
        return "webp"
    if _SVG_START.match(head[:4096]) or b"<svg" in head[:4096].lower():
        raise MediaRefused("SVG images are refused: they can carry script", field="file")
    raise MediaRefused(f"not an image tidings accepts (only {ACCEPTED})", field="file")


def active_marker(data: bytes) -> str | None:
    """The first HTML or script marker found in `data` (case-insensitive), if any."""
    found = ACTIVE_CONTENT.search(data)
    return found.group().decode("latin-1").strip() if found else None


def refuse_active_content(data: bytes) -> None:
    """Refuse a file whose bytes read as HTML or script as well as an image (a polyglot)."""
    marker = active_marker(data)
    if marker is not None:
        raise MediaRefused(
            f"the file also reads as HTML or script ({marker!r} in its bytes)", field="file"
        )


def clean_filename(name: str) -> str:
    """An upload's own name, shown in the library: refused with path separators, control
    characters, `.`/`..` or over 255 characters. It never names a stored file."""
    if not name or not name.strip():
        raise MediaRefused("the file has no name", field="file")
    if "/" in name or "\\" in name:
        raise MediaRefused("the file name must not contain path separators", field="file")
    if any(unicodedata.category(char) in ("Cc", "Cf", "Zl", "Zp") for char in name):
        raise MediaRefused("the file name must not contain control characters", field="file")
    if name.strip() in (".", ".."):
        raise MediaRefused("the file name must be a name, not . or ..", field="file")
    if len(name) > MAX_FILENAME_LENGTH:
        raise MediaRefused(
            f"the file name is longer than {MAX_FILENAME_LENGTH} characters", field="file"
        )
    return name.strip()


def clean_alt(alt: str) -> str:
    """The image's alt text: required (an image is inserted only with one), one line."""
    text = " ".join(alt.split())
    if not text:
        raise MediaRefused(
            "alt text is required: describe the image for readers who cannot see it", field="alt"
        )
    if any(unicodedata.category(char) == "Cc" for char in text):
        raise MediaRefused("the alt text must not contain control characters", field="alt")
    if len(text) > MAX_ALT_LENGTH:
        raise MediaRefused(f"the alt text is longer than {MAX_ALT_LENGTH} characters", field="alt")
    return text


def stored_name(data: bytes, image_format: str) -> str:
    """The name a stored file gets: a hash of its bytes, so the name changes whenever the
    bytes do and the file can be cached for ever."""
    extension = FORMATS[image_format][0]
    return f"{hashlib.sha256(data).hexdigest()[:32]}.{extension}"


def media_type_of(name: str) -> str:
    """The Content-Type a stored file is served with, from its extension."""
    extension = name.rsplit(".", 1)[-1]
    for known, media_type in FORMATS.values():
        if known == extension:
            return media_type
    raise ValueError(f"not a stored media name: {name}")


def resized(width: int, height: int, most: int) -> tuple[int, int]:
    """`width`×`height` scaled down (never up) to at most `most` wide, the ratio kept."""
    if width <= most:
        return width, height
    return most, max(1, round(height * most / width))


@dataclass(frozen=True, slots=True)
class Insertion:
    """How an image appears in content: its public addresses and what the editor inserts.
    Markdown gets the layout-width file (Markdown carries no width, and Outlook shows an
    image at its own size); HTML gets the 2× file drawn at the layout width, sharp on
    high-density screens."""

    url: str
    url_2x: str
    markdown: str
    html: str


def insertion(alt: str, url: str, url_2x: str, width: int, height: int) -> Insertion:
    markdown_alt = re.sub(r"([\\\[\]])", r"\\\1", alt)
    tag = (
        f'<img src="{html.escape(url_2x)}" alt="{html.escape(alt)}" '
        f'width="{width}" height="{height}">'
    )
    return Insertion(url, url_2x, f"![{markdown_alt}]({url})", tag)
