"""Prometheus metrics (SPEC OBS-2), one registry per process, built by the composition root."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest


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

        self.jobs_finished = Counter(
            "tidings_jobs_finished",
            "Job attempts finished, by kind and outcome (done, retry, dead, refused).",
            ["kind", "outcome"],
            registry=self.registry,
        )
        self.queue_depth = Gauge(
            "tidings_queue_jobs",
            "Jobs in the queue by kind and status (pending, running, dead).",
            ["kind", "status"],
            registry=self.registry,
        )
        self.queue_oldest_age = Gauge(
            "tidings_queue_oldest_job_age_seconds",
            "Age of the oldest job by kind and status, measured from its due time.",
            ["kind", "status"],
            registry=self.registry,
        )

        self.inbound_events = Counter(
            "tidings_inbound_events",
            "Events heard back from providers and mailboxes, by source, kind (delivered, "
            "soft_bounce, hard_bounce, complaint, unsubscribe, other, unparsed) and outcome "
            "(applied, unmatched, ignored, duplicate, unparsed).",
            ["source", "kind", "outcome"],
            registry=self.registry,
        )

        self.engagement_hits = Counter(
            "tidings_engagement_hits",
            "Opens and clicks taken in, by kind (open, click) and verdict (human, machine, "
            "ignored: a source far over its rate, answered but not recorded).",
            ["kind", "verdict"],
            registry=self.registry,
        )
        self.engagement_hits_dropped = Counter(
            "tidings_engagement_hits_dropped",
            "Opens and clicks answered but not recorded: the database failed or the buffer "
            "was full.",
            registry=self.registry,
        )

    def record_inbound_event(self, source: str, kind: str, outcome: str) -> None:
        self.inbound_events.labels(source, kind, outcome).inc()

    def record_job_outcome(self, kind: str, outcome: str) -> None:
        self.jobs_finished.labels(kind, outcome).inc()

    def set_queue_depth(self, rows: list[tuple[str, str, int, float]]) -> None:
        self.queue_depth.clear()
        self.queue_oldest_age.clear()
        for kind, status, count, age in rows:
            self.queue_depth.labels(kind, status).set(count)
            self.queue_oldest_age.labels(kind, status).set(age)

    def render(self) -> bytes:
        return generate_latest(self.registry)
