"""The plain-text alternative says what the HTML says, links included (CMP-3)."""

from tidings.rendering.markup import markdown_to_html, sanitise_html
from tidings.rendering.plaintext import WIDTH, html_to_text


def _text(markdown: str) -> str:
    return html_to_text(sanitise_html(markdown_to_html(markdown)))


def test_links_keep_their_url_after_the_text() -> None:
    """A plain-text reader must still be able to follow every link."""
    assert _text("Read [the story](https://example.com/s?a=1&b=2).") == (
        "Read the story (https://example.com/s?a=1&b=2)."
    )


def test_a_link_whose_text_is_its_url_is_not_repeated() -> None:
    """Writing "https://x (https://x)" is noise."""
    assert _text("<https://example.com/a>") == "https://example.com/a"
    assert _text("[ann@example.org](mailto:ann@example.org)") == "ann@example.org"


def test_headings_lists_quotes_and_rules_read_like_a_plain_email() -> None:
    """The text part is read by people (and spam filters), not only by machines."""
    text = _text("# Title\n\n## Part\n\n- one\n- two\n\n1. first\n2. second\n\n> quoted\n\n---\n")
    assert text == (
        "Title\n=====\n\nPart\n----\n\n- one\n- two\n\n1. first\n2. second\n\n> quoted\n\n"
        + "-" * 24
    )


def test_long_paragraphs_wrap_without_breaking_urls() -> None:
    """Short lines read well in any client; a URL split across lines stops working."""
    url = "https://example.com/" + "x" * 90
    text = _text(("word " * 40) + f"[link]({url})")
    assert all(len(line) <= WIDTH for line in text.splitlines() if url not in line)
    assert f"({url})" in text


def test_nested_lists_are_indented_under_their_item() -> None:
    """Structure survives: a sub-point stays visibly under its point."""
    assert _text("- a\n  - b\n- c") == "- a\n   - b\n- c"


def test_preformatted_text_keeps_its_line_breaks() -> None:
    """Code and poetry lose their meaning when reflowed."""
    assert _text("```\nline 1\n  line 2\n```") == "line 1\n  line 2"


def test_images_become_their_alt_text_and_breaks_new_lines() -> None:
    """Alt text is what a text-only reader can know about an image."""
    assert _text("![The pier at dawn](https://example.com/p.jpg)") == "[The pier at dawn]"
    assert html_to_text("<p>a<br>b</p>") == "a\nb"


def test_table_rows_are_lines_with_separated_cells() -> None:
    """A table's numbers stay readable in the text part."""
    assert _text("| a | b |\n|---|---|\n| 1 | 2 |") == "a | b\n1 | 2"


def test_entities_are_decoded() -> None:
    """A literal "&amp;" in a plain-text email is a visible bug."""
    assert html_to_text("<p>Tom &amp; Jerry &lt;3 it&#x27;s</p>") == "Tom & Jerry <3 it's"
