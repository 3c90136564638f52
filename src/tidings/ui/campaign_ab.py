"""A campaign's A/B test on its pages (ENG-8): the operator's pick of a winner, audited. The
test's fields are the editor's (`campaigns.DraftForm`); its figures are on the send's page."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Request
from fastapi.responses import RedirectResponse, Response

from tidings.domain.ab_tests import AbTest, build_test
from tidings.domain.errors import Conflict, InvalidInput
from tidings.ui.campaign_sends import status_page
from tidings.ui.guard import OperatorActor, Session, container_of
from tidings.ui.templating import UiRoute

router = APIRouter(prefix="/campaigns", route_class=UiRoute)
CampaignId = Annotated[int, Path(ge=1, le=2**62)]
AB_FORM_FIELDS = ("ab_field", "ab_variants", "ab_test_share", "ab_test_wait", "ab_metric")


def ab_from_form(field: str, variants: str, share: str, wait: str, metric: str) -> AbTest | None:
    """The editor's A/B section as a test: one alternative per line; no field, no test."""
    if not field:
        return None
    if not share.strip().isdigit():
        raise InvalidInput("the test share is a whole percentage, e.g. 20", field="test_share")
    alternatives = [line.strip() for line in variants.splitlines() if line.strip()]
    return build_test(
        {field: alternatives or [""]},
        test_share=int(share),
        test_wait=wait,
        metric=metric,
    )


def ab_values(test: AbTest | None) -> dict[str, str]:
    """A stored test as the editor's A/B fields show it."""
    if test is None:
        return dict.fromkeys(AB_FORM_FIELDS, "")
    hours = test.wait.total_seconds() / 3600
    return {
        "ab_field": test.field.value,
        "ab_variants": "\n".join(test.alternatives),
        "ab_test_share": str(test.test_share),
        "ab_test_wait": f"{hours:g}h",
        "ab_metric": test.metric.value,
    }


@router.post("/{campaign_id}/ab/winner/{variant}")
async def pick_winner(
    request: Request,
    session: Session,
    actor: OperatorActor,
    campaign_id: CampaignId,
    variant: Annotated[str, Path(max_length=2)],
) -> Response:
    """The operator's pick, before the wait is over: the rest gets it at once."""
    container = container_of(request)
    try:
        await container.ab_tests.pick(campaign_id, variant)
    except (InvalidInput, Conflict) as refused:
        draft = await container.campaigns.get(campaign_id)
        return await status_page(request, session, draft, "", error=refused.detail, status_code=409)
    await container.audit.record(
        actor,
        "campaign.ab_winner_picked",
        f"campaign:{campaign_id}",
        {"variant": variant.strip().upper()},
    )
    return RedirectResponse(f"/admin/campaigns/{campaign_id}", status_code=303)
