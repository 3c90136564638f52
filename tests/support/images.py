"""Image files for the media library's tests, made with Pillow or byte by byte: ordinary
images, photos with EXIF (orientation, GPS), animations, and the bad ones — a header-only
decompression bomb, polyglots, SVG, a truncated file."""

from __future__ import annotations

import io
import struct
import zlib
from pathlib import Path

from PIL import Image, PngImagePlugin

HTML_PAYLOAD = b"<html><body><script>alert(document.cookie)</script></body></html>"
SVG = b'<?xml version="1.0"?>\n<svg xmlns="http://www.w3.org/2000/svg"><script>alert(1)</script></svg>'


def png(width: int = 1600, height: int = 900, colour: tuple[int, ...] = (20, 120, 60)) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (width, height), colour).save(out, "PNG")
    return out.getvalue()


def webp(width: int = 300, height: int = 200) -> bytes:
    out = io.BytesIO()
    Image.new("RGBA", (width, height), (10, 20, 200, 128)).save(out, "WEBP")
    return out.getvalue()


def photo_with_exif(width: int = 1200, height: int = 600, orientation: int = 6) -> bytes:
    """A JPEG as a phone writes it: a camera model, GPS coordinates, and an orientation that
    says "rotate me" (6: the stored pixels are 90° off)."""
    exif = Image.Exif()
    exif[0x010F] = "PhoneMaker"  # Make
    exif[0x0110] = "Phone 12"  # Model
    exif[0x0112] = orientation
    gps = exif.get_ifd(0x8825)
    gps[1] = "N"
    gps[2] = (51.0, 30.0, 12.5)
    gps[3] = "W"
    gps[4] = (0.0, 7.0, 39.0)
    out = io.BytesIO()
    Image.new("RGB", (width, height), (200, 150, 90)).save(out, "JPEG", exif=exif.tobytes())
    return out.getvalue()


def animated_gif(width: int = 800, height: int = 400, frames: int = 4) -> bytes:
    shots = [Image.new("RGB", (width, height), (60 * n, 255 - 60 * n, 40)) for n in range(frames)]
    out = io.BytesIO()
    shots[0].save(out, "GIF", save_all=True, append_images=shots[1:], duration=150, loop=0)
    return out.getvalue()


def _chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def png_bomb(width: int = 50_000, height: int = 50_000) -> bytes:
    """A PNG whose header claims `width`×`height` (2.5 gigapixels by default) with a few
    bytes of data: decoding it would allocate gigabytes, reading its header costs nothing."""
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    rows = zlib.compress(b"\0" * 4096, 9)
    return (
        b"\x89PNG\r\n\x1a\n"
        + _chunk(b"IHDR", header)
        + _chunk(b"IDAT", rows)
        + _chunk(b"IEND", b"")
    )


def png_with_text(text: bytes, key: str = "Comment") -> bytes:
    """A valid PNG carrying `text` in a tEXt chunk, which Pillow opens as an image."""
    info = PngImagePlugin.PngInfo()
    info.add_text(key, text.decode("latin-1"))
    out = io.BytesIO()
    Image.new("RGB", (40, 30), (1, 2, 3)).save(out, "PNG", pnginfo=info)
    return out.getvalue()


def gif_with_comment(comment: bytes) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (40, 30), (9, 9, 9)).save(out, "GIF", comment=comment)
    return out.getvalue()


def opened(data: bytes) -> Image.Image:
    """The stored bytes as Pillow reads them (a test then checks size, EXIF, frames)."""
    image = Image.open(io.BytesIO(data))
    image.load()
    return image


def stored_files(directory: Path) -> list[str]:
    """Every file in the media directory, temporary ones included: what a refusal must not
    leave behind."""
    if not directory.exists():
        return []
    return sorted(path.name for path in directory.iterdir())
