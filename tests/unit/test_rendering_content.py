"""Content becomes safe HTML per segment: segment blocks, merge tags, sanitising (CMP-2, AUD-11)."""

import pytest

from tests.support.clock import START
from tidings.domain.errors import InvalidInput
from tidings.rendering import (
    CampaignContent,
    ListInfo,
    RecipientValues,
    Sender,
    TemplateEngine,
    check_content,
    render_segment,
)
from tidings.rendering.content import BodyFormat

SENDER = Sender(name="The Desk", address="desk@news.example.com", sending_domain="example.com")
LIST = ListInfo(campaign_id="7", newsletter_slug="weekly", newsletter_name="The Weekly")
ANN = RecipientValues(
    address="ann@example.org",
    name="Ann",
    unsubscribe_token="tok",
    preferences_token="pref",
    subscriber_id="3",
    recipient_id="9",
)

ENGINE = TemplateEngine()  # one per test module, as bootstrap builds one per process


def _content(body: str, body_format: BodyFormat = "markdown") -> CampaignContent:
    return CampaignContent(subject="Issue 1", preheader="", body=body, body_format=body_format)


def _seen(body: str, segment: str, body_format: BodyFormat = "markdown") -> tuple[str, str]:
    """The HTML and text `segment` would get, with Ann's values filled in."""
    rendering = render_segment(
        _content(body, body_format),
        segment,
        sender=SENDER,
        list_info=LIST,
        base_url="https://news.example.com",
        engine=ENGINE,
        now=START,
    )
    return rendering.html_for(ANN), rendering.text_for(ANN)


SEGMENTED = """\
Everyone reads this.

::: only paid
Paid readers see this.
:::

::: except paid
Upgrade to read more.
:::
"""


@pytest.mark.parametrize("body_format", ["markdown", "html"])
def test_segment_blocks_show_each_passage_only_to_its_segments(body_format: BodyFormat) -> None:
    """Free and paid readers get different versions of one campaign (AUD-11 + CMP-2)."""
    paid_html, paid_text = _seen(SEGMENTED, "paid", body_format)
    free_html, free_text = _seen(SEGMENTED, "free", body_format)
    for html, text in [(paid_html, paid_text), (free_html, free_text)]:
        assert "Everyone reads this." in html
        assert "Everyone reads this." in text
    assert "Paid readers see this." in paid_html
    assert "Paid readers see this." in paid_text
    assert "Upgrade to read more." not in paid_html + paid_text
    assert "Upgrade to read more." in free_html
    assert "Upgrade to read more." in free_text
    assert "Paid readers see this." not in free_html + free_text


def test_a_block_can_name_several_segments_and_blocks_nest() -> None:
    """Comped readers get the paid passage too; an inner block narrows the outer one."""
    body = "::: only paid, comped\nMembers.\n::: except comped\nPaying members.\n:::\n:::\n"
    assert "Paying members." in _seen(body, "paid")[0]
    comped_html = _seen(body, "comped")[0]
    assert "Members." in comped_html
    assert "Paying members." not in comped_html
    assert "Members." not in _seen(body, "free")[0]


def test_html_elements_can_be_marked_for_segments_and_the_marks_do_not_ship() -> None:
    """HTML authors mark an element; readers never see which segments exist."""
    body = '<p>All.</p><div data-only="paid"><p>Paid.</p></div><p data-except="paid">Free.</p>'
    paid = _seen(body, "paid", "html")[0]
    free = _seen(body, "free", "html")[0]
    assert "Paid." in paid
    assert "Free." not in paid
    assert "Free." in free
    assert "Paid." not in free
    assert "data-only" not in paid + free
    assert "data-except" not in paid + free


def test_check_content_lists_the_segments_a_body_mentions() -> None:
    """The campaign needs to know which versions exist to render each one."""
    assert check_content(_content(SEGMENTED)) == {"paid"}
    html = '<p data-only="comped">x</p>\n::: except free\ny\n:::'
    assert check_content(_content(html, "html")) == {"comped", "free"}


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("::: only paid\nNever closed.", "line 1: '::: only' is never closed"),
        ("text\n:::\n", "line 2: ':::' closes no open block"),
        ("::: sometimes paid\nx\n:::", "unknown block"),
        ("::: only Paid!\nx\n:::", "is not a segment name"),
        ("::: only\nx\n:::", "names at least one segment"),
        ("::: button\nGo\n:::", "holds a URL"),
        ("::: button javascript:alert(1)\nGo\n:::", "http(s) or mailto"),
    ],
)
def test_malformed_blocks_are_refused_with_a_line_number(body: str, message: str) -> None:
    """An author hears about a broken block when saving, not as a mangled email to readers."""
    with pytest.raises(InvalidInput, match=message.replace("(", r"\(").replace(")", r"\)")) as e:
        check_content(_content(body))
    assert e.value.field == "body"


def test_block_lines_inside_a_markdown_code_fence_are_code() -> None:
    """A newsletter about Markdown can show the syntax without triggering it."""
    body = "```\n::: only paid\n```\n"
    html = _seen(body, "free")[0]
    assert "::: only paid" in html


def test_callouts_and_buttons_use_the_design_system_components() -> None:
    """Content reaches the shared component set, not ad-hoc markup."""
    body = "::: callout\nNote **this**.\n:::\n\n::: button https://example.com/join\nJoin us\n:::\n"
    html, text = _seen(body, "free")
    assert 'class="callout-cell"' in html
    assert 'class="button-link"' in html
    assert 'href="https://example.com/join"' in html
    assert "> Note this." in text
    assert "Join us: https://example.com/join" in text


def test_a_callout_whose_passages_are_all_for_other_segments_is_not_shown() -> None:
    """Free readers must not get an empty coloured box where the paid note was."""
    body = "::: callout\n::: only paid\nPaid note.\n:::\n:::\n"
    assert 'class="callout-cell"' not in _seen(body, "free")[0]


def test_merge_tags_fill_in_the_name_or_its_fallback() -> None:
    """Ann reads "Hi Ann"; someone who never gave a name reads "Hi reader"."""
    rendering = render_segment(
        _content("Hi {{ name | fallback: \"reader\" }}, or {{first_name|fallback:'you'}}."),
        "free",
        sender=SENDER,
        list_info=LIST,
        base_url="https://news.example.com",
        engine=ENGINE,
        now=START,
    )
    assert "Hi Ann, or Ann." in rendering.text_for(ANN)
    nameless = RecipientValues(
        address="x@example.org",
        name=None,
        unsubscribe_token="t",
        preferences_token="p",
        subscriber_id="1",
        recipient_id="2",
    )
    assert "Hi reader, or you." in rendering.text_for(nameless)
    assert "Hi reader, or you." in rendering.html_for(nameless)


def test_url_merge_tags_become_the_recipients_links() -> None:
    """Authors can place their own unsubscribe or preferences link anywhere in the body."""
    html, text = _seen("[Leave]({{ unsubscribe_url }}) or [tune]({{ preferences_url }})", "free")
    assert 'href="https://news.example.com/unsubscribe/tok"' in html
    assert "tune (https://news.example.com/preferences/pref)" in " ".join(text.split())


@pytest.mark.parametrize("tag", ["{{ 7*7 }}", "{{ config }}", "{{ name.__class__ }}", "{{ nme }}"])
def test_anything_but_a_known_merge_tag_is_refused_and_never_evaluated(tag: str) -> None:
    """Content is data: running it through a template engine would execute authors' code."""
    with pytest.raises(InvalidInput, match="is not a merge tag") as raised:
        _seen(f"Result: {tag}", "free")
    assert raised.value.field == "body"


def test_template_statements_in_content_are_shown_as_text() -> None:
    """`{% ... %}` means nothing to us; it must reach the reader literally, not run."""
    html, text = _seen("{% for x in range(3) %}loop{% endfor %} {# c #}", "free")
    assert "{% for x in range(3) %}loop{% endfor %} {# c #}" in text
    assert "loop" in html
    assert "looploop" not in html


def test_a_name_cannot_become_a_link_target() -> None:
    """A subscriber named "javascript:…" must not decide where a link points."""
    with pytest.raises(InvalidInput, match="inside a link"):
        _seen("[click]({{ name }})", "free")
    with pytest.raises(InvalidInput, match="inside a link"):
        _seen('<a href="https://x.example/?n={{ email }}">x</a>', "free", "html")


def test_html_content_loses_scripts_handlers_and_javascript_urls() -> None:
    """Pasted HTML must not carry active content into readers' mail clients."""
    body = (
        '<p onclick="steal()">Hi<script>alert(1)</script></p>'
        '<a href="javascript:alert(2)">bad</a><img src="x.png" onerror="alert(3)">'
        '<style>p { display: none }</style><iframe src="https://evil.example"></iframe>'
    )
    html = _seen(body, "free", "html")[0]
    for forbidden in ["onclick", "<script", "alert(", "javascript:", "onerror", "<iframe"]:
        assert forbidden not in html
    assert "Hi" in html


def test_raw_html_in_markdown_is_shown_as_text() -> None:
    """Markdown authors cannot inject markup: HTML is off in the Markdown preset."""
    html = _seen('<img src=x onerror="alert(1)"> and [x](javascript:alert(1))', "free")[0]
    assert "<img src=x" not in html
    assert "&lt;img" in html
    assert 'href="javascript' not in html


def test_merge_tags_in_the_subject_are_refused() -> None:
    """The subject is encoded once per segment; a tag there would be sent literally."""
    with pytest.raises(InvalidInput) as raised:
        CampaignContent(subject="Hi {{ name }}", preheader="", body="x")
    assert raised.value.field == "subject"
