"""Checks before sending (issue 40 item 3, CMP-8): what a writer is warned about before a
send — on the editor page, on the send confirmation, by `tidings campaign check` and the
admin API — with merge tags counted against the real audience. Warnings, never refusals."""

from __future__ import annotations

import json
from typing import Any

from tests.e2e.audience_helpers import create_newsletter
from tests.factories import admin_headers, api_client, make_settings, real_mail
from tests.support import rows
from tests.support.admin_ui import signed_in, ui_app
from tests.support.cli import clean_env, tidings
from tests.support.sending import create_campaign
from tidings.bootstrap import Container
from tidings.storage.tables import newsletters

FLAWED_BODY = (
    "Hello {{ first_name }}, from {{ attribs.city }} ({{ attribs.team | fallback: 'a team' }}).\n\n"
    "![](https://cdn.example.org/a.png) ![A chart](http://cdn.example.org/chart.png)\n\n"
    "[Read on](http://example.org/story) or [here](https://example.org/safe) or "
    "[write](mailto:desk@example.org).\n\n"
    "::: only paid\n![](https://cdn.example.org/paid.png)\n:::\n"
)
LONG_SUBJECT = "A subject line that goes on well past what any inbox shows of it"  # 64


async def _audience(container: Container) -> None:
    """Five free readers of `weekly` (two without a name, three without a city) and two paid
    (both named, both with a city)."""
    async with container.db.write() as conn:
        newsletter_id = (
            (await conn.execute(newsletters.select().where(newsletters.c.slug == "weekly")))
            .one()
            .id
        )
        people: list[dict[str, Any]] = [
            {"name": None, "attributes": {}},
            {"name": "  ", "attributes": {"city": "Lyon"}},
            {"name": "Ana", "attributes": {"city": ""}},
            {"name": "Bo", "attributes": {"city": 12}},
            {"name": "Cy", "attributes": {"city": ["not", "text"]}},
            {"name": "Di", "tier": "paid", "attributes": {"city": "Oslo"}},
            {"name": "Ed", "tier": "paid", "attributes": {"city": "Rome"}},
        ]
        for person in people:
            subscriber_id = await rows.subscriber(conn, **person)
            await rows.subscription(
                conn, subscriber_id, newsletter_id, confirmed_at=rows.NOW, consent_evidence="t"
            )


async def test_a_flawed_draft_is_warned_about_everywhere_and_a_clean_one_is_not(
    database_url: str,
) -> None:
    """Every CMP-8 check fires on a draft written to trip it — merge tags counted per segment
    against who would receive it (a name of spaces is no name, a number is a value, a list
    is not), a missing alt text and http:// links and images found per segment, a long
    subject — the same report from the API and the CLI; a tidy draft has none."""
    settings = make_settings(database_url, **real_mail())
    async with api_client(settings) as (client, container):
        headers = await admin_headers(container)
        await create_newsletter(client, headers)
        await _audience(container)
        flawed = await create_campaign(
            client, headers, subject=LONG_SUBJECT, body=FLAWED_BODY, preheader="x" * 101
        )
        answer = await client.get(f"/api/admin/campaigns/{flawed}/checks", headers=headers)
        assert answer.status_code == 200, answer.text
        warnings = answer.json()["warnings"]
        found = {(w["code"], tuple(w["segments"]), w["count"]) for w in warnings}
        every = ("free", "paid", "comped")  # no filter: every tier's version
        assert found == {
            ("subject_long", (), None),
            ("preheader_long", (), None),
            ("merge_tag_without_fallback", every, 2),  # first_name: None and spaces
            ("merge_tag_without_fallback", every, 3),  # attribs.city: "", missing, a list
            ("image_without_alt", ("free", "comped"), None),
            ("image_without_alt", ("paid",), None),  # its own block's image too
            ("insecure_link", every, None),
            ("insecure_image", every, None),
        }
        assert len(warnings) == len(found)
        messages = " ".join(w["message"] for w in warnings)
        assert "{{ first_name }} has no fallback and 2 recipients" in messages
        assert "{{ attribs.city }} has no fallback and 3 recipients" in messages
        assert "attribs.team" not in messages  # it has a fallback
        assert "http://example.org/story" in messages
        assert "mailto:" not in messages
        paid_alt = next(
            w for w in warnings if w["code"] == "image_without_alt" and w["segments"] == ["paid"]
        )
        assert "2 images" in paid_alt["message"]  # its own block and the shared one
        env = clean_env(
            DATABASE_URL=container.settings.database.url,
            THEME_POSTAL_ADDRESS=container.settings.theme.postal_address,
        )
        printed = tidings("campaign", "check", str(flawed), "--json", env=env)
        assert printed.returncode == 0, printed.output
        assert json.loads(printed.stdout) == answer.json()
        text = tidings("campaign", "check", str(flawed), env=env)
        assert text.returncode == 0
        assert "8 warning(s)" in text.stdout
        assert "[free, paid, comped] merge_tag_without_fallback" in text.stdout
        tidy = await create_campaign(
            client,
            headers,
            subject="Short",
            body="Hi {{ name | fallback: 'reader' }}. ![A map](https://cdn.example.org/m.png)",
        )
        clean = await client.get(f"/api/admin/campaigns/{tidy}/checks", headers=headers)
        assert clean.json() == {"campaign_id": tidy, "warnings": []}
        assert "no warnings" in tidings("campaign", "check", str(tidy), env=env).stdout
        missing = await client.get("/api/admin/campaigns/999999/checks", headers=headers)
        assert missing.status_code == 404
        assert missing.headers["content-type"].startswith("application/problem+json")


async def test_the_placeholder_postal_address_and_gmail_clipping_are_warned(
    database_url: str,
) -> None:
    """A site still on the placeholder postal address is told so (real mail is refused
    until it is set, CAN-SPAM asks for one); a body over Gmail's ~102 KB is warned per
    segment, measured on the message as it goes out."""
    async with api_client(make_settings(database_url)) as (client, container):
        headers = await admin_headers(container)
        await create_newsletter(client, headers)
        huge = await create_campaign(
            client, headers, subject="Big", body="\n\n".join(["A paragraph of words. " * 40] * 130)
        )
        answer = await client.get(f"/api/admin/campaigns/{huge}/checks", headers=headers)
    codes = {(w["code"], tuple(w["segments"])) for w in answer.json()["warnings"]}
    assert ("postal_address_missing", ()) in codes
    assert ("html_clipped", ("free", "paid", "comped")) in codes


async def test_the_editor_and_the_send_confirmation_show_the_warnings(database_url: str) -> None:
    """The writer sees the warnings where they decide: on the editor page of a draft and on
    the page that confirms the send; a tidy draft says there are none."""
    settings = make_settings(database_url, **real_mail())
    async with ui_app(settings) as (browser, container):
        client = browser()
        await signed_in(client, container)
        headers = await admin_headers(container)
        await create_newsletter(client, headers)
        await _audience(container)
        flawed = await create_campaign(client, headers, subject=LONG_SUBJECT, body=FLAWED_BODY)
        tidy = await create_campaign(client, headers, subject="Short", body="Hello.")
        editor = await client.get(f"/admin/campaigns/{flawed}")
        confirm = await client.get(f"/admin/campaigns/{flawed}/send")
        calm = await client.get(f"/admin/campaigns/{tidy}/send")
    for shown in (editor, confirm):
        assert shown.status_code == 200
        assert "Checks before sending" in shown.text
        assert 'data-code="merge_tag_without_fallback"' in shown.text
        assert "has no fallback and 2 recipients" in shown.text
    assert "No warnings about the draft as last saved" in calm.text
