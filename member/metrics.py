"""The agent's Prometheus metrics (docs/reference.md#observability), on a registry of its own.

Every metric lives on the `CollectorRegistry` an `AgentMetrics` is built with — never on
prometheus_client's global default — so tests can run several agents in one process and
read each one's numbers apart. The work queue's metrics (`WorkQueueMetrics`) join the same
registry, and `/metrics` serves it.

Names: the export-duration histogram comes from `shared.metrics` (the contract); the rest
are the agent's own, prefixed `mcsync_agent_`. Hub request metrics are labelled by route
*template* (`/api/v1/clusters/{cluster}/serviceexports/{namespace}/{name}`), never by the
concrete path, so the label set stays small; no token or object name ever becomes a label.

Every labelled series whose label values are a fixed set (slice writes by operation, slice
export errors by reason) is created at 0 when the registry is built
(docs/reference.md#observability), so the first error is an increase that `rate()` and `increase()`
can see.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    ProcessCollector,
    disable_created_metrics,
)
from prometheus_client.core import CounterMetricFamily
from prometheus_client.registry import Collector

from shared.metrics import (
    EXPORT_DURATION_BUCKETS_MS,
    EXPORT_DURATION_LABEL,
    EXPORT_DURATION_METRIC,
    REQUEST_DURATION_BUCKETS_SECONDS,
)

# No `*_created` series: a timestamp per counter and histogram, doubling what every scrape
# carries and stores, for a fact (the process start) `process_start_time_seconds` has.
disable_created_metrics()

__all__ = [
    "SLICE_ERROR_REASONS",
    "SLICE_OPERATIONS",
    "AgentMetrics",
    "HubRequestMetrics",
]

SLICE_OPERATIONS = ("put", "delete")
"""`operation` of `mcsync_agent_endpointslice_writes_total`."""
SLICE_ERROR_REASONS = ("conflict", "rejected", "invalid", "unavailable")
"""`reason` of `mcsync_agent_endpointslice_export_errors_total`: conflict — the hub does not
export the slice's Service (yet), retried; rejected — the hub refused the slice (4xx);
invalid — the slice cannot be expressed on the wire; unavailable — the hub did not answer,
retried."""

_SECONDS_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


class HubRequestMetrics:
    """Duration and errors of requests to the hub; what `HubClient` needs, nothing more."""

    def __init__(self, *, registry: CollectorRegistry) -> None:
        self.duration = Histogram(
            "mcsync_agent_hub_request_duration_seconds",
            "Duration of requests to the hub, by method, route template and status code.",
            ["method", "route", "code"],
            buckets=REQUEST_DURATION_BUCKETS_SECONDS,
            registry=registry,
        )
        self.errors = Counter(
            "mcsync_agent_hub_request_errors_total",
            "Requests to the hub that failed (code: HTTP status, or 'connection').",
            ["method", "route", "code"],
            registry=registry,
        )


class _RelistCollector(Collector):
    """Reports each informer's `relists` attribute as a counter (read at scrape time)."""

    def __init__(self, informers: Callable[[], Iterable[tuple[str, int]]]) -> None:
        self._informers = informers

    def collect(self) -> Iterator[CounterMetricFamily]:
        family = CounterMetricFamily(
            "mcsync_agent_informer_relists",
            "Relists of an informer after its first list (each follows a 410 Gone or a "
            "failed resume).",
            labels=["informer"],
        )
        for name, relists in self._informers():
            family.add_metric([name], relists)
        yield family


class AgentMetrics:
    """All of the agent's own metrics on one registry."""

    def __init__(self, *, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        ProcessCollector(registry=self.registry)  # process_cpu_seconds_total, memory, fds
        self.export_duration = Histogram(
            EXPORT_DURATION_METRIC,
            "Time from when the agent marked an export valid for the current Service spec to "
            "when the hub's verdict for it was reported back (docs/reference.md#export-path).",
            [EXPORT_DURATION_LABEL],
            buckets=EXPORT_DURATION_BUCKETS_MS,
            registry=self.registry,
        )
        self.reconcile_duration = Histogram(
            "mcsync_agent_reconcile_duration_seconds",
            "Duration of one reconcile of a ServiceExport key.",
            ["controller"],
            buckets=_SECONDS_BUCKETS,
            registry=self.registry,
        )
        self.reconciles = Counter(
            "mcsync_agent_reconciles_total",
            "Reconciles by controller and outcome (exported, up_to_date, invalid, withdrawn, "
            "finalized, rejected, error, …: a fixed set).",
            ["controller", "outcome"],
            registry=self.registry,
        )
        self.reconcile_errors = Counter(
            "mcsync_agent_reconcile_errors_total",
            "Reconciles that raised (the key is retried with backoff).",
            ["controller"],
            registry=self.registry,
        )
        self.hub = HubRequestMetrics(registry=self.registry)
        self.leader = Gauge(
            "mcsync_agent_leader",
            "1 while this replica leads (or leader election is off), else 0.",
            registry=self.registry,
        )
        self.version_supported = Gauge(
            "mcsync_agent_version_supported",
            "0 when the hub's minAgentVersion is newer than this agent (it stops exporting), "
            "else 1.",
            registry=self.registry,
        )
        self.version_supported.set(1)
        self.hub_reachable = Gauge(
            "mcsync_agent_hub_reachable",
            "1 when the last heartbeat reached the hub, else 0.",
            registry=self.registry,
        )
        # Which cluster this agent serves, as a label of one constant series: dashboards
        # join every agent series on (job, instance) with it, so a cluster picker filters
        # them all without repeating the cluster id as a label on every series.
        self.info = Gauge(
            "mcsync_agent_info",
            "1, labelled with the member cluster this agent serves and its version.",
            ["cluster_id", "version"],
            registry=self.registry,
        )
        self.heartbeats = Counter(
            "mcsync_agent_heartbeats_total",
            "Heartbeats sent to the hub, by result (ok, error).",
            ["result"],
            registry=self.registry,
        )
        self.heartbeat_interval = Gauge(
            "mcsync_agent_heartbeat_interval_seconds",
            "The heartbeat interval in use: --heartbeat-interval, or a third of the hub's "
            "cluster TTL when shorter (docs/reference.md#failover).",
            registry=self.registry,
        )

        # docs/reference.md#failover's mass-withdrawal guard (`member.export.withdrawalguard`).
        self.withdrawals_held = Counter(
            "mcsync_agent_withdrawals_held_total",
            "Repairs that would have withdrawn more than half of this cluster's exports on the "
            "hub (at least 10) and withdrew none of them (docs/reference.md#failover).",
            registry=self.registry,
        )
        self.withdrawal_held_exports = Gauge(
            "mcsync_agent_withdrawal_held_exports",
            "Exports on the hub that the held repair would withdraw; 0 when none is held.",
            registry=self.registry,
        )

        self.slices_exported = Gauge(
            "mcsync_agent_endpointslices_exported",
            "EndpointSlices of this cluster that the hub holds, as far as the agent knows "
            "(docs/reference.md#import-path).",
            registry=self.registry,
        )
        self.slice_writes = Counter(
            "mcsync_agent_endpointslice_writes_total",
            "EndpointSlice writes to the hub that it accepted, by operation (put, delete).",
            ["operation"],
            registry=self.registry,
        )
        self.slice_export_errors = Counter(
            "mcsync_agent_endpointslice_export_errors_total",
            "EndpointSlices the agent could not send or withdraw, by reason (conflict, "
            "rejected, invalid, unavailable).",
            ["reason"],
            registry=self.registry,
        )
        for operation in SLICE_OPERATIONS:
            self.slice_writes.labels(operation)
        for reason in SLICE_ERROR_REASONS:
            self.slice_export_errors.labels(reason)

    def watch_informers(self, informers: Callable[[], Iterable[tuple[str, int]]]) -> None:
        """Report relists of the informers `informers()` lists as (name, relists) pairs."""
        self.registry.register(_RelistCollector(informers))
