"""One segment's rendering as a batch provider's template (PRV-2, CMP-3): the HTML and text
with `%recipient.NAME%` placeholders where the per-recipient slots are, the segment's headers
(List-Unsubscribe with the recipient's own link), and each recipient's variables.

HTML and text take separate variables for one slot (`h0`, `t0`): a name is HTML-escaped in the
HTML part and not in the text part, and the provider substitutes a variable the same way
everywhere it appears. Tokens and ids, whose alphabet needs no escaping, take one variable
named after the field (`unsubscribe_token`) in both parts and the List-Unsubscribe header.
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass
from email.headerregistry import Address

from tidings.domain.email_headers import (
    clean_display_name,
    feedback_id,
    list_id,
    list_unsubscribe,
)
from tidings.rendering.render import SegmentRendering
from tidings.rendering.slots import (
    NAME_FIELDS,
    UNSUBSCRIBE_PATH,
    URL_SAFE_FIELDS,
    RecipientValues,
    Slot,
    check_recipient,
    resolve,
)

UNSUBSCRIBE_VARIABLE = "unsubscribe_token"


@dataclass(frozen=True, slots=True)
class BatchTemplate:
    subject: str
    from_header: str
    html: str
    text: str
    headers: dict[str, str]
    fields: tuple[tuple[str, Slot, bool], ...]  # (variable, slot, HTML-escaped?)
    uses_name: bool = False  # a slot shows the recipient's name: clean it once per recipient

    @property
    def variable_names(self) -> tuple[str, ...]:
        """The variables `batch_variables` gives values for, in its order: the unsubscribe
        token (List-Unsubscribe's) first, then each slot's."""
        return (UNSUBSCRIBE_VARIABLE, *(name for name, _slot, _escaped in self.fields))


def _placeholders(
    text: str,
    pattern: re.Pattern[str],
    slots: list[Slot],
    prefix: str,
    fields: dict[str, tuple[Slot, bool]],
) -> str:
    def swap(match: re.Match[str]) -> str:
        slot = slots[int(match[1])]
        if slot.field in URL_SAFE_FIELDS:
            # Checked per recipient to need no escaping: one variable serves HTML and text.
            name, escaped = slot.field, False
        else:
            name, escaped = f"{prefix}{int(match[1])}", prefix == "h"
        fields[name] = (slot, escaped)
        return f"%recipient.{name}%"

    return pattern.sub(swap, text)


def batch_template(rendering: SegmentRendering) -> BatchTemplate:
    """The segment's message as a template for one provider call per batch."""
    sender, info, slots = rendering.sender, rendering.list_info, rendering.slots
    fields: dict[str, tuple[Slot, bool]] = {}
    html_body = _placeholders(rendering.html, slots.pattern, slots.slots, "h", fields)
    text_body = _placeholders(rendering.text, slots.pattern, slots.slots, "t", fields)
    token = f"%recipient.{UNSUBSCRIBE_VARIABLE}%"
    headers = {
        "List-Unsubscribe": list_unsubscribe(
            slots.base_url + UNSUBSCRIBE_PATH + token, sender.unsubscribe_address, token
        ).replace("\r\n", ""),
        "List-Unsubscribe-Post": "List-Unsubscribe=One-Click",
        "List-Id": list_id(info.newsletter_name, info.newsletter_slug, sender.sending_domain),
        "Feedback-ID": feedback_id(info.campaign_id, info.newsletter_slug, sender.sending_domain),
    }
    if sender.reply_to:
        headers["Reply-To"] = sender.reply_to
    from_header = str(Address(display_name=sender.name, addr_spec=sender.address))
    return BatchTemplate(
        subject=rendering.subject,
        from_header=from_header,
        html=html_body,
        text=text_body,
        headers=headers,
        # The unsubscribe token has its own variable already (the header's).
        fields=tuple(
            (name, slot, escaped)
            for name, (slot, escaped) in fields.items()
            if name != UNSUBSCRIBE_VARIABLE
        ),
        uses_name=any(slot.field in NAME_FIELDS for slot, _escaped in fields.values()),
    )


def batch_variables(template: BatchTemplate, recipient: RecipientValues) -> tuple[str, ...]:
    """One recipient's values for every placeholder of `template`, in the order of its
    `variable_names`."""
    check_recipient(recipient)
    clean_name = clean_display_name(recipient.name) if template.uses_name else None
    values = [recipient.unsubscribe_token]
    for _name, slot, escaped in template.fields:
        value = resolve(slot, recipient, clean_name)
        values.append(html.escape(value) if escaped else value)
    return tuple(values)
