"""Uploaded images made safe and sized for the email layout (CMP-6): the header checked before
anything is decoded, then every image decoded and re-encoded by Pillow — EXIF, GPS, comments
and colour profiles left behind, orientation applied — at the layout's content width and twice
it, an animation kept animated. What is stored is Pillow's output only."""

from __future__ import annotations

import io
import warnings
from dataclasses import dataclass
from typing import Any

from PIL import Image, ImageCms, ImageOps, ImageSequence, UnidentifiedImageError

from tidings.domain.media import (
    MediaRefused,
    refuse_active_content,
    resized,
    sniff_format,
)
from tidings.rendering.theme import CONTENT_WIDTH

MAX_FRAMES = 1000
_PILLOW_FORMAT = {"png": "PNG", "jpeg": "JPEG", "gif": "GIF", "webp": "WEBP"}
_ANIMATED = frozenset({"png", "gif", "webp"})
_SAVE_OPTIONS: dict[str, dict[str, Any]] = {
    "png": {"optimize": False},
    "jpeg": {"quality": 85, "optimize": True, "progressive": True},
    "gif": {"optimize": False},
    "webp": {"quality": 85, "method": 4},
}
_BROKEN = (UnidentifiedImageError, OSError, ValueError, SyntaxError, EOFError, IndexError)


@dataclass(frozen=True, slots=True)
class EncodedImage:
    data: bytes
    width: int
    height: int


@dataclass(frozen=True, slots=True)
class PreparedImage:
    """One upload, re-encoded: `one_x` at most `CONTENT_WIDTH` wide, `two_x` at most twice
    it (the same bytes as `one_x` when the original is no wider than the column)."""

    format: str
    original_width: int
    original_height: int
    frames: int
    one_x: EncodedImage
    two_x: EncodedImage


def prepare_image(data: bytes, *, max_pixels: int, width: int = CONTENT_WIDTH) -> PreparedImage:
    """Check `data` and re-encode it, or raise `MediaRefused` saying why. CPU-bound: callers
    on the event loop run it in a thread."""
    image_format = sniff_format(data[:4096])
    refuse_active_content(data)
    try:
        with warnings.catch_warnings():
            # Pillow warns past its own pixel limit and raises past twice it; both refuse.
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            with Image.open(io.BytesIO(data), formats=[_PILLOW_FORMAT[image_format]]) as image:
                frames = _check_size(image, image_format, max_pixels)
                prepared = _encode(image, image_format, frames, width)
    except MediaRefused:
        raise
    except (Image.DecompressionBombError, Image.DecompressionBombWarning):
        raise _too_many_pixels(max_pixels) from None
    except _BROKEN:
        raise MediaRefused(
            f"the file could not be read as a {image_format.upper()} image (damaged or truncated)",
            field="file",
        ) from None
    for encoded in (prepared.one_x, prepared.two_x):
        refuse_active_content(encoded.data)
    return prepared


def _too_many_pixels(max_pixels: int) -> MediaRefused:
    return MediaRefused(
        f"the image has more than {max_pixels:,} pixels (media.max_pixels)", field="file"
    )


def _check_size(image: Image.Image, image_format: str, max_pixels: int) -> int:
    """The frame count, once the header's size (read, not decoded) is within the limits."""
    pixels = image.width * image.height
    if pixels > max_pixels:
        raise _too_many_pixels(max_pixels)
    frames = int(getattr(image, "n_frames", 1)) if image_format in _ANIMATED else 1
    if frames > MAX_FRAMES:
        raise MediaRefused(f"the animation has more than {MAX_FRAMES} frames", field="file")
    if pixels * frames > max_pixels:
        raise MediaRefused(
            f"the animation's frames together have more than {max_pixels:,} pixels "
            "(media.max_pixels)",
            field="file",
        )
    return frames


def _sizes(width: int, height: int, column: int) -> tuple[tuple[int, int], tuple[int, int]]:
    return resized(width, height, column), resized(width, height, 2 * column)


def _encode(image: Image.Image, image_format: str, frames: int, column: int) -> PreparedImage:
    if frames > 1:
        return _encode_animation(image, image_format, frames, column)
    if image_format == "jpeg":
        image.draft("RGB", (2 * column, 2 * column))  # decode at a reduced scale when it can
    upright = ImageOps.exif_transpose(image)
    assert upright is not None  # a copy, not in place
    upright = _in_srgb(upright, image.info.get("icc_profile"))
    upright = upright.convert(_mode_for(upright, image_format))
    one_size, two_size = _sizes(upright.width, upright.height, column)
    two_x = _save([upright.resize(two_size, Image.Resampling.LANCZOS)], image_format, {})
    one_x = (
        two_x
        if one_size == two_size
        else _save([upright.resize(one_size, Image.Resampling.LANCZOS)], image_format, {})
    )
    return PreparedImage(image_format, image.width, image.height, 1, one_x, two_x)


def _encode_animation(
    image: Image.Image, image_format: str, frames: int, column: int
) -> PreparedImage:
    one_size, two_size = _sizes(image.width, image.height, column)
    ones: list[Image.Image] = []
    twos: list[Image.Image] = []
    durations: list[int] = []
    for frame in ImageSequence.Iterator(image):
        whole = frame.convert("RGBA")
        durations.append(int(frame.info.get("duration", 100)))
        twos.append(whole.resize(two_size, Image.Resampling.LANCZOS))
        if one_size != two_size:
            ones.append(whole.resize(one_size, Image.Resampling.LANCZOS))
    timing: dict[str, Any] = {"duration": durations}
    if "loop" in image.info:  # a GIF without the loop extension plays once
        timing["loop"] = image.info["loop"]
    if image_format == "gif":
        timing["disposal"] = 2
    two_x = _save(twos, image_format, timing)
    one_x = _save(ones, image_format, timing) if ones else two_x
    return PreparedImage(image_format, image.width, image.height, frames, one_x, two_x)


def _in_srgb(image: Image.Image, icc_profile: object) -> Image.Image:
    """The image's colours converted to sRGB when it carries an ICC profile (the profile is
    not kept: it is arbitrary bytes, and mail clients assume sRGB)."""
    if not isinstance(icc_profile, bytes) or image.mode not in ("RGB", "RGBA"):
        return image
    try:
        source = ImageCms.ImageCmsProfile(io.BytesIO(icc_profile))
        converted = ImageCms.profileToProfile(image, source, ImageCms.createProfile("sRGB"))
    except (ImageCms.PyCMSError, OSError, ValueError):
        return image  # a broken profile: the pixels as they are
    return converted if converted is not None else image


def _mode_for(image: Image.Image, image_format: str) -> str:
    has_alpha = image.mode in ("RGBA", "LA", "PA", "La", "RGBa") or "transparency" in image.info
    if image_format == "jpeg":
        return "L" if image.mode == "L" else "RGB"
    return "RGBA" if has_alpha else "RGB"


def _save(frames: list[Image.Image], image_format: str, timing: dict[str, Any]) -> EncodedImage:
    first = frames[0]
    out = io.BytesIO()
    options = dict(_SAVE_OPTIONS[image_format])
    if len(frames) > 1:
        options.update(save_all=True, append_images=frames[1:], **timing)
    first.save(out, format=_PILLOW_FORMAT[image_format], **options)
    return EncodedImage(out.getvalue(), first.width, first.height)
