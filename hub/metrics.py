"""The hub's Prometheus metrics (SPEC §6), one `HubMetrics` (and registry) per app.

Each app owns its own `CollectorRegistry` instead of using prometheus_client's global
one, so that two apps in one process (tests, or two replicas in a benchmark) never share
or double-register series. Labels are deliberately coarse: the route *template* (never
the path with names in it), the method and the status code. No label ever carries a
token, a cluster name or a service name, so the series count stays bounded however large
the fleet grows.
"""

from __future__ import annotations

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.exposition import generate_latest

REQUEST_DURATION_METRIC = "mcsync_hub_request_duration_seconds"
ACTIVE_WATCHES_METRIC = "mcsync_hub_active_watches"
WATCH_EVENTS_METRIC = "mcsync_hub_watch_events"
DATABASE_ERRORS_METRIC = "mcsync_hub_database_errors"
EXPORT_WRITES_METRIC = "mcsync_hub_export_writes"

# Requests are mostly a few indexed statements; the tail buckets catch lock waits.
REQUEST_BUCKETS_SECONDS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)


class HubMetrics:
    """The collectors the API updates, and the registry `/metrics` renders."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.request_duration = Histogram(
            REQUEST_DURATION_METRIC,
            "Time to answer an API request, by route template, method and status code "
            "(a watch counts until its stream ends).",
            ["method", "route", "code"],
            buckets=REQUEST_BUCKETS_SECONDS,
            registry=self.registry,
        )
        self.active_watches = Gauge(
            ACTIVE_WATCHES_METRIC,
            "Watch streams currently open on this hub replica.",
            registry=self.registry,
        )
        self.watch_events = Counter(
            WATCH_EVENTS_METRIC,
            "Events sent on watch streams, by event type.",
            ["type"],
            registry=self.registry,
        )
        self.database_errors = Counter(
            DATABASE_ERRORS_METRIC,
            "Requests answered 503 because the database was unreachable.",
            registry=self.registry,
        )
        self.export_writes = Counter(
            EXPORT_WRITES_METRIC,
            "Export writes accepted, by outcome (created, replaced, unchanged, withdrawn, "
            "annotated).",
            ["outcome"],
            registry=self.registry,
        )

    def render(self) -> tuple[bytes, str]:
        """The exposition text and its content type."""
        return generate_latest(self.registry), CONTENT_TYPE_LATEST
