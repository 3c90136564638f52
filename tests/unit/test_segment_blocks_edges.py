"""Segment passages never leak to the wrong segment through Markdown code-fence edge cases."""

import pytest

from tests.support.clock import START
from tidings.rendering import (
    CampaignContent,
    ListInfo,
    Sender,
    TemplateEngine,
    check_content,
    render_segment,
)

ENGINE = TemplateEngine()  # one per test module, as bootstrap builds one per process

SENDER = Sender(name="Ed", address="ed@example.org", sending_domain="example.org")
LIST = ListInfo(campaign_id="1", newsletter_slug="weekly", newsletter_name="Weekly")


def _free_version(body: str) -> str:
    content = CampaignContent(subject="S", preheader="", body=body)
    rendering = render_segment(
        content,
        "free",
        sender=SENDER,
        list_info=LIST,
        base_url="https://news.example.org",
        engine=ENGINE,
        now=START,
    )
    return rendering.html + rendering.text


@pytest.mark.parametrize(
    "body",
    [
        "```not`a fence\n::: only paid\nSECRET\n:::",  # a backtick in the info string: no fence
        "````md\n```\n````\n::: only paid\nSECRET\n:::",  # a shorter run does not close ````
        "~~~\ncode\n~~~\n::: only paid\nSECRET\n:::",
    ],
)
def test_paid_passage_after_fence_like_lines_stays_paid(body: str) -> None:
    """Mis-reading where code ends would show paid content to free readers."""
    assert "SECRET" not in _free_version(body)
    assert check_content(CampaignContent(subject="S", preheader="", body=body)) == {"paid"}


def test_block_lines_inside_a_real_fence_are_code() -> None:
    """Segment markers inside a code fence are code to show, not blocks to act on."""
    body = "```\n::: only paid\n```\nafter"
    assert check_content(CampaignContent(subject="S", preheader="", body=body)) == frozenset()
    assert "::: only paid" in _free_version(body)
