"""`tidings bench render`: personalised messages per second, beside the naive way (CMP-3).

The fast path is what a send uses: one `render_segment`, then `personalise` per recipient
(headers built, values substituted, bytes ready for SMTP). The comparison re-runs the
template render and builds a standard-library `EmailMessage` for every recipient, on a
sample only, since at a few hundred per second the full count would take minutes.
"""

from __future__ import annotations

import time
from datetime import datetime
from email.message import EmailMessage
from email.policy import SMTP

from tidings.rendering.content import CampaignContent
from tidings.rendering.engine import TemplateEngine
from tidings.rendering.render import render_segment
from tidings.rendering.sample import SAMPLE_BASE_URL, SAMPLE_LIST, SAMPLE_SENDER, sample_content
from tidings.rendering.slots import RecipientValues

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

    total_bytes = 0
    started = time.perf_counter()
    for person in people:
        total_bytes += len(rendering.personalise(person, now=now))
    fast_seconds = time.perf_counter() - started
    fast_renders = engine.renders

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
    }


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
