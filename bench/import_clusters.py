"""What the agent-import benchmarks share: source EndpointSlices, a stopwatch on the
mirrored slices an agent writes, and the agents' import counters.

* `source_slice` is an EndpointSlice as kube-controller-manager's EndpointSlice controller
  writes it for a Service (the benchmark plays that controller, as `tests/e2e/conformance`
  does), `moved_address` the pod IP a change moves its first endpoint to.
* `ImportStopwatch` wraps each emulated cluster's store `commit` (as
  `bench.fleet.ConditionStopwatch` does for conditions), so a write is timed where the
  API server stores it, independent of the agent's clock: per (cluster, address) the first
  moment a managed EndpointSlice carrying that address was stored, and per cluster the
  import objects mcsync manages there now (ServiceImports, derived Services, slices)
  and when that count last grew.
* `import_writes` sums `mcsync_agent_import_writes_total` over agents; `lag_histogram`
  merges their `mcsync_agent_import_lag_milliseconds` buckets for one kind.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable, Sequence
from typing import Any

from bench.fleet import Agent
from sandbox.emulator import EmulatorState
from shared.constants import (
    LABEL_ENDPOINTSLICE_MANAGED_BY,
    LABEL_MANAGED_BY,
    LABEL_SERVICE_NAME,
    MANAGED_BY_MCSYNC,
)

IMPORT_KINDS = ("serviceimports", "services", "endpointslices")
K8S_ENDPOINTSLICE_MANAGER = "endpointslice-controller.k8s.io"
WRITES_METRIC = "mcsync_agent_import_writes_total"
LAG_METRIC = "mcsync_agent_import_lag_milliseconds"


def source_slice(
    service: dict[str, Any], *, addresses: Sequence[str], port: int = 8080
) -> dict[str, Any]:
    """The EndpointSlice the controller writes for `service` (as stored): one ready
    endpoint per address, owned by the Service."""
    meta = service["metadata"]
    name = meta["name"]
    return {
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": {
            "name": f"{name}-abcde",
            "namespace": meta["namespace"],
            "labels": {
                LABEL_SERVICE_NAME: name,
                LABEL_ENDPOINTSLICE_MANAGED_BY: K8S_ENDPOINTSLICE_MANAGER,
            },
            "ownerReferences": [
                {
                    "apiVersion": "v1",
                    "kind": "Service",
                    "name": name,
                    "uid": meta["uid"],
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "addressType": "IPv4",
        "endpoints": [
            {
                "addresses": [a],
                "conditions": {"ready": True, "serving": True, "terminating": False},
                "nodeName": "node-1",
                "targetRef": {"kind": "Pod", "namespace": meta["namespace"], "name": f"pod-{i}"},
            }
            for i, a in enumerate(addresses)
        ],
        "ports": [{"name": "http", "protocol": "TCP", "port": port}],
    }


def moved_address(change: int) -> str:
    """A pod IP no seeded endpoint has, unique per `change` (up to 62,500 changes)."""
    return f"10.252.{(change // 250) % 250}.{change % 250 + 1}"


def _managed(obj: dict[str, Any]) -> bool:
    labels = (obj.get("metadata") or {}).get("labels") or {}
    return labels.get(LABEL_MANAGED_BY) == MANAGED_BY_MCSYNC


def _addresses(obj: dict[str, Any]) -> Iterable[str]:
    for endpoint in obj.get("endpoints") or []:
        yield from endpoint.get("addresses") or []


class ImportStopwatch:
    """When each watched address first appeared in a managed EndpointSlice, per cluster;
    and how many import objects mcsync manages in each cluster."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._watched: set[str] = set()
        self.landed: dict[tuple[str, str], float] = {}  # (cluster, address) → perf_counter
        self._managed: dict[str, dict[str, set[tuple[str, str]]]] = {}
        self.last_growth: dict[str, float] = {}  # cluster → perf_counter of the last add

    def attach(self, cluster: str, state: EmulatorState) -> None:
        store = state.store
        original = store.commit
        held = self._managed.setdefault(cluster, {kind: set() for kind in IMPORT_KINDS})

        def commit(event_type: str, key: Any, obj: Any, old: Any) -> Any:
            stored = original(event_type, key, obj, old)
            kind = str(key[0]).split(".", 1)[0]  # "endpointslices.discovery.k8s.io"
            if kind not in IMPORT_KINDS:
                return stored
            now = time.perf_counter()
            # ServiceImports are counted whoever manages them: the benchmark makes none.
            mine = kind == "serviceimports" or _managed(obj)
            with self._lock:
                if event_type == "DELETED" or not mine:
                    held[kind].discard((key[1], key[2]))
                elif (key[1], key[2]) not in held[kind]:
                    held[kind].add((key[1], key[2]))
                    self.last_growth[cluster] = now
                if kind == "endpointslices" and mine and self._watched:
                    for address in _addresses(obj):
                        if address in self._watched:
                            self.landed.setdefault((cluster, address), now)
            return stored

        store.commit = commit  # type: ignore[method-assign]

    def watch(self, address: str) -> None:
        """Start recording when `address` lands (call before making the change)."""
        with self._lock:
            self._watched.add(address)

    def landed_in(self, address: str, clusters: Sequence[str]) -> list[float] | None:
        """The landing moments of `address` in every one of `clusters`, or None while a
        cluster still lacks it."""
        with self._lock:
            found = [self.landed.get((c, address)) for c in clusters]
        if any(t is None for t in found):
            return None
        return [t for t in found if t is not None]

    def held(self, cluster: str) -> dict[str, int]:
        """{kind: managed objects in `cluster` now}."""
        with self._lock:
            return {kind: len(keys) for kind, keys in self._managed[cluster].items()}


def import_writes(agents: Sequence[Agent]) -> dict[str, float]:
    """{"Kind operation": writes} summed over `agents`."""
    total: dict[str, float] = {}
    for agent in agents:
        for name, labels, value in agent.samples():
            if name == WRITES_METRIC:
                label = f"{labels.get('kind')} {labels.get('operation')}"
                total[label] = total.get(label, 0.0) + value
    return total


def difference(after: dict[str, float], before: dict[str, float]) -> dict[str, float]:
    """`after - before` per label, the zeros left out."""
    return {k: v - before.get(k, 0.0) for k, v in after.items() if v - before.get(k, 0.0)}


def lag_histogram(agents: Sequence[Agent], kind: str) -> dict[float, float]:
    """The import-lag histogram of `kind` over `agents`: {upper bound ms: cumulative count}."""
    buckets: dict[float, float] = {}
    for agent in agents:
        for name, labels, value in agent.samples():
            if name == f"{LAG_METRIC}_bucket" and labels.get("kind") == kind:
                bound = float(labels["le"])
                buckets[bound] = buckets.get(bound, 0.0) + value
    return dict(sorted(buckets.items()))
