"""A realistic sample campaign: for the benchmark, the browser test and the screenshots.

It exercises every component (headings, lead paragraph, links, an image, a list, a quote,
a table, a callout, a button, a divider) and both kinds of segment block, and renders to
roughly the size of a real issue.
"""

from __future__ import annotations

from tidings.rendering.content import CampaignContent
from tidings.rendering.mime import ListInfo, Sender

SAMPLE_SENDER = Sender(
    name="The Ledger Desk",
    address="editors@news.example.com",
    sending_domain="news.example.com",
    reply_to="letters@news.example.com",
)
SAMPLE_LIST = ListInfo(campaign_id="1001", newsletter_slug="ledger", newsletter_name="The Ledger")
SAMPLE_BASE_URL = "https://news.example.com"

_BODY = """\
# The week the harbour froze

Good morning, {{ first_name | fallback: "reader" }}. For the first time in forty years the \
inner harbour iced over, and the city learned how much of its daily life still moves by \
water, {{ attribs.city | fallback: "wherever you read this" }} included. This week: \
what stopped, what kept going, and what the council plans to do before \
next winter.

![Ferries waiting at the pier on Tuesday morning]({image_url})

## What stopped

Three of the five ferry routes were suspended from Monday night. The fishing fleet stayed \
in, and the Saturday market on the quay closed for the first time since the flood of 1998. \
Read the [harbour master's notice](https://example.com/harbour/notice?ref=ledger&issue=42) \
for the full list of closures.

- The eastern ferry resumed on Thursday with an icebreaker escort.
- Deliveries to the islands moved to the road bridge, adding two hours each way.
- Schools on the north shore opened late on three days.

> "We had the boats, the crews and the fuel. What we did not have was open water."
> — the harbour master, on Wednesday

## The numbers

| Route | Normal trips | Trips this week |
|-------|-------------:|----------------:|
| East  | 84           | 31              |
| North | 56           | 0               |
| Island| 42           | 12              |

::: only paid
::: callout
**Members' briefing.** The council's draft resilience budget, which we have seen, sets \
aside funds for a second icebreaker and heated berths at the north pier. We will publish \
the full document and our analysis on Friday — as a member, you will get it first.
:::
:::

::: except paid
::: callout
**The full analysis is for members.** Our reporting on the council's draft resilience \
budget is published for members first. Membership also supports this newsletter.
:::

::: button https://news.example.com/join?from=ledger
Become a member
:::
:::

---

### Also this week

The library's winter lecture series opens on the 14th with a talk on the history of the \
harbour. Entry is free; [book a seat](https://example.com/library/lectures).

Thanks for reading. Reply to this email to write to the editors — we read everything.
"""


def sample_content(
    image_url: str = "https://news.example.com/images/harbour.jpg",
) -> CampaignContent:
    """The sample campaign, with its image pointed at `image_url`."""
    return CampaignContent(
        subject="The week the harbour froze",
        preheader="What stopped, what kept going, and what the council plans before next winter.",
        body=_BODY.replace("{image_url}", image_url),
        body_format="markdown",
    )
