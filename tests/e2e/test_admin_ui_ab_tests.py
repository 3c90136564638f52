"""The admin UI's A/B test (ENG-8): set up in the editor (refused, naming the tracking field,
on a newsletter that does not track), its figures on the send's page while it waits, and the
operator's button that picks the winner and sends the rest."""

from __future__ import annotations

from sqlalchemy import update

from tests.factories import make_settings
from tests.support.admin_ui import DRAFT, composed_campaign, signed_in, ui_app
from tests.support.sending import FAST_QUEUE, wait_for_campaign_status, workers
from tests.support.waiting import wait_for
from tidings.storage.tables import newsletters

AB_FORM = {
    "ab_shown": "1",
    "ab_field": "subject",
    "ab_variants": "Issue 1, bolder",
    "ab_test_share": "50",
    "ab_test_wait": "4h",
    "ab_metric": "opens",
}


async def test_an_ab_test_is_set_up_watched_and_decided_from_the_browser(
    database_url: str,
) -> None:
    """Everything the CLI and API do for a test, an operator can do on the pages: the editor
    keeps the test (and refuses it on an untracked newsletter, at the field), the send's page
    shows the variants while the rest waits, and a button sends the chosen one to the rest."""
    settings = make_settings(database_url, queue=FAST_QUEUE)
    async with ui_app(settings) as (browser, container):
        client = browser()
        csrf = await signed_in(client, container)
        campaign_url, campaign_id = await composed_campaign(client, container, csrf, 20)
        refused = await client.post(campaign_url, data={**DRAFT, **AB_FORM, "csrf_token": csrf})
        assert refused.status_code == 422
        assert 'id="tracking-error"' in refused.text
        assert "Issue 1, bolder" in refused.text  # what was typed is kept
        async with container.db.write() as conn:
            await conn.execute(update(newsletters).values(tracking="aggregate"))
        saved = await client.post(campaign_url, data={**DRAFT, **AB_FORM, "csrf_token": csrf})
        assert saved.status_code == 303, saved.text
        editor = await client.get(campaign_url)
        assert '<option value="subject" selected>' in editor.text
        assert ">Issue 1, bolder</textarea>" in editor.text
        assert '<option value="opens" selected>' in editor.text
        sent = await client.post(campaign_url + "/send", data={"csrf_token": csrf})
        assert sent.status_code == 303
        async with workers(container):

            async def testing() -> bool:
                summary = await container.ab_tests.summary(campaign_id)
                return summary is not None and summary["state"] == "testing"

            await wait_for(testing, message="the test never started")
            waiting = await client.get(campaign_url)
            assert 'data-field="ab-test"' in waiting.text
            assert "the rest of the audience waits for the decision" in waiting.text
            assert "Send B to the rest" in waiting.text
            picked = await client.post(campaign_url + "/ab/winner/B", data={"csrf_token": csrf})
            assert picked.status_code == 303, picked.text
            assert await wait_for_campaign_status(container, campaign_id) == "submitted"
        done = await client.get(campaign_url)
    assert "<strong>Winner: B</strong>, picked by an operator" in done.text
    assert "Send B to the rest" not in done.text
