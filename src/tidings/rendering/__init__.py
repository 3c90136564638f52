"""Campaign rendering: the design system, Markdown/HTML content, segments and personalisation.

Render each segment once (`render_segment`), then personalise per recipient as bytes
(`SegmentRendering.personalise`). The same design system renders transactional notices
(`render_confirmation_email`) and the public pages (`Pages`). See docs/rendering.md.
"""

from tidings.rendering.content import CampaignContent
from tidings.rendering.engine import TemplateEngine
from tidings.rendering.mime import ListInfo, Sender
from tidings.rendering.notice import Notice, render_confirmation_email, render_notice
from tidings.rendering.pages import LinkProblem, Pages, PreferenceItem
from tidings.rendering.render import (
    SIZE_WARNING_BYTES,
    Preview,
    SegmentRendering,
    check_content,
    preview,
    render_segment,
)
from tidings.rendering.slots import MERGE_FIELDS, SAMPLE_RECIPIENT, RecipientValues
from tidings.rendering.theme import DEFAULT_THEME, Theme

__all__ = [
    "DEFAULT_THEME",
    "MERGE_FIELDS",
    "SAMPLE_RECIPIENT",
    "SIZE_WARNING_BYTES",
    "CampaignContent",
    "LinkProblem",
    "ListInfo",
    "Notice",
    "Pages",
    "PreferenceItem",
    "Preview",
    "RecipientValues",
    "SegmentRendering",
    "Sender",
    "TemplateEngine",
    "Theme",
    "check_content",
    "preview",
    "render_confirmation_email",
    "render_notice",
    "render_segment",
]
