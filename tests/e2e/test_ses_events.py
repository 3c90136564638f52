"""Amazon SES events through SNS (PRV-6): SNS-signed messages (SignatureVersion 1 and 2, the
certificate fetched over https from an allowed host and cached) confirm the subscription and
carry bounces, complaints and deliveries; anything forged, foreign or stale changes nothing.
SNS is played on loopback by an https server with its own certificate (tests/support/sns.py).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import select

from tests.e2e.audience_helpers import create_newsletter, snapshot
from tests.factories import admin_headers, api_client, make_settings
from tests.support.sns import TOPIC, FakeSns, fake_sns
from tidings.bootstrap import Container
from tidings.delivery.event_webhooks import SignatureRejected
from tidings.delivery.sns import SnsCertificates
from tidings.storage.tables import subscribers, suppressions

Site = tuple[httpx.AsyncClient, Container, FakeSns]
READER = "reader@example.test"


@pytest.fixture
async def site(database_url: str, tmp_path: Path) -> AsyncIterator[Site]:
    async with fake_sns(tmp_path) as sns:
        settings = make_settings(
            database_url,
            ses={
                "topic_arns": [TOPIC],
                "certificate_host_pattern": "localhost",
                "ca_file": str(sns.certificate),
            },
        )
        async with api_client(settings) as (client, container):
            headers = await admin_headers(container)
            await create_newsletter(client, headers)
            body = {"email": READER, "subscriptions": [{"newsletter": "weekly", "confirmed": True}]}
            assert (
                await client.post("/api/admin/subscribers", json=body, headers=headers)
            ).is_success
            yield client, container, sns


def bounce(bounce_type: str, status: str = "5.1.1") -> dict[str, Any]:
    return {
        "notificationType": "Bounce",
        "bounce": {
            "bounceType": bounce_type,
            "bouncedRecipients": [
                {"emailAddress": READER, "status": status, "diagnosticCode": "smtp; 550 unknown"}
            ],
            "timestamp": datetime.now(UTC).isoformat(),
        },
        "mail": {"messageId": "ses-1", "headers": [{"name": "Message-ID", "value": "<x@y>"}]},
    }


async def post(client: httpx.AsyncClient, message: dict[str, Any]) -> httpx.Response:
    return await client.post(
        "/api/events/ses",
        content=json.dumps(message).encode(),
        headers={"content-type": "text/plain; charset=UTF-8"},  # as SNS sends it
    )


async def reason(container: Container) -> str | None:
    async with container.db.read() as conn:
        query = select(suppressions.c.reason).join(
            subscribers, subscribers.c.email_hash == suppressions.c.email_hash
        )
        return (await conn.execute(query)).scalar()


async def test_the_subscription_is_confirmed_and_signed_bounces_suppress(site: Site) -> None:
    """Setting SES up is: point SNS here, it confirms itself; then a permanent bounce signed
    either way SNS signs suppresses the reader, and the certificate is fetched once."""
    client, container, sns = site
    confirmation = sns.sign(
        {
            "Type": "SubscriptionConfirmation",
            "MessageId": str(uuid.uuid4()),
            "Token": "token-1",
            "TopicArn": TOPIC,
            "Message": "You have chosen to subscribe to the topic.",
            "SubscribeURL": f"https://localhost:{sns.port}/confirm?Token=token-1",
            "Timestamp": datetime.now(UTC).isoformat().replace("+00:00", "Z"),
        },
        version="1",
    )
    answer = await post(client, confirmation)
    assert answer.status_code == 200, answer.text
    assert answer.json() == {"outcome": "confirmed"}
    assert sns.requests["/confirm"] == 1
    transient = sns.sign(sns.notification(bounce("Transient", "4.2.2"), message_id="m-1"), "1")
    assert (await post(client, transient)).json() == {"outcome": "applied"}
    assert await reason(container) is None  # one soft bounce is counted, not punished
    permanent = sns.sign(sns.notification(bounce("Permanent"), message_id="m-2"), "2")
    assert (await post(client, permanent)).json() == {"outcome": "applied"}
    assert await reason(container) == "hard_bounce"
    assert sns.requests["/cert.pem"] == 1  # cached
    complaint = {
        "notificationType": "Complaint",
        "complaint": {
            "complainedRecipients": [{"emailAddress": READER}],
            "timestamp": datetime.now(UTC).isoformat(),
        },
        "mail": {"messageId": "ses-2"},
    }
    assert (await post(client, sns.sign(sns.notification(complaint, message_id="m-3")))).json() == {
        "outcome": "applied"
    }
    assert await reason(container) == "complaint"
    delivered = {
        "notificationType": "Delivery",
        "delivery": {"recipients": [READER], "timestamp": datetime.now(UTC).isoformat()},
        "mail": {"messageId": "ses-3"},
    }
    signed = sns.sign(sns.notification(delivered, message_id="m-4"))
    assert (await post(client, signed)).json() == {"outcome": "applied"}
    assert (await post(client, signed)).json() == {"outcome": "duplicate"}  # SNS retried


async def test_forged_foreign_and_stale_messages_change_nothing(site: Site) -> None:
    """SNS signatures only prove SNS sent a message: it must also be signed by a certificate
    from an SNS host, come from your own topic, and be recent."""
    client, container, sns = site
    before = await snapshot(container)
    genuine = sns.sign(sns.notification(bounce("Permanent"), message_id="m-1"))
    tampered = {**genuine, "Message": genuine["Message"].replace("Permanent", "Transient")}
    foreign = sns.sign({**sns.notification(bounce("Permanent"), message_id="m-2"),
                        "TopicArn": "arn:aws:sns:eu-west-1:999999999999:mine"})  # fmt: skip
    elsewhere = {**genuine, "SigningCertURL": "https://evil.example/cert.pem"}
    plain_http = {**genuine, "SigningCertURL": f"http://localhost:{sns.port}/cert.pem"}
    old = datetime.now(UTC) - timedelta(hours=2)
    stale = sns.sign(
        sns.notification(bounce("Permanent"), message_id="m-3", Timestamp=old.isoformat())
    )
    for message in (tampered, foreign, elsewhere, plain_http, stale):
        answer = await post(client, message)
        assert answer.status_code == 401, answer.text
        assert answer.json()["code"] == "signature_rejected"
    assert sns.requests["/cert.pem"] <= 2  # never fetched from the wrong host or over http
    junk = await client.post(
        "/api/events/ses", content=b"{", headers={"content-type": "text/plain"}
    )
    assert junk.status_code == 422
    assert await snapshot(container) == before
    unreadable = sns.sign({**sns.notification({"notificationType": "Bounce"}, message_id="m-4")})
    assert (await post(client, unreadable)).json() == {"outcome": "unparsed"}


async def test_the_route_is_closed_until_topics_are_configured(database_url: str) -> None:
    """Without a topic list any AWS account could feed us bounces: nothing is accepted."""
    async with api_client(make_settings(database_url)) as (client, _container):
        answer = await post(client, {"Type": "Notification"})
    assert answer.status_code == 404


async def test_deeply_nested_json_to_the_event_routes_is_a_4xx_not_a_500(
    database_url: str, tmp_path: Path
) -> None:
    """Anyone can post to the event routes: `[[[[…` must be bad input, not a crash (500)."""
    nested = b"[" * 100_000
    async with fake_sns(tmp_path) as sns:
        settings = make_settings(
            database_url,
            mailgun={"webhook_signing_key": "whsec-test-signing-key"},
            ses={
                "topic_arns": [TOPIC],
                "certificate_host_pattern": "localhost",
                "ca_file": str(sns.certificate),
            },
        )
        async with api_client(settings) as (client, container):
            headers = {**await admin_headers(container), "content-type": "application/json"}
            before = await snapshot(container)
            for path in ("/api/events/mailgun", "/api/events/ses", "/api/admin/events"):
                answer = await client.post(path, content=nested, headers=headers)
                assert 400 <= answer.status_code < 500, (path, answer.status_code)
                assert answer.headers["content-type"] == "application/problem+json"
            assert await snapshot(container) == before
            # Signed by SNS, but SES's part of it nested past reading: kept for the operator.
            message = sns.notification({}, message_id="m-nested")
            signed = sns.sign({**message, "Message": nested.decode()})
            assert (await post(client, signed)).json() == {"outcome": "unparsed"}


async def test_a_certificate_url_must_be_a_pem_file_on_an_sns_host(site: Site) -> None:
    """Only SNS's own certificate proves a message came from SNS; a URL that is no URL at
    all is the sender's mistake (4xx), never a 500."""
    client, container, sns = site
    before = await snapshot(container)
    genuine = sns.sign(sns.notification(bounce("Permanent"), message_id="m-1"))
    port = sns.port
    for url in (
        f"https://localhost:{port}/confirm",  # the right host, but not a certificate
        f"https://localhost:{port}/cert.pem?x=1",
        f"https://user:pw@localhost:{port}/cert.pem",
        f"https://localhost.evil.example:{port}/cert.pem",
    ):
        answer = await post(client, {**genuine, "SigningCertURL": url})
        assert answer.status_code == 401, (url, answer.text)
        assert answer.json()["code"] == "signature_rejected"
    for url in (
        "https://[::1/cert.pem",
        f"https://localhost:{port}9999/cert.pem",
        "https://localhost:abc/cert.pem",
    ):
        answer = await post(client, {**genuine, "SigningCertURL": url})
        assert answer.status_code == 422, (url, answer.text)
        assert answer.headers["content-type"] == "application/problem+json"
        assert answer.json()["errors"][0]["field"] == "SigningCertURL"
    assert sns.requests["/confirm"] == 0
    assert await snapshot(container) == before


def test_the_default_sns_host_pattern_is_sns_itself_and_nothing_else_on_amazonaws() -> None:
    """An S3 bucket named `sns` is served under amazonaws.com: it must not pass for SNS."""
    certificates = SnsCertificates(
        host_pattern=make_settings("sqlite://").ses.certificate_host_pattern
    )
    for host in (
        "sns.us-east-1.amazonaws.com",
        "sns.us-gov-west-1.amazonaws.com",
        "sns.cn-north-1.amazonaws.com.cn",
    ):
        url = f"https://{host}/SimpleNotificationService-abc.pem"
        assert certificates.check_url(url, field="SigningCertURL", certificate=True) == url
    for host in (
        "sns.s3-us-west-2.amazonaws.com",
        "sns.s3-website-us-east-1.amazonaws.com",
        "sns.s3.amazonaws.com",
        "sns.us-east-1.amazonaws.com.evil.example",
    ):
        with pytest.raises(SignatureRejected):
            certificates.check_url(f"https://{host}/cert.pem", field="SigningCertURL")


async def test_a_failed_certificate_fetch_is_not_repeated_for_every_message(site: Site) -> None:
    """A flood of messages naming a certificate that cannot be had must not fetch it each time."""
    client, _container, sns = site
    missing = f"https://localhost:{sns.port}/missing.pem"
    for number in range(5):
        signed = sns.sign(sns.notification(bounce("Permanent"), message_id=f"m-{number}"))
        answer = await post(client, {**signed, "SigningCertURL": missing})
        assert answer.status_code == 401, answer.text
    assert sns.requests["/missing.pem"] == 1
    genuine = sns.sign(sns.notification(bounce("Permanent"), message_id="m-ok"))
    assert (await post(client, genuine)).json() == {"outcome": "applied"}
