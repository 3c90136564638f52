"""Webhook event types: past-tense facts with stable names (DLV-5, HOUSE rule 11)."""

from __future__ import annotations

WEBHOOK_EVENT_TYPES: dict[str, str] = {
    "subscriber.created": "A subscriber was added (form, API, import or admin).",
    "subscriber.confirmed": "A subscriber confirmed a subscription (double opt-in).",
    "subscriber.unsubscribed": "A subscriber left a newsletter.",
    "subscriber.updated": "A subscriber's name, tier, labels or attributes changed.",
    "subscriber.deleted": "A subscriber's personal data was deleted (privacy request).",
    "subscriber.suppressed": "An address was suppressed (bounce, complaint or admin).",
    "subscriber.bounced": "A provider or mailbox reported a bounce (hard or soft, with its code).",
    "subscriber.complained": "A subscriber reported a campaign as spam (a complaint, AUD-13).",
    "subscriber.engaged": "A subscriber first opened or clicked a campaign (per-person "
    "tracking with their consent; once per person and campaign).",
    "campaign.scheduled": "A campaign was scheduled for a later send.",
    "campaign.sending": "A campaign started sending.",
    "campaign.sent": "A campaign finished: every recipient accounted for.",
    "campaign.failed": "A campaign stopped with an error; see its status for whether to retry.",
    "campaign.paused": "A send was paused: nothing more is handed over until it is resumed.",
    "campaign.resumed": "A paused send was resumed, in the same attempt.",
    "campaign.cancelled": "A send was cancelled: recipients not yet handed over never get it.",
    "webhook.test": "A test event sent from the admin API to check an endpoint.",
}
ALL_EVENTS = "*"


def validate_event_types(requested: list[str]) -> list[str]:
    """The requested event types, deduplicated in order; raises ValueError on an unknown one."""
    unknown = [name for name in requested if name != ALL_EVENTS and name not in WEBHOOK_EVENT_TYPES]
    if unknown:
        raise ValueError(f"unknown event type(s): {', '.join(unknown)}")
    if not requested:
        raise ValueError("subscribe to at least one event type (or '*')")
    return list(dict.fromkeys(requested))


WEBHOOK_KEY_PREFIX = "webhook:"


def webhook_delivery_key(event_id: str, endpoint_id: int) -> str:
    """The idempotency key of the job that delivers one event to one endpoint.

    Built from the event's random id, never from a row id alone: SQLite hands a deleted row's
    id to the next insert, so `webhook:<delivery id>` of a re-created endpoint's first delivery
    would collide with the old, finished job and the new delivery would never be sent. The
    event id is unique for the life of the database; the endpoint id tells apart the endpoints
    one event goes to."""
    return f"{WEBHOOK_KEY_PREFIX}{event_id}:{endpoint_id}"
