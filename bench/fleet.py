"""Member clusters for the agent benchmarks: emulated API servers, agent processes, stopwatches.

* Emulated clusters (`sandbox.emulator`) run as threads of the benchmark process: the
  benchmark seeds and creates objects through their in-process state (no HTTP on the
  benchmark's side), and `ConditionStopwatch` wraps each emulator store's `commit` so the
  moment a ServiceExport's status first carries a `Conflict` condition is taken where the
  API server stores it — an outside stopwatch that does not depend on the agent's clock.
* Each agent is a real `python -m member` process (the honest choice: its RSS, CPU and
  threads are its own), with its metrics port read for readiness, queue depth and the
  export-duration histogram.
"""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from prometheus_client.parser import text_string_to_metric_families

from bench.support import REPO_ROOT, child_env, free_port, stop_process
from sandbox.emulator import EmulatorServer, EmulatorState
from sandbox.emulator.kubeconfig import write_kubeconfig
from shared.constants import ANNOTATION_EXPORTED_SINCE, FINALIZER_SERVICEEXPORT_CLEANUP
from shared.metrics import EXPORT_DURATION_METRIC
from shared.timefmt import parse_rfc3339

EXPORTS = "serviceexports"


def service_body(name: str, namespace: str, *, port: int = 80) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name, "namespace": namespace, "labels": {"app": name}},
        "spec": {
            "type": "ClusterIP",
            "ports": [{"name": "http", "protocol": "TCP", "port": port, "targetPort": 8080}],
        },
    }


def service_export_body(name: str, namespace: str) -> dict[str, Any]:
    return {
        "apiVersion": "multicluster.x-k8s.io/v1alpha1",
        "kind": "ServiceExport",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {},
    }


def has_conflict_condition(obj: dict[str, Any]) -> bool:
    conditions = (obj.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Conflict" for c in conditions)


def _stamp_epoch(obj: dict[str, Any]) -> float | None:
    """The exportedSince annotation as epoch seconds: when the agent's reconcile stamped it."""
    text = ((obj.get("metadata") or {}).get("annotations") or {}).get(ANNOTATION_EXPORTED_SINCE)
    if not text:
        return None
    try:
        return parse_rfc3339(str(text)).timestamp()
    except ValueError:
        return None


def _has_finalizer(obj: dict[str, Any]) -> bool:
    return FINALIZER_SERVICEEXPORT_CLEANUP in ((obj.get("metadata") or {}).get("finalizers") or [])


class ConditionStopwatch:
    """When each ServiceExport was created, and when its Conflict condition was first stored.

    Also where the time between went, from the same store commits (wall clock, so that the
    agent's exportedSince stamp can be placed on the same line): `phases()`.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.created: dict[tuple[str, str, str], float] = {}
        self.written: dict[tuple[str, str, str], float] = {}
        # Wall-clock moments per export: created, stamped by the agent (its reconcile
        # started), metadata patch stored, Conflict condition stored.
        self._created_wall: dict[tuple[str, str, str], float] = {}
        self._stamped_wall: dict[tuple[str, str, str], float] = {}
        self._patched_wall: dict[tuple[str, str, str], float] = {}
        self._written_wall: dict[tuple[str, str, str], float] = {}

    def attach(self, cluster: str, state: EmulatorState) -> None:
        store = state.store
        original = store.commit

        def commit(event_type: str, key: Any, obj: Any, old: Any) -> Any:
            stored = original(event_type, key, obj, old)
            if EXPORTS in key[0] and event_type == "MODIFIED":
                now, wall = time.perf_counter(), time.time()
                record = (cluster, key[1], key[2])
                conflict = has_conflict_condition(obj)
                with self._lock:
                    if record in self.created and record not in self._patched_wall:
                        if _has_finalizer(obj):
                            self._patched_wall[record] = wall
                            stamp = _stamp_epoch(obj)
                            if stamp is not None:
                                self._stamped_wall[record] = stamp
                    if conflict and record in self.created and record not in self.written:
                        self.written[record] = now
                        self._written_wall[record] = wall
            return stored

        store.commit = commit  # type: ignore[method-assign]

    def mark_created(self, cluster: str, namespace: str, name: str) -> None:
        with self._lock:
            self.created[cluster, namespace, name] = time.perf_counter()
            self._created_wall[cluster, namespace, name] = time.time()

    def durations(self) -> list[float]:
        with self._lock:
            return [self.written[k] - t for k, t in self.created.items() if k in self.written]

    def phases(self) -> dict[str, list[float]]:
        """Seconds spent in each step, per export that completed all of them:

        * `created_to_reconcile` — create → the agent's exportedSince stamp (watch event,
          queue, start of the reconcile; the stamp has millisecond precision);
        * `reconcile_to_patched` — stamp → finalizer/exportedSince patch stored;
        * `patched_to_conflict` — that patch → Conflict condition stored (the hub PUT and
          the status write, or waiting for a later reconcile when the first had no verdict).
        """
        out: dict[str, list[float]] = {
            "created_to_reconcile": [],
            "reconcile_to_patched": [],
            "patched_to_conflict": [],
        }
        with self._lock:
            for record, created in self._created_wall.items():
                stamped = self._stamped_wall.get(record)
                patched = self._patched_wall.get(record)
                written = self._written_wall.get(record)
                if stamped is None or patched is None or written is None:
                    continue
                out["created_to_reconcile"].append(max(0.0, stamped - created))
                out["reconcile_to_patched"].append(max(0.0, patched - stamped))
                out["patched_to_conflict"].append(max(0.0, written - patched))
        return out

    def pending(self) -> int:
        with self._lock:
            return len(self.created) - len(self.written)


@dataclass
class Cluster:
    """One emulated member cluster and the files its agent needs."""

    name: str
    directory: Path
    history: int = 50_000
    server: EmulatorServer | None = None
    kubeconfig: Path | None = None
    token_file: Path | None = None

    @property
    def state(self) -> EmulatorState:
        assert self.server is not None
        return self.server.state

    def start(self, *, token: str) -> Cluster:
        self.directory.mkdir(parents=True, exist_ok=True)
        self.server = EmulatorServer(EmulatorState(history=self.history)).start()
        self.kubeconfig = write_kubeconfig(
            self.directory / "kubeconfig", name=self.name, url=self.server.url
        )
        self.token_file = self.directory / "token"
        self.token_file.write_text(token)
        return self

    def stop(self) -> None:
        if self.server is not None:
            self.server.stop()


@dataclass
class Agent:
    """A `python -m member` process for one cluster."""

    cluster: Cluster
    hub_url: str
    workers: int = 4
    metrics_port: int = field(default_factory=free_port)
    process: subprocess.Popen[bytes] | None = None
    restarts: int = 0

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    def start(self) -> Agent:
        c = self.cluster
        args = [
            "--hub-url",
            self.hub_url,
            "--cluster-id",
            c.name,
            "--kubeconfig",
            str(c.kubeconfig),
            "--token-file",
            str(c.token_file),
            "--metrics-host",
            "127.0.0.1",
            "--metrics-port",
            str(self.metrics_port),
            "--heartbeat-interval",
            "10",
            "--workers",
            str(self.workers),
            "--log-level",
            "WARNING",
        ]
        with (c.directory / "agent.log").open("ab") as log:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "member", *args],
                cwd=REPO_ROOT,
                env=child_env(),
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        return self

    def stop(self) -> None:
        if self.process is not None:
            stop_process(self.process)

    def _get(self, path: str) -> httpx.Response:
        return httpx.get(f"http://127.0.0.1:{self.metrics_port}{path}", timeout=5)

    def ready(self) -> bool:
        assert self.process is not None
        if self.process.poll() is not None:
            if self.process.returncode == 2 and self.restarts < 3:
                # Exit 2 at start is almost always the metrics port taken meanwhile by
                # another process on this shared host (free_port cannot reserve it).
                self.restarts += 1
                self.metrics_port = free_port()
                self.start()
                return False
            raise RuntimeError(f"agent of {self.cluster.name} exited ({self.process.returncode})")
        try:
            return self._get("/readyz").status_code == 200
        except httpx.HTTPError:
            return False

    def samples(self) -> list[tuple[str, dict[str, str], float]]:
        text = self._get("/metrics").text
        return [
            (s.name, dict(s.labels), float(s.value))
            for family in text_string_to_metric_families(text)
            for s in family.samples
        ]

    def metric(self, metric: str, /, **labels: str) -> float | None:
        for sample_name, sample_labels, value in self.samples():
            if sample_name == metric and all(sample_labels.get(k) == v for k, v in labels.items()):
                return value
        return None

    def settled(self, *, reconciles: float) -> bool:
        """Reconciled at least `reconciles` keys since start, and nothing queued."""
        done = self.metric(
            "mcsync_agent_reconcile_duration_seconds_count", controller="serviceexport"
        )
        depth = self.metric("workqueue_depth", name="serviceexport")
        return (done or 0) >= reconciles and depth == 0


def fleet_work(clusters: list[Cluster], agents: list[Agent]) -> dict[str, Any]:
    """What the fleet did, summed: kube API requests by "verb resource" (from the emulators),
    agent reconciles by outcome, hub requests by "method route code" and the one-export
    requests' latency as the agents measured it (bucket bounds), queue adds and retries."""
    kube: dict[str, float] = {}
    for cluster in clusters:
        for (verb, resource), n in cluster.state.request_counts().items():
            if verb in ("watch", "list"):
                continue
            name = f"{verb} {resource}"
            kube[name] = kube.get(name, 0) + n
    reconciles: dict[str, float] = {}
    hub: dict[str, float] = {}
    queue: dict[str, float] = {}
    # Per hub method of the one-export route: latency buckets {le: count} and the sum.
    latency: dict[str, dict[float, float]] = {}
    latency_sum: dict[str, float] = {}
    for agent in agents:
        for name, labels, value in agent.samples():
            one_export = labels.get("route", "").endswith("{name}")
            if one_export and name == "mcsync_agent_hub_request_duration_seconds_bucket":
                by_le = latency.setdefault(labels.get("method", "?"), {})
                bound = float(labels["le"]) * 1000.0
                by_le[bound] = by_le.get(bound, 0.0) + value
            elif one_export and name == "mcsync_agent_hub_request_duration_seconds_sum":
                method = labels.get("method", "?")
                latency_sum[method] = latency_sum.get(method, 0.0) + value * 1000.0
            if name == "mcsync_agent_reconciles_total":
                outcome = labels.get("outcome", "?")
                reconciles[outcome] = reconciles.get(outcome, 0) + value
            elif name == "mcsync_agent_hub_request_duration_seconds_count":
                route = labels.get("route", "?").rpartition("{cluster}/")[2]
                label = f"{labels.get('method')} {route} {labels.get('code')}"
                hub[label] = hub.get(label, 0) + value
            elif name in ("workqueue_retries_total", "workqueue_adds_total"):
                queue[name] = queue.get(name, 0) + value
    hub_latency: dict[str, dict[str, float | None]] = {}
    for method, by_le in latency.items():
        buckets = dict(sorted(by_le.items()))
        count = buckets.get(float("inf"), 0.0)
        hub_latency[method] = {
            "mean_ms": round(latency_sum.get(method, 0.0) / count, 1) if count else None,
            "p50_ms_upper_bound": histogram_quantile(buckets, 0.50),
            "p99_ms_upper_bound": histogram_quantile(buckets, 0.99),
        }
    return {
        "kube_requests": kube,
        "reconciles": reconciles,
        "hub_requests": hub,
        "hub_latency_as_agents_saw_it": hub_latency,
        "queue": queue,
    }


def wait_until(condition: Any, *, what: str, timeout: float, interval: float = 0.2) -> float:
    """Poll `condition` until truthy; answers the seconds it took. TimeoutError names `what`."""
    started = time.perf_counter()
    deadline = started + timeout
    while time.perf_counter() < deadline:
        try:
            if condition():
                return time.perf_counter() - started
        except (httpx.HTTPError, OSError):
            pass
        time.sleep(interval)
    raise TimeoutError(f"timed out after {timeout:.0f}s waiting for {what}")


def merged_histogram(agents: list[Agent]) -> dict[float, float]:
    """The export-duration histogram of all agents summed: {upper bound ms: cumulative count}."""
    buckets: dict[float, float] = {}
    for agent in agents:
        for name, labels, value in agent.samples():
            if name == f"{EXPORT_DURATION_METRIC}_bucket":
                bound = float(labels["le"])
                buckets[bound] = buckets.get(bound, 0.0) + value
    return dict(sorted(buckets.items()))


def histogram_quantile(buckets: dict[float, float], q: float) -> float | None:
    """The upper bound of the bucket holding quantile `q` (no interpolation: honest)."""
    total = buckets.get(float("inf"), 0.0)
    if not total:
        return None
    for bound, count in buckets.items():
        if count >= q * total:
            return bound
    return None
