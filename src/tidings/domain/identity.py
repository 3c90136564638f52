"""Who real mail says it is from (issue 13): the publisher's postal address, the sender
address and the public URL its links point at. Mail through a real provider (SMTP, Mailgun)
must not go out under the placeholder defaults that let tidings run with no configuration; the
local capture provider may, so a first run and the demo need no set-up."""

from __future__ import annotations

from dataclasses import dataclass

from tidings.domain.errors import Conflict

# Domains no real mailbox lives under: an address there is a placeholder, never a sender.
_PLACEHOLDER_DOMAINS = ("localhost", "localdomain", "invalid")


class PlaceholderIdentity(Conflict):
    """Real mail was asked for while the publisher's identity is still the placeholder."""

    code = "placeholder_identity"
    title = "The publisher's identity is still the placeholder"


def is_placeholder_address(address: str) -> bool:
    """`news@localhost`, `a@b`: an address on a name no mail can come from."""
    domain = address.rpartition("@")[2].lower().rstrip(".")
    return "." not in domain or domain.rsplit(".", 1)[-1] in _PLACEHOLDER_DOMAINS


@dataclass(frozen=True, slots=True)
class SendingIdentity:
    """`placeholders`: the settings still at their defaults, each named with its environment
    variable. `real_provider` is False for the local capture provider, which checks nothing."""

    real_provider: bool
    placeholders: tuple[str, ...] = ()

    def check(self, *, newsletter: tuple[str, str] | None = None) -> None:
        """Raise `PlaceholderIdentity`, naming what to set, unless real mail may go out.
        `newsletter` is (slug, sender address) when the mail is a newsletter's."""
        if not self.real_provider:
            return
        missing = list(self.placeholders)
        if newsletter is not None and is_placeholder_address(newsletter[1]):
            missing.append(f"the sender_address of newsletter {newsletter[0]!r}")
        if missing:
            raise PlaceholderIdentity(
                "refusing to send real mail under the placeholder identity: set "
                + "; ".join(missing)
                + ". They are still the defaults (fine for the capture provider, not for "
                "readers' inboxes).",
                field="sender_address" if missing[0].startswith("the ") else missing[0].split()[0],
            )


NOT_CHECKED = SendingIdentity(real_provider=False)  # the capture provider's: checks nothing
