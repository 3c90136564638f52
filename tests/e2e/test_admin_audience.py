"""Admin audience API: newsletters, subscribers, privacy, suppressions, webhook events."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from tests.e2e.audience_helpers import confirmation_tokens, create_newsletter, snapshot
from tests.factories import admin_headers, api_client, make_settings
from tidings.bootstrap import Container
from tidings.domain.jobs import JobStatus


@pytest.fixture
async def admin(
    database_url: str,
) -> AsyncIterator[tuple[httpx.AsyncClient, Container, dict[str, str]]]:
    async with api_client(make_settings(database_url)) as (client, container):
        headers = await admin_headers(container)
        await create_newsletter(client, headers)
        yield client, container, headers


async def test_newsletter_crud_and_conflicts(admin: Any) -> None:
    """Admins manage lists over the API; a taken slug or a list with subscribers is a 409, not a
    500."""
    client, _, headers = admin
    duplicate = await client.post(
        "/api/admin/newsletters",
        headers=headers,
        json={"slug": "weekly", "name": "X", "sender_name": "X", "sender_address": "x@example.org"},
    )
    assert duplicate.status_code == 409
    changed = await client.patch(
        "/api/admin/newsletters/weekly",
        headers=headers,
        json={"name": "Weekly Notes", "double_opt_in": False},
    )
    assert changed.json()["name"] == "Weekly Notes"
    assert changed.json()["double_opt_in"] is False
    for bad in (
        {"sender_name": "A\r\nBcc: x@y.z"},
        {"reply_to": "not an address"},
        {"slug": "Bad Slug"},
    ):
        response = await client.patch("/api/admin/newsletters/weekly", headers=headers, json=bad)
        assert response.status_code == 422, bad
    await create_newsletter(client, headers, slug="empty")
    assert (await client.delete("/api/admin/newsletters/empty", headers=headers)).status_code == 204
    assert (await client.get("/api/admin/newsletters/empty", headers=headers)).status_code == 404


async def test_admin_asserted_consent_is_explicit_and_recorded(admin: Any) -> None:
    """Consent an admin asserts must say so (source, evidence, key id), or it cannot be defended
    later."""
    client, container, headers = admin
    created = await client.post(
        "/api/admin/subscribers",
        headers=headers,
        json={
            "email": "vip@example.org",
            "name": "Vip",
            "tier": "paid",
            "labels": ["Beta", "press"],
            "attributes": {"city": "Oslo"},
            "subscriptions": [{"newsletter": "weekly", "confirmed": True}],
        },
    )
    assert created.status_code == 201, created.text
    body = created.json()
    assert body["labels"] == ["beta", "press"]
    (subscription,) = body["subscriptions"]
    assert subscription["state"] == "confirmed"
    assert subscription["source"] == "admin"
    assert subscription["consent_evidence"].startswith("admin:")
    assert await confirmation_tokens(container) == []
    again = await client.post(
        "/api/admin/subscribers", headers=headers, json={"email": "VIP@example.org"}
    )
    assert again.status_code == 409


async def test_search_filters_by_newsletter_state_tier_label_and_text(admin: Any) -> None:
    """Admins find people the way campaigns target them: by list, state, tier, label and text."""
    client, _, headers = admin
    for email, tier, labels, confirmed in (
        ("a@example.org", "free", ["beta"], True),
        ("b@example.org", "paid", [], True),
        ("c@example.org", "paid", ["beta"], False),
    ):
        await client.post(
            "/api/admin/subscribers",
            headers=headers,
            json={
                "email": email,
                "tier": tier,
                "labels": labels,
                "subscriptions": [{"newsletter": "weekly", "confirmed": confirmed}],
            },
        )

    async def emails(**params: str) -> list[str]:
        page = await client.get("/api/admin/subscribers", params=params, headers=headers)
        assert page.status_code == 200, page.text
        return [item["email"] for item in page.json()["items"]]

    assert await emails(tier="paid") == ["b@example.org", "c@example.org"]
    assert await emails(label="beta") == ["a@example.org", "c@example.org"]
    assert await emails(newsletter="weekly", state="pending") == ["c@example.org"]
    assert await emails(tier="paid", label="beta") == ["c@example.org"]
    assert await emails(q="B@EXAMPLE") == ["b@example.org"]
    assert await emails(q="%") == []
    assert (
        await client.get("/api/admin/subscribers", params={"tier": "gold"}, headers=headers)
    ).status_code == 422
    assert (
        await client.get("/api/admin/subscribers", params={"newsletter": "nope"}, headers=headers)
    ).status_code == 404


async def test_update_export_and_privacy_delete(admin: Any) -> None:
    """A person's data can be corrected, exported whole and erased (AUD-10)."""
    client, container, headers = admin
    created = (
        await client.post(
            "/api/admin/subscribers",
            headers=headers,
            json={
                "email": "gone@example.org",
                "subscriptions": [{"newsletter": "weekly", "confirmed": True}],
            },
        )
    ).json()
    updated = await client.patch(
        f"/api/admin/subscribers/{created['id']}",
        headers=headers,
        json={"name": "Gone Soon", "tier": "comped", "labels": ["x"]},
    )
    assert (updated.json()["name"], updated.json()["tier"], updated.json()["labels"]) == (
        "Gone Soon",
        "comped",
        ["x"],
    )
    bad = await client.patch(
        f"/api/admin/subscribers/{created['id']}", headers=headers, json={"name": "a\nb"}
    )
    assert bad.status_code == 422
    exported = (
        await client.get(f"/api/admin/subscribers/{created['id']}/export", headers=headers)
    ).json()
    assert exported["subscriber"]["email"] == "gone@example.org"
    assert exported["subscriptions"][0]["consent_evidence"].startswith("admin:")
    await client.post(
        "/api/admin/suppressions", headers=headers, json={"email": "gone@example.org"}
    )
    assert (
        await client.delete(f"/api/admin/subscribers/{created['id']}", headers=headers)
    ).status_code == 204
    assert (
        await client.get(f"/api/admin/subscribers/{created['id']}", headers=headers)
    ).status_code == 404
    rows = await snapshot(container)
    assert "gone@example.org" not in repr(rows["subscribers"]) + repr(rows["subscriptions"])
    still = await client.get(
        "/api/admin/suppressions/check", params={"email": "gone@example.org"}, headers=headers
    )
    assert still.json() == {"suppressed": True}  # the keyed hash outlives the person's data


async def test_suppression_lift_is_recorded_and_requires_a_reason(admin: Any) -> None:
    """Lifting a suppression re-enables mail to someone who bounced or complained: it needs a reason
    and a trail."""
    client, container, headers = admin
    await client.post("/api/admin/suppressions", headers=headers, json={"email": "x@example.org"})
    listed = (await client.get("/api/admin/suppressions", headers=headers)).json()["items"]
    assert len(listed) == 1
    assert "x@example.org" not in str(listed)  # keyed hashes only
    assert (
        await client.post(
            "/api/admin/suppressions/lift", headers=headers, json={"email": "x@example.org"}
        )
    ).status_code == 422
    lifted = await client.post(
        "/api/admin/suppressions/lift",
        headers=headers,
        json={"email": "x@example.org", "note": "asked by phone"},
    )
    assert lifted.json() == {"suppressed": False}
    from tidings.storage import suppressions

    async with container.db.read() as conn:
        history = await suppressions.history(conn, listed[0]["email_hash"])
    assert [(h["action"], h["note"]) for h in history] == [
        ("suppress", None),
        ("lift", "asked by phone"),
    ]
    assert (
        await client.post(
            "/api/admin/suppressions/lift",
            headers=headers,
            json={"email": "x@example.org", "note": "again"},
        )
    ).status_code == 404


async def test_subscriber_events_are_queued_in_the_same_transaction(admin: Any) -> None:
    """PRI-6: every subscriber change that reports a webhook writes it with the change."""
    client, container, headers = admin
    hook = await client.post(
        "/api/admin/webhooks",
        headers=headers,
        json={"url": "https://hooks.example.org/t", "event_types": ["*"]},
    )
    assert hook.status_code == 201
    await client.post("/api/subscribe", json={"email": "evt@example.org", "newsletter": "weekly"})
    (token,) = await confirmation_tokens(container)
    await client.post(f"/confirm/{token}")
    subscriber = (
        await client.get("/api/admin/subscribers", params={"q": "evt@"}, headers=headers)
    ).json()["items"][0]
    await client.delete(
        f"/api/admin/subscribers/{subscriber['id']}/subscriptions/weekly", headers=headers
    )
    await client.post("/api/admin/suppressions", headers=headers, json={"email": "evt@example.org"})
    deliveries = (
        await client.get(f"/api/admin/webhooks/{hook.json()['id']}/deliveries", headers=headers)
    ).json()["items"]
    assert [d["event_type"] for d in reversed(deliveries)] == [
        "subscriber.created",
        "subscriber.confirmed",
        "subscriber.unsubscribed",
        "subscriber.suppressed",
    ]
    jobs = await container.queue.list_jobs(kind="deliver_webhook")
    assert len(jobs) == 4


async def test_bad_admin_input_is_4xx_and_changes_nothing(admin: Any) -> None:
    """A refused admin request is the caller's error and leaves every audience table as it was."""
    client, container, headers = admin
    before = await snapshot(container)
    cases = [
        ("POST", "/api/admin/subscribers", {"email": "bad"}),
        ("POST", "/api/admin/subscribers", {"email": "a@example.org", "tier": "gold"}),
        ("POST", "/api/admin/subscribers", {"email": "a@example.org", "labels": ["bad label!"]}),
        (
            "POST",
            "/api/admin/subscribers",
            {"email": "a@example.org", "subscriptions": [{"newsletter": "nope"}]},
        ),
        ("POST", "/api/admin/subscribers", {"email": "a@example.org", "name": "x\x00y"}),
        (
            "POST",
            "/api/admin/newsletters",
            {"slug": "n", "name": "N\nM", "sender_name": "S", "sender_address": "s@example.org"},
        ),
        ("POST", "/api/admin/newsletters", {"slug": "n"}),
        ("POST", "/api/admin/suppressions", {"email": "a@example.org", "reason": "bored"}),
        ("PATCH", "/api/admin/subscribers/999", {"name": "x"}),
        ("DELETE", "/api/admin/subscribers/999", None),
        ("GET", "/api/admin/subscribers/0", None),
    ]
    for method, path, body in cases:
        response = await client.request(method, path, headers=headers, json=body)
        assert 400 <= response.status_code < 500, (method, path, body, response.status_code)
        assert response.headers["content-type"] == "application/problem+json"
    assert await snapshot(container) == before


async def test_admin_assertion_does_not_override_a_persons_unsubscribe(admin: Any) -> None:
    """Only the person may undo their own unsubscribe; an admin assertion is refused."""
    client, _, headers = admin
    created = (
        await client.post(
            "/api/admin/subscribers",
            headers=headers,
            json={
                "email": "left@example.org",
                "subscriptions": [{"newsletter": "weekly", "confirmed": True}],
            },
        )
    ).json()
    await client.delete(
        f"/api/admin/subscribers/{created['id']}/subscriptions/weekly", headers=headers
    )
    forced = await client.post(
        f"/api/admin/subscribers/{created['id']}/subscriptions",
        headers=headers,
        json={"newsletter": "weekly", "confirmed": True, "note": "they asked by phone"},
    )
    assert forced.status_code == 409
    asked = await client.post(
        f"/api/admin/subscribers/{created['id']}/subscriptions",
        headers=headers,
        json={"newsletter": "weekly", "confirmed": False},
    )
    assert asked.json()["outcome"] == "asked_again"
    assert asked.json()["subscriber"]["subscriptions"][0]["state"] == "pending"


async def test_privacy_delete_also_erases_queued_mail_and_webhook_payloads(admin: Any) -> None:
    """AUD-10: after a deletion nothing about the person may still go out or sit in a log."""
    client, container, headers = admin
    hook = (
        await client.post(
            "/api/admin/webhooks",
            headers=headers,
            json={"url": "https://hooks.example.org/x", "event_types": ["*"]},
        )
    ).json()
    await client.post(
        "/api/subscribe",
        json={"email": "erase@example.org", "name": "Erin", "newsletter": "weekly"},
    )
    (queued,) = await container.queue.list_jobs(status=JobStatus.PENDING)
    assert queued.kind == "request_consent"  # carried out by a worker, not yet
    subscriber = (
        await client.get("/api/admin/subscribers", params={"q": "erase@"}, headers=headers)
    ).json()["items"][0]
    assert (
        await client.delete(f"/api/admin/subscribers/{subscriber['id']}", headers=headers)
    ).status_code == 204
    assert await confirmation_tokens(container) == []  # the queued request is gone
    rows = await snapshot(container)
    assert "erase@example.org" not in repr(rows)
    assert "Erin" not in repr(rows)
    deliveries = (
        await client.get(f"/api/admin/webhooks/{hook['id']}/deliveries", headers=headers)
    ).json()["items"]
    assert [d["event_type"] for d in deliveries] == ["subscriber.deleted"]
