"""Personalised messages: one render per segment, bytes that parse back right (CMP-3, CMP-4)."""

import hashlib
import html
import re
from datetime import UTC, datetime
from email.message import EmailMessage
from email.parser import BytesParser
from email.policy import default
from typing import Any

import jinja2
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tidings.domain.email_headers import clean_display_name
from tidings.domain.errors import InvalidInput
from tidings.rendering import (
    SIZE_WARNING_BYTES,
    CampaignContent,
    ListInfo,
    RecipientValues,
    SegmentRendering,
    Sender,
    TemplateEngine,
    preview,
    render_segment,
)

SENDER = Sender(
    name="The Ledger Désk",
    address="editors@news.example.com",
    sending_domain="news.example.com",
    reply_to="letters@news.example.com",
)

ENGINE = TemplateEngine()  # one per test module, as bootstrap builds one per process
LIST = ListInfo(campaign_id="1001", newsletter_slug="ledger", newsletter_name="The Ledger")
BASE_URL = "https://news.example.com"
NOW = datetime(2025, 3, 4, 5, 6, 7, tzinfo=UTC)
BODY = """\
# Hello {{ name | fallback: "reader" }}

Your id is {{ subscriber_id }}; this copy is {{ recipient_id }}, sent to {{ email }}.

[Manage]({{ preferences_url }})
"""


def _recipient(number: int = 1, name: str | None = "Ann <O'Neil> & Co") -> RecipientValues:
    return RecipientValues(
        address=f"reader{number}@example.org",
        name=name,
        unsubscribe_token=f"unsub-{number}",
        preferences_token=f"pref-{number}",
        subscriber_id=str(number),
        recipient_id=str(5000 + number),
    )


def _render(
    body: str = BODY, *, subject: str = "Grüße: the week", engine: TemplateEngine | None = None
) -> SegmentRendering:
    content = CampaignContent(subject=subject, preheader="Five things", body=body)
    return render_segment(
        content,
        "paid",
        sender=SENDER,
        list_info=LIST,
        base_url=BASE_URL,
        engine=engine or ENGINE,
        now=NOW,
    )


def _parse(data: bytes) -> EmailMessage:
    message = BytesParser(policy=default).parsebytes(data)
    assert isinstance(message, EmailMessage)
    return message


def _parts(message: EmailMessage) -> tuple[str, str]:
    text_part = message.get_body(("plain",))
    html_part = message.get_body(("html",))
    assert isinstance(text_part, EmailMessage)
    assert isinstance(html_part, EmailMessage)
    # Decoded parts keep the wire's CRLF; compare against Python's "\n".
    return (
        text_part.get_content().replace("\r\n", "\n"),
        html_part.get_content().replace("\r\n", "\n"),
    )


def test_the_personalised_message_parses_back_into_the_same_headers() -> None:
    """What we send is what the standard parser (and so the provider and client) reads."""
    recipient = _recipient()
    message = _parse(_render().personalise(recipient))
    digest = hashlib.sha256(b"1001:reader1@example.org").hexdigest()[:32]
    assert message["From"] == "The Ledger Désk <editors@news.example.com>"
    assert message["To"] == '"Ann <O\'Neil> & Co" <reader1@example.org>'
    assert message["Reply-To"] == "letters@news.example.com"
    assert message["Subject"] == "Grüße: the week"
    assert message["Date"].datetime == NOW
    assert message["Message-ID"] == f"<1001.{digest}@news.example.com>"
    assert message["MIME-Version"] == "1.0"
    assert message["List-Unsubscribe"] == "<https://news.example.com/unsubscribe/unsub-1>"
    assert message["List-Unsubscribe-Post"] == "List-Unsubscribe=One-Click"
    assert message["List-Id"] == "The Ledger <ledger.news.example.com>"
    assert message["Feedback-ID"] == "1001:ledger:tidings:news.example.com"
    assert message.get_content_type() == "multipart/alternative"
    assert [part.get_content_type() for part in message.iter_parts()] == [
        "text/plain",
        "text/html",
    ]
    assert message.defects == []


def test_both_alternatives_carry_the_recipients_values_escaped_only_in_html() -> None:
    """Values in HTML are escaped (a name is never markup); the text part shows them as typed."""
    text, body_html = _parts(_parse(_render().personalise(_recipient())))
    assert "Hello Ann <O'Neil> & Co" in text
    assert "Hello Ann &lt;O&#x27;Neil&gt; &amp; Co" in body_html
    assert "<O'Neil>" not in body_html
    assert "Your id is 1; this copy is 5001, sent to reader1@example.org." in " ".join(text.split())
    assert "https://news.example.com/preferences/pref-1" in text
    assert 'href="https://news.example.com/preferences/pref-1"' in body_html
    assert 'href="https://news.example.com/unsubscribe/unsub-1"' in body_html


def test_the_message_is_seven_bit_with_crlf_lines_within_the_qp_limit() -> None:
    """Any SMTP server must accept it: ASCII only, CRLF line ends, lines of at most 76."""
    data = _render().personalise(_recipient(name="Zoë " * 60))
    assert data.isascii()
    assert b"\n" not in data.replace(b"\r\n", b"")
    head, _, body = data.partition(b"\r\n\r\n")
    assert all(len(line) <= 76 for line in body.split(b"\r\n"))
    assert all(len(line) <= 998 for line in head.split(b"\r\n"))


names = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=120)


@settings(max_examples=60, deadline=None)
@given(name=names)
def test_any_name_round_trips_escaped_in_html_and_intact_in_text(name: str) -> None:
    """Whatever a subscriber calls themselves, it arrives intact and never as markup."""
    rendering = _cached_rendering()
    message = _parse(rendering.personalise(_recipient(name=name)))
    text, body_html = _parts(message)
    shown = clean_display_name(name) or "reader"
    assert f"Hello {shown}\n" in text
    assert f"Hello {html.escape(shown)}</h1>" in body_html
    assert message["To"].addresses[0].addr_spec == "reader1@example.org"


_CACHE: dict[str, SegmentRendering] = {}


def _cached_rendering() -> SegmentRendering:
    if "default" not in _CACHE:
        _CACHE["default"] = _render()
    return _CACHE["default"]


def test_ten_thousand_recipients_cost_one_template_render(monkeypatch: pytest.MonkeyPatch) -> None:
    """CMP-3: personalisation never re-runs the template engine per recipient."""
    top_level_calls: list[str] = []
    depth = [0]  # imports and includes inside a render are part of that render

    def counted(name: str) -> Any:
        original = getattr(jinja2.Template, name)

        def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
            if depth[0] == 0:
                top_level_calls.append(name)
            depth[0] += 1
            try:
                return original(self, *args, **kwargs)
            finally:
                depth[0] -= 1

        return wrapper

    for name in ("render", "make_module", "generate"):
        monkeypatch.setattr(jinja2.Template, name, counted(name))
    engine = TemplateEngine()
    rendering = _render(engine=engine)
    messages = [rendering.personalise(_recipient(number)) for number in range(10_000)]
    assert engine.renders == 1
    assert top_level_calls == ["make_module"]
    assert len({m.split(b"Message-ID: ")[1][:60] for m in messages}) == 10_000


def test_each_segment_is_rendered_once() -> None:
    """Two segments, two renders, however many recipients each has."""
    engine = TemplateEngine()
    content = CampaignContent(subject="S", preheader="", body="::: only paid\nP\n:::\nAll")
    for segment in ("free", "paid"):
        rendering = render_segment(
            content,
            segment,
            sender=SENDER,
            list_info=LIST,
            base_url=BASE_URL,
            engine=engine,
            now=NOW,
        )
        for number in range(100):
            rendering.personalise(_recipient(number))
    assert engine.renders == 2


def test_the_preheader_is_hidden_at_the_top_of_the_html() -> None:
    """Inbox previews show the preheader; the reader's view of the body must not."""
    body_html = _render().html
    span = re.search(r'<span class="preheader" style="([^"]*)">Five things', body_html)
    assert span is not None
    assert "display:none" in span[1].replace(" ", "")
    assert body_html.index("Five things") < body_html.index("<h1")


def test_a_recipient_address_that_could_inject_headers_is_refused() -> None:
    """An address is written raw into To: a CRLF in it would add headers (or recipients)."""
    rendering = _cached_rendering()
    bad = RecipientValues(
        address="ann@example.org\r\nBcc: everyone@example.org",
        name="Ann",
        unsubscribe_token="t",
        preferences_token="p",
        subscriber_id="1",
        recipient_id="2",
    )
    with pytest.raises(InvalidInput) as raised:
        rendering.personalise(bad)
    assert raised.value.field == "address"


def test_a_line_break_in_a_name_cannot_add_a_header() -> None:
    """Names arrive from forms and imports; one with CRLF must stay a name."""
    data = _cached_rendering().personalise(_recipient(name="Ann\r\nBcc: all@example.org"))
    message = _parse(data)
    assert message["Bcc"] is None
    assert message["To"].addresses[0].display_name == "Ann Bcc: all@example.org"


@pytest.mark.parametrize(
    ("field", "make"),
    [
        ("sender_name", lambda: Sender(name="A\r\nB", address="a@ex.com", sending_domain="ex.com")),
        (
            "reply_to",
            lambda: Sender(name="A", address="a@ex.com", sending_domain="ex.com", reply_to="b\n"),
        ),
        ("subject", lambda: CampaignContent(subject="Hi\nBcc: x", preheader="", body="x")),
        ("preheader", lambda: CampaignContent(subject="Hi", preheader="a\x00b", body="x")),
        ("newsletter_name", lambda: ListInfo("1", "slug", "Bad\rName")),
    ],
)
def test_header_bound_fields_with_line_breaks_are_refused(field: str, make: Any) -> None:
    """CMP-4: rejected at input with the field named, never silently stripped at send."""
    with pytest.raises(InvalidInput) as raised:
        make()
    assert raised.value.field == field


def test_html_over_100_kb_carries_a_size_warning() -> None:
    """Gmail clips large messages, hiding the footer and its unsubscribe link."""
    assert _render().warnings == ()
    big = _render(body="\n\n".join(f"Paragraph {n} " + "word " * 40 for n in range(600)))
    assert len(big.html.encode()) > SIZE_WARNING_BYTES
    assert len(big.warnings) == 1
    assert "Gmail clips" in big.warnings[0]


def test_the_date_follows_now_when_given() -> None:
    """A long send stamps each message with when it left, not when rendering began."""
    later = datetime(2025, 3, 4, 9, 0, 0, tzinfo=UTC)
    message = _parse(_cached_rendering().personalise(_recipient(), now=later))
    assert message["Date"].datetime == later


def test_the_preview_shows_sample_values_in_html_and_text() -> None:
    """The preview endpoint shows what a reader sees, with no slot tokens left over."""
    content = CampaignContent(subject="Hello", preheader="", body=BODY)
    shown = preview(
        content, "free", sender=SENDER, list_info=LIST, base_url=BASE_URL, engine=ENGINE, now=NOW
    )
    assert "Hello Sam Reader" in shown.html
    assert "Hello Sam Reader" in shown.text
    assert "tds" not in shown.html
    assert "tds" not in shown.text
    assert shown.subject == "Hello"


def test_attribute_merge_tags_fill_each_recipients_custom_field_or_the_fallback() -> None:
    """`{{ attribs.city }}` (AUD-12) personalises with the person's own data: escaped in
    HTML, intact in text, on one line, and the fallback when the field is missing, empty or
    not text or a number."""
    rendering = _render(
        'City: {{ attribs.city | fallback: "your town" }}. Plan: {{ attribs.plan }}.'
    )
    cases = [
        ({"city": "Zürich <North> & Co", "plan": 3}, "Zürich <North> & Co", "3"),
        ({"city": "Porto\r\nBcc: x@example.org"}, "Porto Bcc: x@example.org", ""),
        ({"city": "", "plan": True}, "your town", ""),
        (None, "your town", ""),
    ]
    for number, (attributes, city, plan) in enumerate(cases, start=1):
        message = _parse(rendering.personalise(_recipient(number)._replace(attributes=attributes)))
        text, body = _parts(message)
        assert f"City: {city}. Plan: {plan}." in text
        assert f"City: {html.escape(city)}. Plan: {plan}." in body
        assert message["Bcc"] is None


def test_an_attribute_tag_without_a_key_or_in_a_link_is_refused() -> None:
    """A typo in a custom-field tag is caught when the draft is saved, and a subscriber's
    data never chooses where a link points."""
    for body in ("{{ attribs }}", "{{ attribs. }}", "{{ city.name }}"):
        with pytest.raises(InvalidInput, match=r"attribs\.KEY"):
            _render(body)
    with pytest.raises(InvalidInput, match="inside a link"):
        _render("[go](https://example.org/{{ attribs.city }})")


def test_the_hidden_preheader_trips_no_spam_filter_rule_for_hidden_text() -> None:
    """SpamAssassin scores text in the background's colour (HTML_FONT_LOW_CONTRAST) and text
    of 0-1 px (__FONT_INVIS, FONT_INVIS_*) as hidden spam; the preheader hides by display,
    height and opacity instead, so a campaign with one scores no worse (issue 35 item 10)."""
    body_html = _render().html
    span = re.search(r'<span class="preheader" style="([^"]*)">', body_html)
    assert span is not None
    style = span[1].replace(" ", "").lower()
    assert "display:none" in style
    assert "max-height:0" in style
    assert "color:" not in style
    assert re.search(r"font(?:-size)?:0*[01](?:\.\d+)?(?:px|pt)", style) is None
