"""The confirmation email: one clear action, the link in both parts, styled like the campaigns."""

from __future__ import annotations

import re
from html.parser import HTMLParser

import pytest

from tidings.domain.errors import InvalidInput
from tidings.rendering import (
    DEFAULT_THEME,
    Notice,
    TemplateEngine,
    render_confirmation_email,
    render_notice,
)

ENGINE = TemplateEngine()  # one per test module, as bootstrap builds one per process

URL = "https://news.example.com/confirm/tok-123?n=weekly&x=1"
VOID = {"meta", "input", "br", "img", "link", "hr", "source", "wbr", "area", "col", "base"}
IGNORE_LINE = "If you did not ask for this, ignore this email — you will not be subscribed."


class Document(HTMLParser):
    """Parses the HTML part, failing on unbalanced tags; keeps tags and text by class."""

    def __init__(self, html: str) -> None:
        super().__init__(convert_charrefs=True)
        self.open: list[tuple[str, str]] = []
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.text_by_class: dict[str, str] = {}
        self.feed(html)
        self.close()
        assert self.open == [], f"unclosed: {self.open}"

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        attributes = dict(attrs)
        self.tags.append((tag, attributes))
        if tag not in VOID:
            self.open.append((tag, attributes.get("class") or ""))

    def handle_endtag(self, tag: str) -> None:
        assert self.open, f"</{tag}> closes nothing"
        assert self.open[-1][0] == tag, f"</{tag}> closes {self.open[-1]}"
        self.open.pop()

    def handle_data(self, data: str) -> None:
        for class_name in {name for _, name in self.open if name}:
            self.text_by_class[class_name] = self.text_by_class.get(class_name, "") + data

    def text(self, class_name: str) -> str:
        return " ".join(self.text_by_class.get(class_name, "").split())


def _confirmation(**overrides: object) -> Notice:
    values: dict[str, object] = {
        "site_name": "The Harbour Press",
        "newsletter_name": "The Weekly",
        "confirm_url": URL,
        "expires_hours": 48,
        "engine": ENGINE,
    }
    return render_confirmation_email(**{**values, **overrides})  # type: ignore[arg-type]


def test_the_confirmation_link_is_in_both_parts() -> None:
    """Some readers see only the text part, and some clients hide buttons: both must carry it."""
    notice = _confirmation()
    assert URL in notice.text.splitlines()  # on a line of its own, never wrapped
    document = Document(notice.html)
    buttons = [a for tag, a in document.tags if tag == "a" and a.get("class") == "button-link"]
    assert [button["href"] for button in buttons] == [URL]
    assert document.text("button-link") == "Confirm subscription"
    assert document.text("notice-url") == URL  # the same link as plain, copyable text


def test_the_html_part_parses_as_one_balanced_document() -> None:
    """Mail clients forgive little; a stray tag can swallow the button."""
    html = _confirmation().html
    assert html.startswith("<!DOCTYPE html>")
    document = Document(html)
    assert [tag for tag, _ in document.tags].count("html") == 1
    assert [tag for tag, _ in document.tags].count("h1") == 1


def test_css_is_inlined_like_a_campaign() -> None:
    """Gmail and others drop <style>; without inlined styles the button is a bare link."""
    html = _confirmation().html
    assert re.search(r'<a class="button-link"[^>]*style="[^"]*background-color:#9b2c1f', html)
    assert re.search(r'<h1 style="[^"]*font-size:34px', html)
    style_block = re.search(r"<style>(.*?)</style>", html, re.DOTALL)
    assert style_block is not None
    assert "@media only screen and (max-width: 620px)" in style_block[1]
    assert ".button-link" not in style_block[1]


def test_the_email_says_what_to_do_if_you_did_not_ask() -> None:
    """Anyone can type someone else's address; the owner must know that ignoring it is safe."""
    notice = _confirmation()
    assert IGNORE_LINE in Document(notice.html).text("notice-note")
    assert IGNORE_LINE in notice.text
    assert notice.subject == "Confirm your subscription to The Weekly"


@pytest.mark.parametrize(("hours", "wording"), [(48, "48 hours"), (1, "1 hour")])
def test_the_email_says_when_the_link_expires(hours: int, wording: str) -> None:
    """A reader who comes back later should know why the link stopped working."""
    notice = _confirmation(expires_hours=hours)
    assert f"This link expires in {wording}." in notice.text
    assert f"This link expires in {wording}." in notice.html


def test_it_is_transactional_no_unsubscribe_but_the_publisher_is_named() -> None:
    """The reader is not on a list yet; the footer still says who sent it."""
    notice = _confirmation()
    assert "unsubscribe" not in notice.html.lower()
    assert "unsubscribe" not in notice.text.lower()
    footer = Document(notice.html).text("footer-address")
    assert footer.startswith("The Harbour Press")
    assert DEFAULT_THEME.postal_address in footer
    assert notice.text.rstrip().endswith(f"The Harbour Press\n{DEFAULT_THEME.postal_address}")


def test_names_are_escaped_in_html_and_kept_as_typed_in_text() -> None:
    """Newsletter names are publisher input; in HTML they must stay text."""
    notice = _confirmation(newsletter_name="<script>alert(1)</script> & Co")
    assert "<script" not in notice.html
    assert "&lt;script&gt;alert(1)&lt;/script&gt; &amp; Co" in notice.html
    assert "<script>alert(1)</script> & Co" in notice.text


def test_a_line_break_in_a_name_cannot_reach_the_subject_header() -> None:
    """The subject becomes a header; a newline would let a name add headers of its own."""
    notice = _confirmation(newsletter_name="Weekly\r\nBcc: victim@example.com")
    assert notice.subject == "Confirm your subscription to Weekly Bcc: victim@example.com"


@pytest.mark.parametrize("url", ["javascript:alert(1)", "/confirm/relative", 'https://x/" y'])
def test_only_an_absolute_http_url_can_be_the_confirmation_link(url: str) -> None:
    """An email link must work from any inbox and must never be script."""
    with pytest.raises(InvalidInput) as raised:
        _confirmation(confirm_url=url)
    assert raised.value.field == "confirm_url"


def test_expiry_must_be_at_least_an_hour() -> None:
    """An email saying "expires in 0 hours" would be a bug in the caller, not a message to send."""
    with pytest.raises(InvalidInput):
        _confirmation(expires_hours=0)


def test_a_generic_notice_puts_paragraphs_before_the_button_and_notes_after() -> None:
    """Other notices (e.g. a new confirmation link) reuse the layout in the same order."""
    notice = render_notice(
        subject="Sign in",
        title="Your sign-in link",
        paragraphs=["Press the button to sign in."],
        button_label="Sign in",
        button_url="https://news.example.com/signin/t",
        notes=["It works once."],
        engine=ENGINE,
    )
    html = notice.html
    assert html.index("Press the button") < html.index(">Sign in</a>") < html.index("works once")
    text = notice.text
    assert text.index("Press the button") < text.index("Sign in:\nhttps://") < text.index("once")
    assert 'class="kicker"' not in html  # no newsletter: the wordmark alone
