"""Campaign email headers as pure functions: Message-ID, To, List-* and the line-break guard.

Everything a header carries comes through here, so one place decides what may reach the
wire. Values that become header text are refused at input if they hold a line break (CMP-4:
rejected, not stripped at send): a CR or LF would start a new header, i.e. header injection.
Per-recipient helpers (`message_id`, `to_header`) are called once per message on the hot
path of a send, so they avoid the `email` package's policy machinery where a plain f-string
is provably enough.
"""

from __future__ import annotations

import hashlib
import re
from email.header import Header
from email.utils import formataddr

from tidings.domain.errors import InvalidInput

# The one rule for header-bound text (subjects, names, addresses, reply-to, from): C0 and C1
# controls (tab, vertical tab, form feed, the file/group/record separators and NEL included:
# `str.splitlines` and so the email package treat several of them as line ends), DEL, the
# Unicode line and paragraph separators, and lone surrogates (they cannot be encoded at all).
_NOT_HEADER_TEXT = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\ud800-\udfff]")
# An RFC 2047 encoded-word opener (`=?charset?Q?` or `?B?`): a reader decodes the word, so
# `=?utf-8?q?a=0D=0AX:_y?=` is as good as a raw CRLF. A bare `=?` ("2+2=?") is plain text.
_ENCODED_WORD = re.compile(r"=\?[^?]*\?[bq]\?", re.IGNORECASE)
# The character rule as a JSON-schema pattern for the OpenAPI document (which has no
# lookaround for the encoded-word rule; that one is enforced all the same).
HEADER_TEXT_PATTERN = "^[^\\u0000-\\u001f\\u007f-\\u009f\\u2028\\u2029]*$"
# Other C0/C1 controls have no business in a display name; they are replaced, not refused,
# because names arrive from subscribers (imports, forms) long before a campaign is composed.
_CONTROLS = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]+")
_LABEL = r"[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?"
_HOSTNAME = re.compile(rf"(?=.{{1,253}}\Z){_LABEL}(?:\.{_LABEL})*")
_ASCII_ADDRESS = re.compile(rf"[A-Za-z0-9.!#$%&'*+/=?^_`{{|}}~-]{{1,64}}@{_LABEL}(?:\.{_LABEL})*")
_ATOM = re.compile(r"[A-Za-z0-9._-]{1,128}")
MAX_ADDRESS_LENGTH = 254
# A display name longer than this is noise; capping keeps a quoted ASCII name on one
# header line far below SMTP's 998-octet limit.
MAX_DISPLAY_NAME = 200
MESSAGE_ID_HASH_LENGTH = 32
NOT_HEADER_TEXT = "must be one line of text: no control characters or line separators"
ENCODED_WORD = "must not contain an encoded-word (=?charset?Q?...?=); write the text as it is"
NOT_ONE_ADDRESS = "must be one plain email address like name@example.org"


def header_text_problem(value: str) -> str | None:
    """Why `value` may not go into a header, or None: the one rule every entry point (API
    schemas, CLI options, use cases) applies to header-bound text."""
    if _NOT_HEADER_TEXT.search(value):
        return NOT_HEADER_TEXT
    if _ENCODED_WORD.search(value):
        return ENCODED_WORD
    return None


def address_problem(address: str) -> str | None:
    """Why `address` is not exactly one ASCII addr-spec (`local@domain`, no display name, no
    second address, no quoting), or None."""
    if len(address) > MAX_ADDRESS_LENGTH or not _ASCII_ADDRESS.fullmatch(address):
        return NOT_ONE_ADDRESS
    return None


def check_header_value(field: str, value: str) -> str:
    """`value` if it may go into a header; else InvalidInput naming `field`."""
    problem = header_text_problem(value)
    if problem is not None:
        raise InvalidInput(f"{field} {problem}", field=field)
    return value


def check_header_values(values: dict[str, str | None]) -> None:
    """`check_header_value` for each named field; `None` (not set) passes."""
    for field, value in values.items():
        if value is not None:
            check_header_value(field, value)


def check_address(field: str, address: str) -> str:
    """An ASCII addr-spec with nothing that could end a header or open a second address."""
    if address_problem(address) is not None:
        raise InvalidInput(f"{field} {NOT_ONE_ADDRESS}", field=field)
    return address


def check_hostname(field: str, hostname: str) -> str:
    if not _HOSTNAME.fullmatch(hostname):
        raise InvalidInput(f"{field} is not a host name", field=field)
    return hostname


def check_atom(field: str, value: str) -> str:
    """Identifiers that appear raw in headers or URLs: letters, digits, dot, dash, underscore."""
    if not _ATOM.fullmatch(value):
        raise InvalidInput(f"{field} may only hold letters, digits, '.', '-' and '_'", field=field)
    return value


def clean_display_name(name: str | None) -> str | None:
    """A subscriber's name fit for display: controls become spaces, blanks become None."""
    if name is None:
        return None
    if _CONTROLS.search(name):
        name = _CONTROLS.sub(" ", name)
    name = " ".join(name.split())
    return name or None


def message_id(campaign_id: str, address: str, sending_domain: str) -> str:
    """`<campaign_id>.<hash>@<domain>`: findable at the provider by campaign and address (CMP-4)."""
    digest = hashlib.sha256(f"{campaign_id}:{address}".encode()).hexdigest()
    return f"<{campaign_id}.{digest[:MESSAGE_ID_HASH_LENGTH]}@{sending_domain}>"


def _campaign_parts(found: str) -> tuple[str, str, str] | None:
    """(campaign id, local part, domain) of something shaped like a campaign's Message-ID."""
    local, _, domain = found.strip().removeprefix("<").removesuffix(">").partition("@")
    campaign_id, _, _digest = local.partition(".")
    if not campaign_id.isdigit() or not domain:
        return None
    return campaign_id, local, domain


def names_a_campaign(found: str) -> bool:
    """Whether `found` is shaped like a campaign's Message-ID, whoever it was made for."""
    return _campaign_parts(found) is not None


def campaign_of_message_id(found: str, address: str) -> int | None:
    """The campaign id of a Message-ID `message_id` made for `address` (with or without its
    angle brackets), or None: another message's id, or one forged for another address."""
    parts = _campaign_parts(found)
    if parts is None:
        return None
    campaign_id, local, domain = parts
    if message_id(campaign_id, address, domain) != f"<{local}@{domain}>":
        return None
    return int(campaign_id)


def mailbox_header(address: str, name: str | None) -> str:
    """`Name <address>` with the name quoted (ASCII) or RFC 2047-encoded and folded (otherwise).

    The address must already have passed `check_address`; the name is cleaned and capped here.
    """
    name = clean_display_name(name)
    if name is None:
        return address
    name = name[:MAX_DISPLAY_NAME]
    # A name that looks like an encoded word would be decoded by the reader's client, so it
    # is encoded itself and arrives as typed.
    if name.isascii() and "=?" not in name:
        return formataddr((name, address))
    encoded = Header(name, "utf-8", maxlinelen=76, header_name="To").encode(linesep="\r\n")
    return f"{encoded} <{address}>"


def list_id(newsletter_name: str, newsletter_slug: str, sending_domain: str) -> str:
    """`Name <slug.domain>` (RFC 2919): the list's stable identity for filters and providers."""
    identity = f"<{newsletter_slug}.{sending_domain}>"
    name = clean_display_name(newsletter_name)
    return mailbox_header(f"{newsletter_slug}.{sending_domain}", name) if name else identity


def list_unsubscribe(https_url: str, mailto_address: str | None, token: str) -> str:
    """The RFC 2369 targets: the https URL (RFC 8058 one-click) always; a `mailto:` only when
    an address that someone or something acts on is configured — a mailto that nobody reads
    would tell the reader they left when they did not. Its subject carries the token so no
    lookup by sender is needed."""
    if mailto_address is None:
        return f"<{https_url}>"
    return f"<{https_url}>,\r\n <mailto:{mailto_address}?subject=unsubscribe-{token}>"


def feedback_id(campaign_id: str, newsletter_slug: str, sending_domain: str) -> str:
    """Gmail's `CampaignID:CustomerID:MailType:SenderID` so complaint rates group by campaign."""
    return f"{campaign_id}:{newsletter_slug}:tidings:{sending_domain}"
