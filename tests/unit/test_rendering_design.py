"""One layout, one component set, one theme: styling lives in the theme alone (CMP-2)."""

import dataclasses
import re
from pathlib import Path

import pytest

from tests.support.clock import START
from tidings.domain.errors import InvalidInput
from tidings.rendering import (
    DEFAULT_THEME,
    SAMPLE_RECIPIENT,
    CampaignContent,
    ListInfo,
    Sender,
    TemplateEngine,
    Theme,
    render_segment,
)

PACKAGE = Path(__file__).parents[2] / "src" / "tidings" / "rendering"
TEMPLATES = PACKAGE / "templates"
STYLESHEET = TEMPLATES / "styles.css"
HEX_COLOUR = re.compile(r"(?<!&)#[0-9a-fA-F]{3,8}\b")  # not &#847; entities
COLOUR_FUNCTION = re.compile(r"\b(?:rgba?|hsla?)\s*\(", re.IGNORECASE)
NAMED_COLOUR = re.compile(r"(?:color|background)\s*:\s*[a-z]+\s*[;}]", re.IGNORECASE)
FONT = re.compile(r"font-family|\bfont\s*:|\bface\s*=", re.IGNORECASE)
STYLE_ATTRIBUTE = re.compile(r"\bstyle\s*=", re.IGNORECASE)

SENDER = Sender(name="The Desk", address="desk@news.example.com", sending_domain="example.com")
LIST = ListInfo(campaign_id="7", newsletter_slug="weekly", newsletter_name="The Weekly")
CONTENT = CampaignContent(
    subject="Issue",
    preheader="Inside",
    body="# Title\n\nText with [a link](https://example.com).\n\n::: callout\nNote\n:::\n\n"
    "::: button https://example.com/go\nGo\n:::\n",
)

ENGINE = TemplateEngine()  # one per test module, as bootstrap builds one per process


def _html(theme: Theme = DEFAULT_THEME) -> str:
    rendering = render_segment(
        CONTENT,
        "free",
        sender=SENDER,
        list_info=LIST,
        base_url="https://n.example.com",
        engine=ENGINE,
        now=START,
        theme=theme,
    )
    return rendering.html_for(SAMPLE_RECIPIENT)


def test_templates_contain_no_colour_or_font_literals() -> None:
    """Styling lives in the theme; a literal in a template is a second source of truth."""
    templates = sorted(path for path in TEMPLATES.rglob("*") if path.is_file())
    # Campaign layout, notices and public pages alike: every template is scanned.
    assert {"message.html", "notice.html", "layout.html"} <= {path.name for path in templates}
    offences = []
    for path in templates:
        text = path.read_text()
        patterns = [HEX_COLOUR, COLOUR_FUNCTION, NAMED_COLOUR]
        if path != STYLESHEET:  # the one stylesheet names fonts, but only from the theme
            patterns += [FONT, STYLE_ATTRIBUTE]
        name = path.relative_to(TEMPLATES)
        offences += [f"{name}: {m[0]}" for p in patterns for m in p.finditer(text)]
    assert offences == []


def test_the_stylesheet_takes_every_font_from_the_theme() -> None:
    """A font stack typed into the stylesheet would ignore the publisher's theme."""
    for line in STYLESHEET.read_text().splitlines():
        for declaration in re.findall(r"font-family\s*:\s*([^;]+)", line):
            assert re.fullmatch(r"\{\{ theme\.\w+_font \}\}\s*", declaration), line


def test_no_rendering_module_but_the_theme_spells_a_colour() -> None:
    """Python code could smuggle colours past the template scan; only theme.py may hold them."""
    offences = [
        f"{path.name}: {match[0]}"
        for path in PACKAGE.glob("*.py")
        if path.name != "theme.py"
        for match in HEX_COLOUR.finditer(path.read_text())
    ]
    assert offences == []


def test_a_different_theme_restyles_every_component() -> None:
    """Changing the accent in one place must change the links, the button and the callout."""
    theme = dataclasses.replace(
        DEFAULT_THEME, accent_color="#123456", body_font="Charter, serif", site_name="Harbour"
    )
    html = _html(theme)
    assert html.count("#123456") >= 4
    assert DEFAULT_THEME.accent_color not in html
    assert "Charter, serif" in html
    assert ">Harbour<" in html


def test_css_is_inlined_and_the_media_query_kept_for_narrow_screens() -> None:
    """Many clients drop <style>: inline styles carry the look, the media query the phone layout."""
    html = _html()
    assert re.search(r'<h1 style="[^"]*font-size:34px', html)
    assert re.search(r'class="container"[^>]*style="[^"]*max-width:600px', html)
    style_block = re.search(r"<style>(.*?)</style>", html, re.DOTALL)
    assert style_block is not None
    assert "@media only screen and (max-width: 620px)" in style_block[1]
    assert ".footer-link" not in style_block[1]  # inlined rules are not repeated


def test_the_layout_is_table_based_for_mail_clients() -> None:
    """Outlook and older clients lay out tables reliably, not divs with CSS."""
    html = _html()
    assert html.count('role="presentation"') >= 4
    assert "<!--[if mso]>" in html


def test_the_footer_carries_unsubscribe_preferences_and_postal_address() -> None:
    """CAN-SPAM and friends: every campaign email shows how to leave and who sent it."""
    html = _html()
    footer = html[html.index('class="footer"') :]
    assert 'href="https://n.example.com/unsubscribe/sample-unsubscribe-token"' in footer
    assert 'href="https://n.example.com/preferences/sample-preferences-token"' in footer
    assert DEFAULT_THEME.postal_address in footer


def test_a_logo_replaces_the_wordmark_when_configured() -> None:
    """Publishers with a logo get it in the header, with the site name as its alt text."""
    theme = dataclasses.replace(DEFAULT_THEME, logo_url="https://cdn.example.com/logo.png")
    html = _html(theme)
    assert re.search(r'<img class="logo"[^>]*src="https://cdn.example.com/logo.png"', html)
    assert f'alt="{DEFAULT_THEME.site_name}"' in html
    assert 'class="wordmark"' not in html


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("accent_color", "red;}</style><script>alert(1)</script>"),
        ("text_color", "rgb(0,0,0)"),
        ("body_font", "Georgia; } body { display: none"),
        ("logo_url", "javascript:alert(1)"),
        ("logo_url", 'https://x.example/a.png" onerror="alert(1)'),
        ("language", 'en"><script>'),
    ],
)
def test_a_theme_value_that_could_escape_the_stylesheet_is_refused(field: str, value: str) -> None:
    """The stylesheet is not HTML-escaped, so only plain CSS values may reach it."""
    with pytest.raises(InvalidInput) as raised:
        dataclasses.replace(DEFAULT_THEME, **{field: value})
    assert raised.value.field == field
