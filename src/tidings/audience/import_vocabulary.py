"""What other tools' exports mean (AUD-9): their column names, their statuses, and labels
(tags) as they write them, read into tidings' terms.

The exports covered, with the columns this module reads (everything else becomes a custom
field or is ignored as bookkeeping, see `import_header`):

- Mailchimp: `Email Address`, `First Name`, `Last Name`, `TAGS` (`"vip","early"`),
  `OPTIN_TIME`; its unsubscribed and cleaned exports carry `UNSUB_TIME` / `CLEAN_TIME`.
- listmonk: `email`, `name`, `attributes` (JSON), `status` (`enabled`, `disabled`,
  `blocklisted`), `created_at`.
- Ghost: `email`, `name`, `labels` (comma-separated), `subscribed_to_emails`,
  `complimentary_plan`, `tiers` (the paid tiers a member is on), `created_at`.
- Substack: `email`, `active_subscription`, `email_disabled`, `created_at`.
- Buttondown: `email`, `tags`, `metadata` (JSON), `subscriber_type`, `creation_date`.
- Kit (ConvertKit): `first_name`, `email_address`, `state`, `tags`, `created_at`.

Pure: no database, no I/O.
"""

from __future__ import annotations

import csv
import re
import unicodedata
from dataclasses import dataclass

from tidings.domain.consent import SubscriptionState

COLUMNS = (
    "email",
    "name",
    "tier",
    "labels",
    "newsletter",
    "status",
    "created_at",
    "tracking_consent",  # the person agreed to per-person open and click tracking (ENG-1)
)
# Fields read from other tools' columns that say something about status or tier without
# being one: a Mailchimp unsubscribe time, Ghost's `subscribed_to_emails`, and so on.
DERIVED = (
    "unsubscribed_time",
    "cleaned_time",
    "subscribed_to_emails",
    "email_disabled",
    "complimentary_plan",
    "active_subscription",
    "paid_tiers",
)
FIELDS = (*COLUMNS, "first_name", "last_name")  # the fields `--map` may name
# Column names other tools export, normalised (`header_key`), and the field each one is.
HEADER_ALIASES = {
    **{column: column for column in COLUMNS},
    **dict.fromkeys(("e mail", "email address", "e mail address", "mail"), "email"),
    **dict.fromkeys(("full name", "display name"), "name"),
    **dict.fromkeys(("first name", "firstname", "fname", "given name"), "first_name"),
    **dict.fromkeys(("last name", "lastname", "lname", "surname", "family name"), "last_name"),
    **dict.fromkeys(("tags", "label", "tag"), "labels"),
    **dict.fromkeys(
        ("created at", "optin time", "subscribed at", "signup date", "creation date"),
        "created_at",
    ),
    **dict.fromkeys(("tracking consent", "tracking"), "tracking_consent"),
    **dict.fromkeys(("state", "subscriber type", "type"), "status"),  # Kit, Buttondown
    "unsub time": "unsubscribed_time",
    "clean time": "cleaned_time",
    "subscribed to emails": "subscribed_to_emails",
    "email disabled": "email_disabled",
    "complimentary plan": "complimentary_plan",
    "active subscription": "active_subscription",
    "tiers": "paid_tiers",  # Ghost: the paid tiers a member is on now
}
# Other tools' bookkeeping, normalised: not the person's data, so not custom fields. Mailchimp
# (ratings, opt-in and confirm records, geolocation, its own ids, unsubscribe/clean records),
# listmonk and Ghost (ids, update times), Substack (billing state), Buttondown (ids, sources).
BOOKKEEPING_COLUMNS = frozenset(
    {
        "member rating", "optin ip", "confirm time", "confirm ip", "latitude", "longitude",
        "gmtoff", "dstoff", "timezone", "cc", "region", "last changed", "leid", "euid",
        "notes", "unsub campaign title", "unsub campaign id", "unsub reason",
        "unsub reason other", "clean campaign title", "clean campaign id",
        "uuid", "id", "updated at", "deleted at", "lists", "note", "stripe customer id",
        "gift id", "products", "expiry", "first payment at",
        "subscription type", "secondary id", "referrer url", "source", "utm campaign",
        "utm medium", "utm source", "upgrade date", "unsubscription date", "churn date",
        "import", "ip address",
    }
)  # fmt: skip
# JSON-object columns read as custom fields: listmonk's `attributes`, Buttondown's `metadata`.
JSON_ATTRIBUTE_COLUMNS = ("attributes", "metadata")

TRUE_WORDS = frozenset({"true", "yes", "1", "t", "y"})
FALSE_WORDS = frozenset({"false", "no", "0", "f", "n"})


@dataclass(frozen=True, slots=True)
class StatusMeaning:
    """What another tool's status means here: a subscription `state`; or the address is to be
    suppressed (`suppress` is the reason), with no subscriber stored; or the row is to be
    skipped (`skip` says why). `tier` is the tier the status implies, if any."""

    state: SubscriptionState | None = None
    suppress: str | None = None
    skip: str | None = None
    tier: str | None = None


_WAITING = StatusMeaning(SubscriptionState.PENDING)
_LEFT = StatusMeaning(SubscriptionState.UNSUBSCRIBED)
_PAID = StatusMeaning(SubscriptionState.PENDING, tier="paid")
_BOUNCED = StatusMeaning(suppress="hard_bounce")
# Another tool's "subscribed" is not consent this site may assert: such rows wait for the
# person's confirmation (`confirmed` asserts it). Ended rows import unsubscribed; addresses
# the source found undeliverable, complaining or blocked become suppressions; people its
# spam filter stopped were never subscribers and are skipped.
STATUSES: dict[str, StatusMeaning] = {
    **{state.value: StatusMeaning(state) for state in SubscriptionState},
    **dict.fromkeys(
        ("subscribed", "active", "enabled", "regular", "unactivated", "inactive",
         "unconfirmed", "unpaid", "churned"),
        _WAITING,
    ),
    **dict.fromkeys(("premium", "trialed", "churning", "paused"), _PAID),
    "gifted": StatusMeaning(SubscriptionState.PENDING, tier="comped"),
    **dict.fromkeys(("disabled", "cancelled", "canceled", "removed"), _LEFT),
    **dict.fromkeys(("cleaned", "bounced", "undeliverable"), _BOUNCED),
    "complained": StatusMeaning(suppress="complaint"),
    **dict.fromkeys(("blocklisted", "blacklisted"), StatusMeaning(suppress="admin")),
    **dict.fromkeys(
        ("spammy", "blocked"), StatusMeaning(skip="the source's spam filter stopped this sign-up")
    ),
}  # fmt: skip
STATUS_WORDS = ", ".join(sorted(STATUSES))

_HEADER_SPLIT = re.compile(r"[\s_-]+")
LABEL_ALPHABET = re.compile(r"[^a-z0-9_-]+")
MAX_LABEL_LENGTH = 64


def header_key(name: str) -> str:
    """ "Email Address", "email_address" and "E-mail  address" are one column name."""
    return " ".join(_HEADER_SPLIT.split(name.strip().lower())).strip()


def flag(text: str) -> bool | None:
    """A yes/no cell: True, False, or None when blank or not a yes/no word."""
    word = text.strip().lower()
    return True if word in TRUE_WORDS else False if word in FALSE_WORDS else None


def status_from_derived(cells: dict[str, str]) -> str | None:
    """A status word for a row with no status cell, from the columns that imply one:
    Mailchimp's cleaned and unsubscribed exports, Ghost's and Substack's email flags."""
    if cells.get("cleaned_time"):
        return "cleaned"
    if cells.get("unsubscribed_time"):
        return "unsubscribed"
    if flag(cells.get("subscribed_to_emails", "")) is False:
        return "unsubscribed"
    if flag(cells.get("email_disabled", "")) is True:
        return "unsubscribed"
    return None


def tier_from_derived(cells: dict[str, str]) -> str | None:
    """A tier for a row with no tier cell: Ghost's complimentary plan or paid tiers,
    Substack's paid subscription."""
    if flag(cells.get("complimentary_plan", "")) is True:
        return "comped"
    if cells.get("paid_tiers") or flag(cells.get("active_subscription", "")) is True:
        return "paid"
    return None


def split_labels(cell: str) -> list[str]:
    """The labels in one cell, as written: separated by `,`, `;` or `|`; Mailchimp quotes
    each tag (`"vip","early"`), and a quoted tag may hold a comma."""
    text = cell.strip()
    if text.startswith('"'):
        parts = next(csv.reader([text], skipinitialspace=True), [])
    else:
        parts = re.split(r"[,;|]", text)
    return [part.strip().strip('"').strip() for part in parts if part.strip().strip('"').strip()]


def normalise_label(raw: str) -> str:
    """A label by tidings' rule (1-64 of a-z, 0-9, `-`, `_`: what `label:NAME` filters
    match): accents dropped, lower-cased, every other run of characters one `-`.
    "Press Contact" is `press-contact`, "Café" `cafe`; "🔥" is "" (unusable)."""
    ascii_text = unicodedata.normalize("NFKD", raw).encode("ascii", "ignore").decode("ascii")
    label = LABEL_ALPHABET.sub("-", ascii_text.strip().lower()).strip("-")
    return label[:MAX_LABEL_LENGTH].strip("-")
