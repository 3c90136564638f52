"""The one theme: every colour, font stack and brand value the email design system uses (CMP-2).

Templates never spell a colour or a font; `templates/styles.css` reads them from here, and a
test scans the templates to keep it that way. Values are validated on construction because
the stylesheet is not HTML-escaped (entities mean nothing inside `<style>`): a colour or font
stack is the only theme text that reaches CSS, so it must be plain CSS.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, fields

from tidings.domain.errors import InvalidInput

_HEX_COLOUR = re.compile(r"#(?:[0-9a-fA-F]{3}|[0-9a-fA-F]{6})")
# Family names, commas, quotes, spaces and hyphens: enough for any stack, never `;`, `}` or `<`.
_FONT_STACK = re.compile(r"[A-Za-z0-9 ,'\"-]{1,300}")
_LOGO_URL = re.compile(r"https://[^\s\"'<>]+")
_LANGUAGE = re.compile(r"[a-z]{2,3}(?:-[A-Za-z0-9]{2,8})*")

# The email layout (templates/styles.css): a 600 px column with 48 px of padding each side,
# so an image in the content is at most 504 CSS pixels wide. A test reads the stylesheet.
LAYOUT_WIDTH = 600
CONTENT_PADDING = 48
CONTENT_WIDTH = LAYOUT_WIDTH - 2 * CONTENT_PADDING

SERIF = "Georgia, Cambria, 'Times New Roman', Times, serif"
SANS = "-apple-system, BlinkMacSystemFont, 'Segoe UI', Roboto, 'Helvetica Neue', Arial, sans-serif"
MONO = "Menlo, Consolas, 'Liberation Mono', 'Courier New', monospace"


@dataclass(frozen=True, slots=True)
class Theme:
    """Brand and palette for every campaign email. Colours are `#rgb`/`#rrggbb`."""

    # The defaults of `site.name` and `theme.postal_address`: one spelling of the name.
    site_name: str = "tidings"
    postal_address: str = "Your Publication, 1 Example Street, Springfield"
    logo_url: str | None = None
    logo_width: int = 160
    language: str = "en"
    accent_color: str = "#9b2c1f"
    text_color: str = "#1f1f1f"
    muted_color: str = "#6b6b6b"
    background_color: str = "#f3f1ec"
    surface_color: str = "#ffffff"
    border_color: str = "#e4e0d8"
    callout_color: str = "#f8f5ef"
    button_text_color: str = "#ffffff"
    body_font: str = SERIF
    heading_font: str = SERIF
    ui_font: str = SANS
    mono_font: str = MONO

    def __post_init__(self) -> None:
        for item in fields(self):
            value = getattr(self, item.name)
            if item.name.endswith("_color") and not _HEX_COLOUR.fullmatch(value):
                raise InvalidInput(f"{item.name} must be a #rrggbb colour", field=item.name)
            if item.name.endswith("_font") and not _FONT_STACK.fullmatch(value):
                raise InvalidInput(f"{item.name} must be a CSS font stack", field=item.name)
        if self.logo_url is not None and not _LOGO_URL.fullmatch(self.logo_url):
            raise InvalidInput("logo_url must be an https URL", field="logo_url")
        if not 16 <= self.logo_width <= 600:
            raise InvalidInput("logo_width must be between 16 and 600 pixels", field="logo_width")
        if not _LANGUAGE.fullmatch(self.language):
            raise InvalidInput("language must be a language tag such as 'en'", field="language")
        if not self.site_name.strip():
            raise InvalidInput("site_name must not be empty", field="site_name")


DEFAULT_THEME = Theme()
