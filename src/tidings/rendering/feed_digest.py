"""A feed digest's campaign content (AUT-2): subject, preheader and an HTML body made from the
`feeds/digest.html` template, one section per item (title, image, summary, link).

Feed text is untrusted like any content: titles are escaped, summaries go through the same
nh3 sanitiser as an author's HTML (and again when the campaign renders), and braces become
character references so nothing from a feed can be read as a merge tag (`{{ email }}`).
A summary longer than `SUMMARY_CHARACTERS` (a whole post, as some feeds give) is cut to
that much plain text.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from jinja2 import Environment
from markupsafe import Markup

from tidings.rendering.content import MAX_PREHEADER, MAX_SUBJECT, CampaignContent
from tidings.rendering.markup import sanitise_html
from tidings.rendering.plaintext import html_to_text

SUMMARY_CHARACTERS = 600
SUBJECT_CHARACTERS = 150
TEMPLATE = "feeds/digest.html"
_WHITESPACE = re.compile(r"\s+")


@dataclass(frozen=True, slots=True)
class DigestItem:
    title: str
    link: str | None
    summary: str  # HTML as the feed gives it
    image: str | None


def _line(text: str) -> str:
    """One line of plain text: runs of whitespace (newlines included) become one space."""
    return _WHITESPACE.sub(" ", text).strip()


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def _plain_title(title: str) -> str:
    # Some feeds put markup in titles (Atom type="html"): keep the words only.
    return _line(html_to_text(sanitise_html(title))) if "<" in title else _line(title)


def _summary(source: str) -> Markup:
    fragment = sanitise_html(source)
    text = _line(html_to_text(fragment))
    if len(text) > SUMMARY_CHARACTERS:
        return Markup("<p>%s</p>") % _cut(text, SUMMARY_CHARACTERS)
    return Markup(_line(fragment))  # noqa: S704 -- sanitised just above


def _no_merge_tags(text: str) -> str:
    return text.replace("{", "&#123;").replace("}", "&#125;")


def _header_text(text: str, limit: int) -> str:
    # Subjects and preheaders are not HTML: a brace pair is split instead of escaped.
    return _cut(_line(text).replace("{{", "{ {"), limit)


def digest_content(
    environment: Environment, items: Sequence[DigestItem], *, fallback_title: str
) -> CampaignContent:
    """The campaign content for `items`, newest first (at least one)."""
    assert items, "a digest has at least one item"
    shown = [
        {
            "title": _plain_title(item.title) or fallback_title,
            "link": item.link,
            "image": item.image,
            "summary": _summary(item.summary) if item.summary else "",
        }
        for item in items
    ]
    body = environment.get_template(TEMPLATE).render(items=shown)
    more = "" if len(items) == 1 else f" (and {len(items) - 1} more)"
    subject = _cut(str(shown[0]["title"]), SUBJECT_CHARACTERS) + more
    preheader = " · ".join(str(entry["title"]) for entry in shown[1:])
    return CampaignContent(
        subject=_header_text(subject, MAX_SUBJECT),
        preheader=_header_text(preheader, min(MAX_PREHEADER, 200)),
        body=_no_merge_tags(body),
        body_format="html",
    )
