"""The public pages: complete, escaped, script-free documents whose forms only ever POST."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable
from html.parser import HTMLParser

import pytest

from tidings.domain.errors import InvalidInput
from tidings.rendering import DEFAULT_THEME, Pages, PreferenceItem, TemplateEngine

ENGINE = TemplateEngine()  # one per test module, as bootstrap builds one per process

HOSTILE = "<script>alert(1)</script>"
VOID = {"meta", "input", "br", "img", "link", "hr", "source", "wbr", "area", "col", "base"}
NEWSLETTERS = [("weekly", "The Weekly", "Every Friday"), ("alerts", "Alerts", "When it matters")]
ITEMS = [
    PreferenceItem(newsletter_id=3, name="The Weekly", description="Fridays", subscribed=True),
    PreferenceItem(newsletter_id=7, name="Alerts", description="", subscribed=False),
]


class Document(HTMLParser):
    """Parses a page strictly enough to catch unbalanced tags, and collects what tests read."""

    def __init__(self, html: str) -> None:
        super().__init__(convert_charrefs=True)
        self.open: list[str] = []
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.texts: dict[str, list[str]] = {}
        self.forms: list[dict[str, object]] = []
        self.feed(html)
        self.close()
        assert self.open == [], f"unclosed: {self.open}"

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        attributes = dict(attrs)
        self.tags.append((tag, attributes))
        if tag == "form":
            self.forms.append({**attributes, "fields": [], "buttons": []})
        elif tag == "input" and self.forms and "form" in self.open:
            self.forms[-1]["fields"].append(attributes)  # type: ignore[attr-defined]
        elif tag == "button" and "form" in self.open:
            self.forms[-1]["buttons"].append(attributes)  # type: ignore[attr-defined]
        if tag not in VOID:
            self.open.append(tag)

    def handle_endtag(self, tag: str) -> None:
        assert self.open, f"</{tag}> closes nothing"
        assert self.open[-1] == tag, f"</{tag}> closes {self.open[-1]}"
        self.open.pop()

    def handle_data(self, data: str) -> None:
        for tag in {*self.open}:
            self.texts.setdefault(tag, []).append(data)

    def text(self, tag: str) -> str:
        return " ".join("".join(self.texts.get(tag, [])).split())

    def count(self, tag: str) -> int:
        return sum(1 for name, _ in self.tags if name == tag)


PAGES: dict[str, Callable[[Pages, str], str]] = {
    "subscribe_form": lambda p, name: p.subscribe_form(
        [("weekly", name, name), *NEWSLETTERS], action_url="/api/subscribe", error=name
    ),
    "subscribe_thanks": lambda p, name: p.subscribe_thanks(),
    "confirm_prompt": lambda p, name: p.confirm_prompt(
        newsletter_name=name, action_url="/confirm/tok"
    ),
    "confirmed": lambda p, name: p.confirmed(
        newsletter_name=name, preferences_url="/preferences/t"
    ),
    "unsubscribe_prompt": lambda p, name: p.unsubscribe_prompt(
        newsletter_name=name, action_url="/unsubscribe/tok", preferences_url="/preferences/t"
    ),
    "unsubscribed": lambda p, name: p.unsubscribed(newsletter_name=name, preferences_url=None),
    "preferences": lambda p, name: p.preferences(
        items=[PreferenceItem(1, name, name, True), *ITEMS], action_url="/preferences/t", saved=True
    ),
    "link_expired": lambda p, name: p.link_problem(reason="expired"),
    "link_invalid": lambda p, name: p.link_problem(reason="invalid"),
}
NAMED_PAGES = ["subscribe_form", "confirm_prompt", "confirmed", "unsubscribe_prompt"]
NAMED_PAGES += ["unsubscribed", "preferences"]


def _form(html: str) -> dict[str, object]:
    forms = Document(html).forms
    assert len(forms) == 1
    return forms[0]


def _fields(form: dict[str, object]) -> list[dict[str, str | None]]:
    return form["fields"]  # type: ignore[return-value]


@pytest.mark.parametrize("page", PAGES)
def test_every_page_is_a_complete_document_with_a_title_and_a_heading(page: str) -> None:
    """Routes return these as whole responses: a broken or untitled page is what the reader sees."""
    html = PAGES[page](Pages(engine=ENGINE), "The Weekly")
    document = Document(html)
    assert html.startswith("<!DOCTYPE html>")
    assert ("html", {"lang": "en"}) in document.tags
    assert document.count("title") == document.count("h1") == 1
    assert document.text("title").endswith(f"· {DEFAULT_THEME.site_name}")
    assert document.text("h1")
    viewport = {"name": "viewport", "content": "width=device-width, initial-scale=1"}
    assert ("meta", viewport) in document.tags  # mobile browsers lay it out at device width
    assert "@media only screen and (max-width: 620px)" in html


@pytest.mark.parametrize("page", PAGES)
def test_pages_run_no_script_and_load_nothing_from_elsewhere(page: str) -> None:
    """Mail scanners must not be able to act for the reader, and a token page must not leak its URL
    to a third party through a stylesheet, font or image request."""
    html = PAGES[page](Pages(engine=ENGINE), "The Weekly")
    document = Document(html)
    for tag in ("script", "link", "img", "iframe", "object"):
        assert document.count(tag) == 0, tag
    for tag, attributes in document.tags:
        assert not [name for name in attributes if name.startswith("on")], tag
        assert "src" not in attributes, tag
    assert "url(" not in html
    assert ("meta", {"name": "referrer", "content": "no-referrer"}) in document.tags


@pytest.mark.parametrize("page", NAMED_PAGES)
def test_a_hostile_newsletter_name_is_escaped_on_every_page(page: str) -> None:
    """Names, descriptions and error text are publisher or user input: they must stay text."""
    html = PAGES[page](Pages(engine=ENGINE), HOSTILE)
    assert "<script" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html


@pytest.mark.parametrize("page", PAGES)
def test_every_state_change_is_a_post(page: str) -> None:
    """A GET must never change state: mail scanners and link previews open every link."""
    for form in Document(PAGES[page](Pages(engine=ENGINE), "The Weekly")).forms:
        assert form["method"] == "post"


def test_subscribe_form_posts_email_name_and_newsletter_slug() -> None:
    """The subscribe route reads exactly these fields; a renamed input silently loses sign-ups."""
    html = Pages(engine=ENGINE).subscribe_form(NEWSLETTERS, action_url="/api/subscribe")
    form = _form(html)
    assert (form["method"], form["action"]) == ("post", "/api/subscribe")
    fields = {(f["name"], f["type"], f.get("value")) for f in _fields(form)}
    assert fields == {
        ("email", "email", ""),
        ("name", "text", ""),
        ("newsletter", "checkbox", "weekly"),
        ("newsletter", "checkbox", "alerts"),
    }
    email = next(f for f in _fields(form) if f["name"] == "email")
    assert "required" in email
    assert "Every Friday" in html
    assert form["buttons"] == [{"type": "submit", "class": "button-link form-button"}]


def test_subscribe_form_keeps_what_was_typed_and_ticks_the_chosen_newsletters() -> None:
    """A reader whose address had a typo must not type everything again, nor lose their
    choice of newsletters; what they typed comes back escaped, never as markup."""
    html = Pages(engine=ENGINE).subscribe_form(
        NEWSLETTERS,
        action_url="/subscribe",
        error="Check the address",
        email=f"ann@example{HOSTILE}",
        name=f'Ann "{HOSTILE}',
        chosen={"alerts"},
    )
    assert HOSTILE not in html
    fields = {f["name"]: f for f in _fields(_form(html)) if f["name"] != "newsletter"}
    assert fields["email"]["value"] == f"ann@example{HOSTILE}"
    assert fields["name"]["value"] == f'Ann "{HOSTILE}'
    ticked = {f["value"]: "checked" in f for f in _fields(_form(html)) if f["name"] == "newsletter"}
    assert ticked == {"weekly": False, "alerts": True}


def test_subscribe_form_with_one_newsletter_chooses_it_without_asking() -> None:
    """A site with one list should not make readers pick from a list of one."""
    form = _form(Pages(engine=ENGINE).subscribe_form(NEWSLETTERS[:1], action_url="/api/subscribe"))
    newsletter = [f for f in _fields(form) if f["name"] == "newsletter"]
    assert newsletter == [{"type": "hidden", "name": "newsletter", "value": "weekly"}]


def test_subscribe_form_shows_an_error_only_when_given() -> None:
    """A failed submission must say why, announced to screen readers; a fresh form says nothing."""
    pages = Pages(engine=ENGINE)
    with_error = pages.subscribe_form(NEWSLETTERS, action_url="/s", error="Enter a valid address")
    assert re.search(r'role="alert">Enter a valid address<', with_error)
    assert 'role="alert"' not in pages.subscribe_form(NEWSLETTERS, action_url="/s")


def test_subscribe_form_without_newsletters_offers_no_form() -> None:
    """A form that can only fail is worse than saying there is nothing to join."""
    html = Pages(engine=ENGINE).subscribe_form([], action_url="/api/subscribe")
    assert Document(html).forms == []
    assert "nothing to subscribe to" in html


def test_subscribe_thanks_is_byte_identical_across_calls() -> None:
    """AUD-5: any difference between answers would tell a stranger whether an address is known."""
    first = Pages(engine=ENGINE).subscribe_thanks()
    assert (
        Pages(engine=ENGINE).subscribe_thanks() == first == Pages(engine=ENGINE).subscribe_thanks()
    )
    assert "Check your inbox" in Document(first).text("h1")


@pytest.mark.parametrize(
    ("page", "action", "button"),
    [
        ("confirm_prompt", "/confirm/tok", "Confirm subscription"),
        ("unsubscribe_prompt", "/unsubscribe/tok", "Unsubscribe"),
    ],
)
def test_link_pages_wait_for_a_button_press(page: str, action: str, button: str) -> None:
    """AUD-6/7: opening the link changes nothing; only the reader's press POSTs, no script does."""
    html = PAGES[page](Pages(engine=ENGINE), "The Weekly")
    document = Document(html)
    form = _form(html)
    assert (form["method"], form["action"]) == ("post", action)
    assert document.text("button") == button
    assert "<script" not in html.lower()
    assert "submit()" not in html
    assert not [a for t, a in document.tags if t == "meta" and "http-equiv" in a]  # no refresh


def test_unsubscribe_prompt_posts_the_one_click_body() -> None:
    """RFC 8058: the page's button sends what a mail client sends, so one POST route serves both."""
    form = _form(
        Pages(engine=ENGINE).unsubscribe_prompt(newsletter_name="W", action_url="/unsubscribe/t")
    )
    assert _fields(form) == [{"type": "hidden", "name": "List-Unsubscribe", "value": "One-Click"}]


@pytest.mark.parametrize("page", ["confirmed", "unsubscribe_prompt", "unsubscribed"])
def test_preferences_are_linked_only_when_there_is_a_preferences_url(page: str) -> None:
    """Readers leaving one newsletter may want to keep others; without a URL there is no link."""
    pages = Pages(engine=ENGINE)
    render = getattr(pages, page)
    extra = {"action_url": "/x"} if page == "unsubscribe_prompt" else {}
    linked = render(newsletter_name="W", preferences_url="/preferences/t", **extra)
    plain = render(newsletter_name="W", preferences_url=None, **extra)
    assert ("a", {"href": "/preferences/t"}) in Document(linked).tags
    assert Document(plain).count("a") == 0


def test_preferences_has_a_ticked_checkbox_per_subscribed_newsletter() -> None:
    """The form must show the truth and post back newsletter ids, ticked or not."""
    html = Pages(engine=ENGINE).preferences(items=ITEMS, action_url="/preferences/t", saved=False)
    form = _form(html)
    assert (form["method"], form["action"]) == ("post", "/preferences/t")
    boxes = [(f["name"], f["type"], f["value"], "checked" in f) for f in _fields(form)]
    assert boxes == [("newsletter", "checkbox", "3", True), ("newsletter", "checkbox", "7", False)]
    assert Document(html).text("button") == "Save preferences"
    assert 'role="status"' not in html  # "saved" is shown only after a save


def test_preferences_confirm_a_save() -> None:
    """After a POST the reader needs to know it worked."""
    html = Pages(engine=ENGINE).preferences(items=ITEMS, action_url="/preferences/t", saved=True)
    assert re.search(r'role="status">Your preferences are saved.<', html)


@pytest.mark.parametrize(
    ("reason", "heading", "sentence"),
    [
        (
            "expired",
            "This link has expired",
            "This link has expired. Subscribe again to get a new one.",
        ),
        ("invalid", "This link is not valid", "This link is not valid."),
    ],
)
def test_link_problem_pages_say_what_to_do_in_plain_words(
    reason: str, heading: str, sentence: str
) -> None:
    """A stale link is common (old emails); the reader gets a human page, not a stack trace."""
    document = Document(Pages(engine=ENGINE).link_problem(reason=reason))  # type: ignore[arg-type]
    assert document.text("h1") == heading
    assert sentence in document.text("p")
    assert "Traceback" not in document.text("body")


def test_an_expired_link_can_lead_back_to_the_subscribe_form() -> None:
    """Expired confirmations are recovered by subscribing again; make that one click away."""
    html = Pages(engine=ENGINE).link_problem(reason="expired", subscribe_url="/subscribe")
    assert ("a", {"class": "button-link", "href": "/subscribe"}) in Document(html).tags


@pytest.mark.parametrize(
    "url", ["javascript:alert(1)", '/x" onclick="alert(1)', "//evil.example/x", "data:text/html,x"]
)
def test_a_url_that_could_run_script_or_leave_the_site_is_refused(url: str) -> None:
    """Escaping keeps a URL inside its attribute but cannot make a javascript: URL harmless."""
    with pytest.raises(InvalidInput) as raised:
        Pages(engine=ENGINE).confirm_prompt(newsletter_name="W", action_url=url)
    assert raised.value.field == "action_url"


def test_pages_take_their_colours_fonts_and_name_from_the_theme() -> None:
    """The pages are the same brand as the emails: one theme restyles both."""
    theme = dataclasses.replace(
        DEFAULT_THEME, accent_color="#123456", ui_font="Inter, sans-serif", site_name="Harbour"
    )
    html = Pages(theme, engine=ENGINE).confirm_prompt(newsletter_name="W", action_url="/confirm/t")
    assert "#123456" in html
    assert DEFAULT_THEME.accent_color not in html
    assert "Inter, sans-serif" in html
    assert Document(html).text("title") == "Confirm your subscription · Harbour"
