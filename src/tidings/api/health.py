"""Liveness, readiness and metrics endpoints."""

from __future__ import annotations

import contextlib

from fastapi import APIRouter, Response
from sqlalchemy.exc import SQLAlchemyError

from tidings.api.deps import ContainerDep
from tidings.domain.errors import NotReady
from tidings.storage import migrate
from tidings.storage.health import ping

router = APIRouter(tags=["health"])


@router.get("/healthz", summary="The process is alive")
async def healthz() -> dict[str, str]:
    return {"status": "ok"}


@router.get("/readyz", summary="The database is reachable and migrated to the latest revision")
async def readyz(container: ContainerDep) -> dict[str, str]:
    try:
        await ping(container.db)
        at_head = await migrate.is_at_head(container.db)
    except (SQLAlchemyError, OSError):
        raise NotReady("the database is not reachable") from None
    if not at_head:
        raise NotReady("the database is not migrated to the latest revision: run `tidings migrate`")
    return {"status": "ready", "database": container.db.dialect}


@router.get("/metrics", summary="Prometheus metrics", response_class=Response)
async def metrics(container: ContainerDep) -> Response:
    # Queue depth is read from the rows at scrape time (PRI-7), never kept in memory. If the
    # database is down, /readyz says so; metrics still answer with what they have.
    with contextlib.suppress(SQLAlchemyError, OSError):
        container.metrics.set_queue_depth(await container.queue.depth())
    return Response(container.metrics.render(), media_type="text/plain; version=0.0.4")
