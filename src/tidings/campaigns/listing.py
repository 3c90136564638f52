"""The campaigns list at a glance (UI-1): each campaign with its newsletter, its audience (who
it went to, or would go to if sent now), when it was sent, and its results as rates when the
provider has reported back (SND-27), and people's open and click rates where tracked (ENG-5)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from tidings.campaigns.context import SendingContext
from tidings.domain.segments import parse_filter
from tidings.domain.sending import CampaignStatus
from tidings.domain.tracking import HitKind, TrackingMode
from tidings.storage import campaigns as campaign_queries
from tidings.storage import engagement_counts
from tidings.storage import newsletters as newsletter_queries
from tidings.storage.campaigns import CampaignRow
from tidings.storage.sending import campaign_sends as send_queries
from tidings.storage.sending import candidates as candidate_queries
from tidings.storage.sending import recipient_outcomes
from tidings.storage.sending.campaign_sends import SendRow

NOT_SENT = frozenset({CampaignStatus.DRAFT, CampaignStatus.SCHEDULED})


def send_started(
    status: str, send: SendRow | None, scheduled_at: datetime | None
) -> datetime | None:
    """When the send went out, or None if it never did (a draft, a schedule not yet due,
    one called off before its time). A scheduled send's attempt start is rewritten when its
    job takes it; a row from before that rule still holds the scheduling time, so the
    scheduled time stands in when it is later."""
    if send is None or status in NOT_SENT:
        return None
    if status == CampaignStatus.CANCELLED and send.candidate_count is None:
        return None  # cancelled before any recipient was selected: nothing went out
    if scheduled_at is not None and scheduled_at > send.attempt_started_at:
        return scheduled_at
    return send.attempt_started_at


@dataclass(frozen=True, slots=True)
class ListedResults:
    sent: int
    delivered: int
    bounced: int  # hard or soft
    complained: int

    def rate(self, name: str) -> float:
        """`name` as a share of sent, 0..1 (0 when nothing was sent)."""
        count: int = getattr(self, name)
        return count / self.sent if self.sent else 0.0

    @property
    def delivery_reported(self) -> bool:
        """A plain SMTP relay reports no deliveries: 0% delivered would be a false alarm."""
        return self.delivered > 0


@dataclass(frozen=True, slots=True)
class ListedEngagement:
    """People's unique opens and clicks as shares of delivered (of sent when the provider
    reports no deliveries), 0..1; None before anything was sent (ENG-5)."""

    open_rate: float | None
    click_rate: float | None


def listed_engagement(
    tracking: str, people: dict[str, int] | None, counted: dict[str, int] | None
) -> ListedEngagement | None:
    """None when the newsletter does not track and nothing was counted: no rate to show."""
    if tracking == TrackingMode.OFF and not people:
        return None
    people = people or {}
    reach = (counted or {}).get("delivered") or (counted or {}).get("sent") or 0

    def rate(kind: HitKind) -> float | None:
        return people.get(kind, 0) / reach if reach else None

    return ListedEngagement(rate(HitKind.OPEN), rate(HitKind.CLICK))


@dataclass(frozen=True, slots=True)
class ListedCampaign:
    campaign: CampaignRow
    newsletter_name: str
    audience: int  # sent: the emails of the send; not yet: the consent-filtered audience now
    started_at: datetime | None  # when the (last) send attempt began
    finished_at: datetime | None
    results: ListedResults | None  # None until the provider reported on something sent
    engagement: ListedEngagement | None = None  # None: opens and clicks not tracked


def _heard_back(counted: dict[str, int]) -> bool:
    """Rates mean something once the provider reported on a message sent: before that (or
    with a provider that reports nothing, like `capture`) 0% delivered would be a false alarm."""
    return (
        counted["sent"] > 0
        and counted["delivered"] + counted["bounced"] + counted["complained"] > 0
    )


class CampaignListing:
    def __init__(self, context: SendingContext) -> None:
        self._ctx = context

    async def page(self, *, before_id: int | None, limit: int) -> list[ListedCampaign]:
        """Up to `limit` campaigns, newest first, older than `before_id` when given."""
        async with self._ctx.db.read() as conn:
            rows = await campaign_queries.list_campaigns(
                conn, newsletter_id=None, before_id=before_id, limit=limit
            )
            ids = [row.id for row in rows]
            sends = await send_queries.for_campaigns(conn, ids)
            outcomes = await recipient_outcomes.summaries(conn, ids)
            people = await engagement_counts.people_by_campaign(conn, ids)
            newsletters = {n.id: n for n in await newsletter_queries.list_newsletters(conn)}
            listed = []
            for row in rows:
                send = sends.get(row.id)
                if row.status in NOT_SENT or send is None:
                    audience = await candidate_queries.count_audience(
                        conn,
                        row.newsletter_id,
                        parse_filter(row.audience_filter),
                        campaign_id=row.id,
                    )
                else:
                    audience = (
                        send.email_count
                        if send.email_count is not None
                        else send.preflight_email_count
                    )
                counted = outcomes.get(row.id)
                newsletter = newsletters.get(row.newsletter_id)
                results = ListedResults(**counted) if counted and _heard_back(counted) else None
                listed.append(
                    ListedCampaign(
                        campaign=row,
                        newsletter_name=newsletter.name if newsletter else "",
                        audience=audience,
                        started_at=send_started(row.status, send, row.scheduled_at),
                        finished_at=send.finished_at if send else None,
                        results=results,
                        engagement=listed_engagement(
                            (send.tracking if send is not None else None)
                            or (newsletter.tracking if newsletter else TrackingMode.OFF),
                            people.get(row.id),
                            counted,
                        ),
                    )
                )
        return listed
