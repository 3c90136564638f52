"""Liveness, readiness, metrics and the OpenAPI document answer (issue 2, API-3, OBS-2)."""

from tests.factories import api_client, make_settings


async def test_health_ready_metrics_and_openapi(database_url: str) -> None:
    """Orchestrators and operators rely on these endpoints answering without a key."""
    settings = make_settings(database_url, metrics={"enabled": True})
    async with api_client(settings) as (client, _):
        assert (await client.get("/healthz")).json() == {"status": "ok"}
        ready = await client.get("/readyz")
        assert ready.status_code == 200
        assert ready.json()["status"] == "ready"
        metrics = await client.get("/metrics")
        assert "tidings_http_requests_total" in metrics.text
        assert 'route="/readyz"' in metrics.text
        spec = (await client.get("/openapi.json")).json()
        assert "/api/admin/keys" in spec["paths"]


async def test_readyz_is_503_until_migrated(empty_database_url: str) -> None:
    """`tidings api` does not migrate: a load balancer must not route to it until it is ready."""
    settings = make_settings(empty_database_url)
    async with api_client(settings, apply_migrations=False) as (client, _):
        response = await client.get("/readyz")
        assert response.status_code == 503
        assert response.headers["content-type"] == "application/problem+json"
        assert "tidings migrate" in response.json()["detail"]


async def test_request_id_header_and_token_free_route_labels(sqlite_url: str) -> None:
    """Paths can carry bearer tokens (/unsubscribe/{token}); metrics label the template only."""
    async with api_client(make_settings(sqlite_url, metrics={"enabled": True})) as (client, _):
        response = await client.delete("/api/admin/keys/abcdefghij")
        assert len(response.headers["x-request-id"]) == 32
        metrics = (await client.get("/metrics")).text
        assert 'route="/api/admin/keys/{key_id}"' in metrics
        assert "abcdefghij" not in metrics
