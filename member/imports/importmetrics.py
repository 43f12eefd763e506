"""The import side's metrics (docs/reference.md#observability, #import-path), on the agent's
registry, every series at 0.

* `mcsync_agent_import_writes_total{kind, operation}` — Kubernetes writes the import
  reconcilers made: kind ServiceImport / Service / EndpointSlice, operation create / update /
  status / delete. "One endpoint change costs at most one EndpointSlice write per importing
  cluster" is read off this counter.
* `mcsync_agent_serviceimports_imported`, `mcsync_agent_endpoints_imported` — what this
  cluster holds now (managed ServiceImports; endpoints over managed EndpointSlices), read
  from the informers' caches at scrape time.
* `mcsync_agent_serviceimports_unmanaged` — keys left alone because a ServiceImport of that
  name exists that mcsync does not manage (docs/reference.md#export-path).
* `mcsync_agent_import_lag_milliseconds{kind}` — from the hub's commit of a change (the
  feed event's `mcsync.io/changed-at`) to this cluster's objects written for it
  (docs/reference.md#observability), in the export-duration buckets. Observed once per change and
  kind: a repair of a user's edit, or a cold start's import from a list, is not a lag.
* `mcs_endpointslice_sync_latency_seconds{source_cluster}` — end to end, from the source
  agent's first sight of an EndpointSlice change (the slice export's
  `spec.sourceObservedTime`) to its mirrored slice written here (docs/reference.md#observability;
  the figure mcs-api#160 asks implementations to standardise). Observed once per source slice
  version written by a live change; a source cluster's series appears, at 0, when its slices are
  first mirrored here.

Reconcile duration, outcomes and errors use the agent's common series, labelled by the
controllers named in `IMPORT_CONTROLLERS`, created here at 0.
"""

from __future__ import annotations

from collections.abc import Callable

from prometheus_client import Counter, Gauge, Histogram

from member.metrics import AgentMetrics
from member.reconcilers.instrumented import declare_series
from shared.metrics import (
    EXPORT_DURATION_BUCKETS_MS,
    SYNC_LATENCY_BUCKETS_SECONDS,
    SYNC_LATENCY_LABEL,
    SYNC_LATENCY_METRIC,
)

__all__ = ["IMPORT_CONTROLLERS", "IMPORT_KINDS", "IMPORT_OPERATIONS", "ImportMetrics"]

IMPORT_KINDS = ("ServiceImport", "Service", "EndpointSlice")
IMPORT_OPERATIONS = ("create", "update", "status", "delete")
IMPORT_CONTROLLERS = ("serviceimport", "derivedservice", "mirroredslices")


class ImportMetrics:
    def __init__(self, metrics: AgentMetrics) -> None:
        registry = metrics.registry
        self.writes = Counter(
            "mcsync_agent_import_writes_total",
            "Kubernetes writes of import objects, by kind and operation "
            "(docs/reference.md#import-path).",
            ["kind", "operation"],
            registry=registry,
        )
        for kind in IMPORT_KINDS:
            for operation in IMPORT_OPERATIONS:
                self.writes.labels(kind, operation)
        self.imported = Gauge(
            "mcsync_agent_serviceimports_imported",
            "ServiceImports mcsync manages in this cluster.",
            registry=registry,
        )
        self.endpoints = Gauge(
            "mcsync_agent_endpoints_imported",
            "Endpoints over the EndpointSlices mcsync manages in this cluster.",
            registry=registry,
        )
        self.unmanaged = Gauge(
            "mcsync_agent_serviceimports_unmanaged",
            "Imported keys left alone: a ServiceImport of that name exists that mcsync does "
            "not manage (a Warning Event says so on it).",
            registry=registry,
        )
        self.lag = Histogram(
            "mcsync_agent_import_lag_milliseconds",
            "From the hub's commit of a change to the import objects written for it in this "
            "cluster, by kind (docs/reference.md#observability).",
            ["kind"],
            buckets=EXPORT_DURATION_BUCKETS_MS,
            registry=registry,
        )
        for kind in IMPORT_KINDS:
            self.lag.labels(kind)
        self.sync_latency = Histogram(
            SYNC_LATENCY_METRIC,
            "From the source agent's observation of an EndpointSlice change to the mirrored "
            "slice written in this cluster, by source cluster (docs/reference.md#observability).",
            [SYNC_LATENCY_LABEL],
            buckets=SYNC_LATENCY_BUCKETS_SECONDS,
            registry=registry,
        )
        for controller in IMPORT_CONTROLLERS:
            declare_series(metrics, controller, ())

    def count_with(
        self, imported: Callable[[], float], endpoints: Callable[[], float]
    ) -> None:
        """Read the two holdings from the caches at scrape time."""
        self.imported.set_function(imported)
        self.endpoints.set_function(endpoints)
