"""What every provider's event webhook shares (PRV-6), whichever provider signs it: the
refusal of its signature, an event that cannot be read, and JSON read safely."""

from __future__ import annotations

import json
from typing import Any

from tidings.domain.errors import TidingsError


class SignatureRejected(TidingsError):
    """The event's signature is missing, wrong or too old: it did not come from the provider
    (or is a replay), and nothing was recorded."""

    code = "signature_rejected"
    title = "The event's signature was not accepted"


class MalformedEvent(ValueError):
    """A signed event whose content cannot be read: kept as unparsed for the operator."""


def json_loads(text: bytes | str) -> Any:
    """`json.loads`, with JSON nested deeper than Python's parser can follow (`[[[[...`, which
    raises RecursionError) refused as ValueError, like any other malformed JSON."""
    try:
        return json.loads(text)
    except RecursionError:
        raise ValueError("the JSON is nested too deeply") from None
