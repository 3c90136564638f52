"""Tracked links and the open pixel, rewritten once per segment at render time (ENG-2)."""

import re
from datetime import UTC, datetime
from email.message import EmailMessage
from email.parser import BytesParser
from email.policy import default
from pathlib import Path

import pytest

from tidings.domain.errors import InvalidInput
from tidings.domain.tracking import LinkRef, TrackingMode, TrackingSigner
from tidings.rendering import (
    SAMPLE_RECIPIENT,
    CampaignContent,
    ListInfo,
    RecipientValues,
    SegmentRendering,
    TemplateEngine,
    render_segment,
)
from tidings.rendering.batch import batch_template, batch_variables
from tidings.rendering.sample import SAMPLE_BASE_URL, SAMPLE_LIST, SAMPLE_SENDER, sample_content
from tidings.rendering.tracking import LinkTracking
from tidings.storage.campaign_links import StoredLink

ENGINE = TemplateEngine()
NOW = datetime(2025, 3, 4, 5, 6, 7, tzinfo=UTC)
SIGNER = TrackingSigner("a site secret")
AGGREGATE = LinkTracking(TrackingMode.AGGREGATE, SIGNER)
GOLDEN = Path(__file__).parent / "golden"
ARCHIVE = "https://news.example.com/archive/ledger/1001"
TRACKED = re.compile(r"https://news\.example\.com/([co])/([^/\s\"]+)/([A-Za-z0-9._-]*)")
TOKEN = "a.1741064767.abcdefghijklmnop.qrstuvwxyzABCDEF"
# The body the golden files were made from, before tracking existed: a marked link (which the
# sanitiser dropped the mark of), a plain one, a mailto and a button.
MARKED_HTML = CampaignContent(
    subject="Marked",
    preheader="",
    body_format="html",
    body=(
        '<p>Read <a href="https://example.org/a?x=1&amp;y=2" data-track="off">this</a> and '
        '<a href="https://example.org/b">that</a>, or <a href="mailto:ed@example.org">write</a>.'
        "</p>\n::: button https://example.org/c\nGo\n:::\n"
    ),
)


def _render(
    content: CampaignContent,
    tracking: LinkTracking | None = AGGREGATE,
    *,
    segment: str = "paid",
    list_info: ListInfo = SAMPLE_LIST,
) -> SegmentRendering:
    return render_segment(
        content,
        segment,
        sender=SAMPLE_SENDER,
        list_info=list_info,
        base_url=SAMPLE_BASE_URL,
        engine=ENGINE,
        now=NOW,
        tracking=tracking,
    )


def _markdown(body: str) -> CampaignContent:
    return CampaignContent(subject="Links", preheader="", body=body, body_format="markdown")


def _reader(token: str = TOKEN) -> RecipientValues:
    return SAMPLE_RECIPIENT._replace(tracking_token=token)


def _links(text: str) -> list[tuple[str, LinkRef | None, str]]:
    """Every tracked URL in `text`: its kind, the link its token names, its message token."""
    return [(m[1], SIGNER.read_link(m[2]), m[3]) for m in TRACKED.finditer(text)]


@pytest.mark.parametrize(("name", "content"), [("sample", sample_content()), ("html", MARKED_HTML)])
@pytest.mark.parametrize("tracking", [None, LinkTracking(TrackingMode.OFF, SIGNER)])
def test_tracking_off_leaves_the_message_exactly_as_it_was(
    name: str, content: CampaignContent, tracking: LinkTracking | None
) -> None:
    """ENG-1's default promises no pixel and no rewritten link: the mail of a newsletter that
    does not track is byte for byte what it was before tracking existed."""
    rendering = _render(content, tracking)
    assert rendering.html_for(SAMPLE_RECIPIENT) == (GOLDEN / f"untracked_{name}.html").read_text()
    assert rendering.text_for(SAMPLE_RECIPIENT) == (GOLDEN / f"untracked_{name}.txt").read_text()
    assert rendering.links == ()
    assert rendering.tracking is None


def test_links_are_numbered_in_order_of_first_appearance_and_a_repeat_keeps_its_number() -> None:
    """A link's number is what its clicks are counted under: the same URL twice is one link in
    the results, and numbering follows the reader's order so the link table reads naturally."""
    rendering = _render(
        _markdown(
            "[one](https://example.org/one) then [two](https://example.org/two?a=1&b=2).\n\n"
            "::: callout\nAgain [one](https://example.org/one).\n:::\n\n"
            "::: button https://example.org/three\nThree\n:::\n\n"
            "And [two again](https://example.org/two?a=1&b=2)."
        )
    )
    found = _links(rendering.html_for(_reader()))
    numbers = [link.number for kind, link, _ in found if kind == "c" and link is not None]
    assert numbers == [1, 2, 1, 3, 2, 4]  # 4: the hidden link, after every real one
    assert rendering.links == (
        StoredLink(0, ""),
        StoredLink(1, "https://example.org/one"),
        StoredLink(2, "https://example.org/two?a=1&b=2"),
        StoredLink(3, "https://example.org/three"),
        StoredLink(4, SAMPLE_BASE_URL, hidden=True),
    )
    assert all(link == LinkRef(1001, "paid", link.number) for _, link, _ in found if link)
    assert {token for _, _, token in found} == {TOKEN}


def test_the_text_part_carries_the_tracked_urls_but_neither_pixel_nor_hidden_link() -> None:
    """ENG-2 tracks plain-text readers' clicks too; the pixel and the trap exist only in HTML,
    where a person cannot see them (in text they would be visible URLs)."""
    rendering = _render(
        _markdown(
            "Read [the notice](https://example.org/notice).\n\n"
            "::: button https://example.org/go\nGo\n:::\n"
        )
    )
    text = rendering.text_for(_reader())
    assert [(kind, link.number if link else None) for kind, link, _ in _links(text)] == [
        ("c", 1),
        ("c", 2),
    ]
    assert "https://example.org/notice" not in text
    html = rendering.html_for(_reader())
    pixel = re.search(r"<img[^>]*/o/[^>]*>", html)
    assert pixel is not None
    assert 'alt=""' in pixel[0]
    assert 'width="1"' in pixel[0]
    assert 'height="1"' in pixel[0]
    assert html.rindex("/o/") > html.rindex("</table>")  # at the very end of the body
    trap = re.search(r"<a[^>]*/c/1001\.paid\.3\.[^>]*>", html)
    assert trap is not None
    assert 'aria-hidden="true"' in trap[0]
    assert 'tabindex="-1"' in trap[0]
    assert "display:none" in trap[0]


def test_unsubscribe_preferences_mailto_archive_and_personal_links_are_never_rewritten() -> None:
    """A tracked unsubscribe link would put a redirect (and a machine's click) between a reader
    and leaving; a URL with a per-recipient value would be stored with one person's value."""
    archived = ListInfo(
        campaign_id="1001",
        newsletter_slug="ledger",
        newsletter_name="The Ledger",
        archive_url=ARCHIVE,
    )
    rendering = _render(
        _markdown(
            "[Leave]({{ unsubscribe_url }}), [settings]({{ preferences_url }}), "
            "[write](mailto:ed@example.org), [online](" + ARCHIVE + "), "
            "[yours](https://example.org/u/{{ subscriber_id }}) and "
            "[tracked](https://example.org/t)."
        ),
        list_info=archived,
    )
    html, text = rendering.html_for(_reader()), rendering.text_for(_reader())
    for part in (html, text):
        assert "https://news.example.com/unsubscribe/sample-unsubscribe-token" in part
        assert "https://news.example.com/preferences/sample-preferences-token" in part
        assert "mailto:ed@example.org" in part
        assert ARCHIVE in part
        assert "https://example.org/u/1" in part
    assert [link.url for link in rendering.links] == ["", "https://example.org/t", SAMPLE_BASE_URL]


def test_an_author_marks_a_link_untracked_in_markdown_html_and_buttons() -> None:
    """Some links must not pass through a redirect (a bank, a legal notice): the author says
    so, and the mark itself never reaches the reader."""
    markdown = _render(
        _markdown(
            '[kept](https://example.org/kept "notrack") and [counted](https://example.org/c).\n\n'
            "::: button https://example.org/button notrack\nPlain button\n:::\n"
        )
    )
    html_body = _render(MARKED_HTML)
    for rendering, untracked in (
        (markdown, ["https://example.org/kept", "https://example.org/button"]),
        (html_body, ["https://example.org/a?x=1&amp;y=2"]),
    ):
        html = rendering.html_for(_reader())
        for url in untracked:
            assert f'href="{url}"' in html
        assert "notrack" not in html
        assert "data-track" not in html
        assert "notrack" not in rendering.text_for(_reader())
    assert [link.url for link in markdown.links] == ["", "https://example.org/c", SAMPLE_BASE_URL]
    assert [link.url for link in html_body.links] == [
        "",
        "https://example.org/b",
        "https://example.org/c",
        SAMPLE_BASE_URL,
    ]


def test_marks_are_removed_from_an_untracked_newsletter_too() -> None:
    """The marks are instructions to us, never content: a reader must not see `notrack`
    as a link's tooltip whether or not the newsletter tracks."""
    rendering = _render(_markdown('[kept](https://example.org/kept "notrack")'), None)
    assert 'href="https://example.org/kept"' in rendering.html
    assert "notrack" not in rendering.html


def test_each_message_carries_its_own_token_in_both_parts() -> None:
    """The per-message part is substituted into the serialised bytes like any other value:
    both MIME parts of each message carry that message's token, and only it."""
    rendering = _render(_markdown("Read [this](https://example.org/this)."))
    for token in (
        "a.1.aaaaaaaaaaaaaaaa.bbbbbbbbbbbbbbbb",
        "p.2.cccccccccccccccc.7.dddddddddddddddd",
    ):
        data = rendering.personalise(_reader(token), now=NOW)
        message = BytesParser(policy=default).parsebytes(data)
        assert isinstance(message, EmailMessage)
        parts = {
            part.get_content_type(): part.get_content()
            for part in message.walk()
            if not part.is_multipart()
        }
        assert {t for _, _, t in _links(parts["text/plain"])} == {token}
        assert {t for _, _, t in _links(parts["text/html"])} == {token}
        assert len(_links(parts["text/html"])) == 3  # the link, the trap, the pixel


def test_a_tracking_token_that_could_leave_the_url_is_refused_naming_it() -> None:
    """Whatever builds the token, a value with a quote or a slash must never reach a URL."""
    rendering = _render(_markdown("[x](https://example.org/x)"))
    with pytest.raises(InvalidInput) as raised:
        rendering.personalise(_reader('a"onmouseover'))
    assert raised.value.field == "tracking_token"


def test_the_batch_template_passes_the_token_as_one_recipient_variable() -> None:
    """PRV-2's batch path: the provider substitutes `%recipient.tracking_token%` in both
    parts, one value per recipient, like the unsubscribe token."""
    rendering = _render(_markdown("[x](https://example.org/x)"))
    template = batch_template(rendering)
    placeholder = "/%recipient.tracking_token%"
    assert template.html.count(placeholder) == 3  # link, trap, pixel
    assert template.text.count(placeholder) == 1
    values = dict(zip(template.variable_names, batch_variables(template, _reader()), strict=True))
    assert values["tracking_token"] == TOKEN


@pytest.mark.parametrize(
    ("mode", "consented", "names_them"),
    [
        (TrackingMode.AGGREGATE, True, False),
        (TrackingMode.AGGREGATE, False, False),
        (TrackingMode.PER_PERSON, True, True),
        (TrackingMode.PER_PERSON, False, False),
    ],
)
def test_a_message_token_names_the_recipient_only_with_consent_in_per_person(
    mode: TrackingMode, consented: bool, names_them: bool
) -> None:
    """ENG-1: without recorded consent a mail carries no per-person token, whatever the mode."""
    token = LinkTracking(mode, SIGNER).message_token(1001, NOW, 42, consented=consented)
    read = SIGNER.read_message(1001, token)
    assert read is not None
    assert read.recipient_id == (42 if names_them else None)
    assert read.sent_at == NOW.replace(microsecond=0)


def test_an_untracked_message_has_an_empty_token() -> None:
    """With tracking off there is nothing to carry, and no token is made."""
    assert LinkTracking(TrackingMode.OFF, SIGNER).message_token(1, NOW, 2, consented=True) == ""


def test_a_campaign_id_that_is_not_a_number_cannot_be_tracked() -> None:
    """Link tokens name a campaign row by number; anything else would sign nonsense."""
    odd = ListInfo(campaign_id="draft-1", newsletter_slug="ledger", newsletter_name="The Ledger")
    with pytest.raises(InvalidInput) as raised:
        _render(_markdown("[x](https://example.org/x)"), list_info=odd)
    assert raised.value.field == "campaign_id"
    assert _render(_markdown("[x](https://example.org/x)"), None, list_info=odd).links == ()
