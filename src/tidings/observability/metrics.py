"""Prometheus metrics (SPEC OBS-2), one registry per process, built by the composition root."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest


class Metrics:
    """The process's metrics. A fresh registry per instance, so tests never share counters."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.http_requests = Counter(
            "tidings_http_requests",
            "HTTP requests answered, by route template and status.",
            ["method", "route", "status"],
            registry=self.registry,
        )
        self.http_duration = Histogram(
            "tidings_http_request_duration_seconds",
            "Time to answer an HTTP request.",
            ["route"],
            registry=self.registry,
        )

    def render(self) -> bytes:
        return generate_latest(self.registry)
