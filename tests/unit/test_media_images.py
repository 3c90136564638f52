"""The media library's image rules (CMP-6, issue 40 items 1 and 5): what Pillow is given and
what it writes. Every stored file is opened again with Pillow to check its size, that no EXIF
or GPS survived, that an animation kept its frames; every bad file is refused with a reason."""

import io
import re
import time
from importlib.resources import files

import pytest
from PIL import Image

from tests.support import images
from tidings.domain.media import (
    MediaRefused,
    clean_alt,
    clean_filename,
    insertion,
    media_type_of,
    stored_name,
)
from tidings.rendering.images import prepare_image
from tidings.rendering.theme import CONTENT_PADDING, CONTENT_WIDTH, LAYOUT_WIDTH

LIMIT = 40_000_000


def test_the_content_width_is_the_email_layouts_column() -> None:
    """Images are sized for the column of the mail they go in: if the stylesheet's column or
    padding changed without the constant, every image would be blurred or overflow."""
    css = files("tidings.rendering").joinpath("templates/styles.css").read_text()
    assert f".container {{ width: 100%; max-width: {LAYOUT_WIDTH}px;" in css
    content = re.search(r"\.content \{ padding: (\d+)px (\d+)px", css)
    assert content is not None
    assert int(content.group(2)) == CONTENT_PADDING
    assert CONTENT_WIDTH == 504


def test_a_wide_image_is_stored_at_the_column_width_and_twice_it() -> None:
    """A 1600 px photo goes out at 504 px (and 1008 px for sharp screens), not at 1600."""
    prepared = prepare_image(images.png(1600, 900), max_pixels=LIMIT)
    one, two = images.opened(prepared.one_x.data), images.opened(prepared.two_x.data)
    assert (one.format, one.size) == ("PNG", (504, 284))
    assert (two.format, two.size) == ("PNG", (1008, 567))
    assert (prepared.original_width, prepared.original_height) == (1600, 900)


def test_a_narrow_image_is_never_enlarged_and_is_stored_once() -> None:
    """Enlarging adds blur and bytes; a small image is its own 2× copy."""
    prepared = prepare_image(images.png(300, 200), max_pixels=LIMIT)
    assert prepared.one_x == prepared.two_x
    assert images.opened(prepared.one_x.data).size == (300, 200)


def test_a_phone_photo_loses_its_exif_and_gps_and_is_turned_upright() -> None:
    """A photo's GPS tag tells every reader where it was taken; its orientation tag, if not
    applied, shows it on its side in clients that ignore EXIF."""
    source = images.photo_with_exif(1200, 600, orientation=6)
    assert b"PhoneMaker" in source
    prepared = prepare_image(source, max_pixels=LIMIT)
    for encoded in (prepared.one_x, prepared.two_x):
        stored = images.opened(encoded.data)
        assert stored.format == "JPEG"
        assert dict(stored.getexif()) == {}
        assert "exif" not in stored.info
        assert b"PhoneMaker" not in encoded.data
        assert b"Exif" not in encoded.data
    # Orientation 6: the 1200×600 stored pixels are a 600×1200 portrait.
    assert images.opened(prepared.two_x.data).size == (600, 1200)
    assert images.opened(prepared.one_x.data).size == (504, 1008)


def test_an_animated_gif_stays_animated_at_both_sizes() -> None:
    """Re-encoding only the first frame would silently turn an animation into a still."""
    prepared = prepare_image(images.animated_gif(800, 400, frames=4), max_pixels=LIMIT)
    assert prepared.frames == 4
    for encoded, width in ((prepared.one_x, 504), (prepared.two_x, 800)):
        stored = Image.open(io.BytesIO(encoded.data))
        assert stored.format == "GIF"
        assert stored.n_frames == 4
        assert stored.width == width
        assert stored.info["duration"] == 150
        assert stored.info["loop"] == 0


def test_webp_with_transparency_keeps_it() -> None:
    """A logo on a transparent background must not arrive on black."""
    prepared = prepare_image(images.webp(), max_pixels=LIMIT)
    stored = images.opened(prepared.one_x.data)
    assert stored.format == "WEBP"
    assert stored.mode == "RGBA"


def test_a_50000_by_50000_png_is_refused_from_its_header_without_decoding() -> None:
    """A decompression bomb: a small file that decodes to 7.5 GB. It must be refused from
    its header, quickly, before anything is allocated."""
    bomb = images.png_bomb(50_000, 50_000)
    assert len(bomb) < 1000
    started = time.perf_counter()
    with pytest.raises(MediaRefused, match="more than 40,000,000 pixels") as refused:
        prepare_image(bomb, max_pixels=LIMIT)
    assert refused.value.field == "file"
    assert time.perf_counter() - started < 1.0


def test_an_image_over_the_operators_pixel_limit_is_refused() -> None:
    """media.max_pixels is the operator's bound, below Pillow's own."""
    with pytest.raises(MediaRefused, match="more than 1,000,000 pixels"):
        prepare_image(images.png_bomb(2000, 1000), max_pixels=1_000_000)


def test_an_animation_is_bounded_by_all_its_frames_pixels() -> None:
    """A small GIF of many frames decodes every one of them."""
    with pytest.raises(MediaRefused, match="frames together"):
        prepare_image(images.animated_gif(400, 300, frames=4), max_pixels=400_000)


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (images.SVG, "SVG images are refused: they can carry script"),
        (b"<svg xmlns='http://www.w3.org/2000/svg' onload='alert(1)'/>", "SVG"),
        (b"just some text, not an image\n", "only PNG, JPEG, GIF or WebP"),
        (b"%PDF-1.7\n", "only PNG, JPEG, GIF or WebP"),
        (b"BM" + b"\0" * 100, "only PNG, JPEG, GIF or WebP"),  # a BMP: not accepted
        (images.png(40, 30)[:60], "could not be read as a PNG image"),
    ],
)
def test_what_is_not_an_accepted_image_is_refused_with_the_reason(data: bytes, reason: str) -> None:
    """The writer must learn why (SVG, unknown type, damaged), not just "invalid"."""
    with pytest.raises(MediaRefused, match=reason) as refused:
        prepare_image(data, max_pixels=LIMIT)
    assert refused.value.field == "file"


@pytest.mark.parametrize(
    "polyglot",
    [
        images.png(40, 30) + images.HTML_PAYLOAD,  # HTML appended after IEND
        images.png_with_text(images.HTML_PAYLOAD),  # HTML in a text chunk Pillow reads
        images.gif_with_comment(b"<script>alert(1)</script>"),  # in a GIF comment
        b"GIF89a/*" + images.gif_with_comment(b"x")[8:] + b"*/=1;alert(1)//<script ",
    ],
)
def test_an_image_that_is_also_html_or_script_is_refused(polyglot: bytes) -> None:
    """A polyglot opens as an image and as a page: served by another server, or sniffed by
    an old browser, its script runs on the site's origin."""
    with pytest.raises(MediaRefused, match="also reads as HTML or script"):
        prepare_image(polyglot, max_pixels=LIMIT)


def test_only_pillows_output_is_stored_no_chunk_of_the_upload() -> None:
    """Bytes hidden in an image (a text chunk here) must not reach the stored file: what is
    stored is pixels re-encoded by Pillow, nothing copied from the upload."""
    marker = b"PRIVATE-NOTE-7f3c"
    prepared = prepare_image(images.png_with_text(marker, key="Secret"), max_pixels=LIMIT)
    assert marker not in prepared.one_x.data
    assert images.opened(prepared.one_x.data).info == {}


@pytest.mark.parametrize(
    ("name", "reason"),
    [
        ("../../etc/passwd.png", "path separators"),
        ("photos/cat.png", "path separators"),
        ("C:\\photos\\cat.png", "path separators"),
        ("cat\x00.png", "control characters"),
        ("cat\n.png", "control characters"),
        ("cat\u202e.png", "control characters"),  # right-to-left override: a disguised name
        ("..", "not . or .."),
        ("", "no name"),
        ("a" * 256 + ".png", "longer than 255"),
    ],
)
def test_a_file_name_with_separators_or_control_characters_is_refused(
    name: str, reason: str
) -> None:
    """The name is only shown, never used as a path — and still a name that would be a
    path, or hides characters, is refused rather than quietly changed."""
    with pytest.raises(MediaRefused, match=reason):
        clean_filename(name)


def test_alt_text_is_required_and_one_line() -> None:
    """An image without alt text is a hole for readers using a screen reader."""
    with pytest.raises(MediaRefused, match="alt text is required") as refused:
        clean_alt("   ")
    assert refused.value.field == "alt"
    assert clean_alt("  A red\n barn ") == "A red barn"
    with pytest.raises(MediaRefused, match="longer than 500"):
        clean_alt("x" * 501)


def test_a_stored_name_is_the_hash_of_its_bytes() -> None:
    """Different bytes, different name: a cached copy can never be stale."""
    assert re.fullmatch(r"[0-9a-f]{32}\.png", stored_name(b"a", "png"))
    assert stored_name(b"a", "png") != stored_name(b"b", "png")
    assert stored_name(b"a", "jpeg").endswith(".jpg")
    assert media_type_of("0" * 32 + ".webp") == "image/webp"


def test_what_the_editor_inserts_escapes_the_alt_text() -> None:
    """Alt text is the writer's words: brackets must not end the Markdown image, quotes
    must not end the HTML attribute."""
    shown = insertion('A "quoted" [caption] <b>', "https://x/1.png", "https://x/2.png", 504, 300)
    assert shown.markdown == '![A "quoted" \\[caption\\] <b>](https://x/1.png)'
    assert shown.html == (
        '<img src="https://x/2.png" alt="A &quot;quoted&quot; [caption] &lt;b&gt;" '
        'width="504" height="300">'
    )
