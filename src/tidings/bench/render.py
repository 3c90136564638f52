"""`tidings bench render`: personalised messages per second, beside the naive way (CMP-3).

The fast path is what a send uses: one `render_segment`, then `personalise` per recipient
(headers built, values substituted, bytes ready for SMTP). The comparison re-runs the
template render and builds a standard-library `EmailMessage` for every recipient, on a
sample only, since at a few hundred per second the full count would take minutes.

`tracked` is the same segment with open and click tracking on (ENG-2): its links rewritten
once, the per-message token one more substituted value. Its speed beside the untracked one
(`ratio_to_untracked`) shows tracking keeps the substitution path's speed; making the tokens
(a random value and an HMAC per message, as the send path does) is timed on its own.
"""

from __future__ import annotations

import time
from datetime import datetime
from email.message import EmailMessage
from email.policy import SMTP

from tidings.domain.tracking import TrackingMode, TrackingSigner
from tidings.rendering.content import CampaignContent
from tidings.rendering.engine import TemplateEngine
from tidings.rendering.render import SegmentRendering, render_segment
from tidings.rendering.sample import SAMPLE_BASE_URL, SAMPLE_LIST, SAMPLE_SENDER, sample_content
from tidings.rendering.slots import RecipientValues
from tidings.rendering.tracking import LinkTracking

_NAMES = ["Ana Lima", "Bo Chen", None, "Zoë Müller", "O'Brien & Sons", "Mateus", "Léa Roux"]
# Custom fields (AUD-12) for the sample's `{{ attribs.city }}`: set, missing, and a number.
_ATTRIBUTES: list[dict[str, object]] = [{"city": "Porto"}, {}, {"city": "Zürich"}, {"city": 75001}]


def sample_recipient(number: int) -> RecipientValues:
    return RecipientValues(
        address=f"reader{number}@example.org",
        name=_NAMES[number % len(_NAMES)],
        unsubscribe_token=f"u{number:012d}Zx9",
        preferences_token=f"p{number:012d}Qk2",
        subscriber_id=str(number),
        recipient_id=str(10_000_000 + number),
        attributes=_ATTRIBUTES[number % len(_ATTRIBUTES)],
    )


def run_render_benchmark(
    recipients: int, *, now: datetime, comparison_sample: int = 500
) -> dict[str, object]:
    """Time personalising `recipients` messages; JSON-able figures, speeds in messages/s."""
    if recipients < 1:
        raise ValueError("recipients must be at least 1")
    content = sample_content()
    engine = TemplateEngine()
    people = [sample_recipient(number) for number in range(recipients)]

    started = time.perf_counter()
    rendering = render_segment(
        content,
        "paid",
        sender=SAMPLE_SENDER,
        list_info=SAMPLE_LIST,
        base_url=SAMPLE_BASE_URL,
        engine=engine,
        now=now,
    )
    render_seconds = time.perf_counter() - started

    fast_seconds, total_bytes = _personalise_all(rendering, people, now)
    fast_renders = engine.renders
    tracked, tracked_seconds = _tracked(content, people, now)

    sample = people[: max(1, min(comparison_sample, recipients))]
    started = time.perf_counter()
    for person in sample:
        _naive_message(content, person, engine, now)
    naive_seconds = time.perf_counter() - started

    fast_each = fast_seconds / recipients
    naive_each = naive_seconds / len(sample)
    return {
        "recipients": recipients,
        "segment_render_ms": round(render_seconds * 1000, 3),
        "template_renders": fast_renders,
        "average_message_bytes": total_bytes // recipients,
        "personalised": {
            "messages_per_second": round(recipients / fast_seconds),
            "microseconds_per_message": round(fast_each * 1e6, 2),
            "seconds": round(fast_seconds, 3),
        },
        "full_render_per_recipient": {
            "sample": len(sample),
            "messages_per_second": round(len(sample) / naive_seconds),
            "microseconds_per_message": round(naive_each * 1e6, 2),
        },
        "speedup": round(naive_each / fast_each, 1),
        "tracked": {
            **tracked,
            "ratio_to_untracked": round(fast_seconds / tracked_seconds, 3),
            "speedup": round(naive_each / (tracked_seconds / recipients), 1),
        },
    }


def _personalise_all(
    rendering: SegmentRendering, people: list[RecipientValues], now: datetime
) -> tuple[float, int]:
    """Seconds to personalise every message, and their total size."""
    total_bytes = 0
    started = time.perf_counter()
    for person in people:
        total_bytes += len(rendering.personalise(person, now=now))
    return time.perf_counter() - started, total_bytes


def _tracked(
    content: CampaignContent, people: list[RecipientValues], now: datetime
) -> tuple[dict[str, float], float]:
    """The tracked variant: one render with tracking on, the tokens made (timed apart, as the
    unsubscribe tokens of the untracked run are made beforehand), then the same loop."""
    tracking = LinkTracking(TrackingMode.AGGREGATE, TrackingSigner("bench-secret"))
    rendering = render_segment(
        content,
        "paid",
        sender=SAMPLE_SENDER,
        list_info=SAMPLE_LIST,
        base_url=SAMPLE_BASE_URL,
        engine=TemplateEngine(),
        now=now,
        tracking=tracking,
    )
    campaign_id = int(SAMPLE_LIST.campaign_id)
    started = time.perf_counter()
    tokens = [tracking.message_token(campaign_id, now, 0, consented=False) for _ in people]
    token_seconds = time.perf_counter() - started
    tracked_people = [
        person._replace(tracking_token=token) for person, token in zip(people, tokens, strict=True)
    ]
    seconds, total_bytes = _personalise_all(rendering, tracked_people, now)
    figures = {
        "tracked_links": len(rendering.links) - 2,  # without the pixel and the hidden link
        "average_message_bytes": total_bytes // len(people),
        "messages_per_second": round(len(people) / seconds),
        "microseconds_per_message": round(seconds / len(people) * 1e6, 2),
        "seconds": round(seconds, 3),
        "message_token_microseconds": round(token_seconds / len(people) * 1e6, 2),
    }
    return figures, seconds


def _naive_message(
    content: CampaignContent, person: RecipientValues, engine: TemplateEngine, now: datetime
) -> bytes:
    """What the skeleton avoids: a full render and an `EmailMessage` for one recipient."""
    rendering = render_segment(
        content,
        "paid",
        sender=SAMPLE_SENDER,
        list_info=SAMPLE_LIST,
        base_url=SAMPLE_BASE_URL,
        engine=engine,
        now=now,
    )
    message = EmailMessage(policy=SMTP)
    message["From"] = f"{SAMPLE_SENDER.name} <{SAMPLE_SENDER.address}>"
    message["To"] = person.address
    message["Subject"] = content.subject
    message["Message-ID"] = rendering.message_id_for(person.address)
    message.set_content(rendering.text_for(person), cte="quoted-printable")
    message.add_alternative(rendering.html_for(person), subtype="html", cte="quoted-printable")
    return message.as_bytes()
