"""The quoted-printable skeleton decodes to the text with each value in place (CMP-3)."""

import quopri
import re

from hypothesis import example, given
from hypothesis import strategies as st

from tidings.rendering.qp import encode_value, encode_with_slots

SLOT = re.compile(r"tdsabc(\d{3})z")
text = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=300)
values = st.lists(
    st.text(st.characters(blacklist_categories=("Cs", "Cc")), max_size=200), min_size=1, max_size=4
)


@given(pieces=st.lists(text, min_size=1, max_size=5), slot_values=values)
@example(pieces=["\n", ""], slot_values=[""])  # an empty value closing the last line
def test_substituted_skeleton_decodes_to_the_text_with_values(
    pieces: list[str], slot_values: list[str]
) -> None:
    """Whatever the body and values, the reader sees exactly the body with the values in it."""
    slot_numbers = [n % len(slot_values) for n in range(len(pieces) - 1)]
    source = "".join(
        piece + (f"tdsabc{slot_numbers[i]:03d}z" if i < len(slot_numbers) else "")
        for i, piece in enumerate(pieces)
    )
    parts, slots = encode_with_slots(source, SLOT)
    assert slots == slot_numbers
    encoded = [encode_value(value.encode()) for value in slot_values]
    wire = parts[0] + b"".join(
        encoded[slot] + part for slot, part in zip(slots, parts[1:], strict=True)
    )
    assert wire.isascii()
    assert all(len(line) <= 76 for line in wire.split(b"\r\n"))
    expected = SLOT.sub(lambda m: slot_values[int(m[1])], source)
    expected = expected.replace("\r\n", "\n").replace("\r", "\n")
    decoded = quopri.decodestring(wire).decode().replace("\r\n", "\n")
    # A line break closes the body unless the template already ends with one (a value
    # substituted at the very end, even an empty one, does not change that).
    template_ends_line = source.replace("\r\n", "\n").replace("\r", "\n").endswith("\n")
    assert decoded == (expected if template_ends_line else expected + "\n")


def test_short_values_are_encoded_on_one_line() -> None:
    """The common case (a name, a token) costs one C call and no wrapping."""
    assert encode_value(b"Ann") == b"Ann"
    assert encode_value("Zoë = 1".encode()) == b"Zo=C3=AB =3D 1"
    long_value = encode_value(b"x" * 200)
    assert all(len(line) <= 75 for line in long_value.split(b"=\r\n"))
    assert long_value.replace(b"=\r\n", b"") == b"x" * 200
