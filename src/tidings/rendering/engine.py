"""The template engine: the one Jinja2 environment, one render per segment, CSS inlined after.

`message.html` renders the HTML part and, in the same pass, exports the plain-text part as
`text_part` (from `text.txt`), so a segment costs exactly one template render; `renders`
counts them so tests can hold us to "never once per recipient" (CMP-3). Autoescaping is on
for `.html` templates; `styles.css` and `text.txt` are not HTML and are not escaped (the
theme validates what reaches the stylesheet).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import css_inline
from jinja2 import Environment, PackageLoader, StrictUndefined, select_autoescape


@dataclass(frozen=True, slots=True)
class RenderedParts:
    html: str
    text: str


class TemplateEngine:
    """Owns the Jinja2 environment, the CSS inliner and the render counter. The composition
    root builds one per process (`bootstrap.build`) and hands it to whoever renders."""

    def __init__(self) -> None:
        self.environment = Environment(
            loader=PackageLoader("tidings.rendering", "templates"),
            autoescape=select_autoescape(enabled_extensions=("html",), default=False),
            undefined=StrictUndefined,
            trim_blocks=True,
            lstrip_blocks=True,
            keep_trailing_newline=False,
        )
        # Media queries cannot be inlined; keeping at-rules leaves them in a <style> block
        # for the clients that honour it, while every other rule moves onto the elements.
        self._inliner = css_inline.CSSInliner(
            keep_at_rules=True,
            load_remote_stylesheets=False,
            minify_css=True,
        )
        self.renders = 0

    def inline(self, html: str) -> str:
        """Move the stylesheet's rules onto the elements (media queries stay in <style>)."""
        return str(self._inliner.inline(html))

    def render(self, context: Mapping[str, Any]) -> RenderedParts:
        """One Jinja render: the HTML part (CSS inlined) and the text part."""
        self.renders += 1
        module = self.environment.get_template("message.html").make_module(dict(context))
        html = self.inline(str(module))
        text = str(vars(module)["text_part"]).strip() + "\n"
        return RenderedParts(html=html, text=text)
