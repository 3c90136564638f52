"""Liveness, readiness and metrics endpoints. Metrics have a router of their own: they are
served on the API port only when `metrics.enabled`, or by a separate app on `metrics.port`."""

from __future__ import annotations

import contextlib

from fastapi import APIRouter, Response

from tidings.api.deps import ContainerDep
from tidings.domain.errors import NotReady

router = APIRouter(tags=["health"])
metrics_router = APIRouter(tags=["health"])


@router.get("/healthz", summary="The process is alive")
async def healthz() -> dict[str, str]:
    return {"status": "ok"}


@router.get("/readyz", summary="The database is reachable and migrated to the latest revision")
async def readyz(container: ContainerDep) -> dict[str, str]:
    await container.check_ready()
    return {"status": "ready", "database": container.db.dialect}


@metrics_router.get("/metrics", summary="Prometheus metrics", response_class=Response)
async def metrics(container: ContainerDep) -> Response:
    # Queue depth is read from the rows at scrape time (PRI-7), never kept in memory. If the
    # database is down, /readyz says so; metrics still answer with what they have.
    with contextlib.suppress(NotReady):
        container.metrics.set_queue_depth(await container.queue.depth())
    return Response(container.metrics.render(), media_type="text/plain; version=0.0.4")
