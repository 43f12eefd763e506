"""Cluster selection end to end over loopback (docs/failover-order.md): a real hub process
(every scenario on SQLite and on PostgreSQL), exporting clusters `eu1` (region eu) and
`us1` (region us) with real agent processes that send their EndpointSlices, and an
importing cluster `eu9` (region eu) whose import side is the agent's own `Importer` (real
informers over HTTP against its emulator, real work queues and timers, real Events),
following the hub's import feed.

The selectors and policy are the ServiceExports' annotations, sent by the exporting agents
and decided by the hub like any property of the Service. The clusters' properties come
through the `FleetProperties` protocol (`StaticProperties`), so each scenario controls
them directly; `test_cluster_selection_fleet` takes them from ClusterProperty objects
through the hub instead. Everything else — the
feed, the counting of ready endpoints, the tiers, the damping, the slices, annotations and
Events — is the product's.

Deadlines are generous polls; the only waits are the policy's own `failbackDelaySeconds`,
and each step of a readiness sequence waits until the importer's view of the hub has it, so
a loaded machine cannot coalesce a dip away.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from member.hubclient import HubClient, HubClientConfig
from member.imports.importer import Importer
from member.imports.importspec import derived_service_name, mirrored_slice_name
from member.imports.selection import StaticProperties, endpoint_counts
from member.kube.events import EventRecorder
from member.metrics import AgentMetrics
from member.workqueue import WorkQueueMetrics
from tests.kube.fixtures import KubeCluster
from tests.member.agent_support import (
    AgentFactory,
    HubProcess,
    forget_logs,
    service_body,
    service_export_body,
    wait_for,
)

pytestmark = pytest.mark.e2e

NS = "shop"
KEY = f"{NS}/web"
REGIONS = {"eu1": "eu", "us1": "us"}
SAME_REGION = {"propertySelector": {"matchProperties": {"region": "@SameAsImporter@"}}}
ANY_REGION = {"propertySelector": {"matchExpressions": [{"key": "region", "operator": "Exists"}]}}
US_ONLY = {"propertySelector": {"matchExpressions": [
    {"key": "region", "operator": "In", "values": ["us"]}]}}
TTL_SECONDS = 5


def source_slice(cluster: str, ready: int, total: int) -> dict[str, Any]:
    """`cluster`'s EndpointSlice of web: `total` endpoints, the first `ready` of them ready."""
    octet = 10 if cluster == "eu1" else 20
    return {
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": {
            "name": "web-abc",
            "namespace": NS,
            "labels": {
                "kubernetes.io/service-name": "web",
                "endpointslice.kubernetes.io/managed-by": "endpointslice-controller.k8s.io",
            },
        },
        "addressType": "IPv4",
        "ports": [{"name": "http", "protocol": "TCP", "port": 8080}],
        "endpoints": [
            {"addresses": [f"10.{octet}.0.{i + 1}"],
             "conditions": {"ready": i < ready, "serving": i < ready}}
            for i in range(total)
        ],
    }


@dataclass
class Fleet:
    hub: HubProcess
    clusters: dict[str, KubeCluster]
    importer: Importer
    properties: StaticProperties
    agents: dict[str, Any]
    metrics: AgentMetrics

    @property
    def west(self) -> KubeCluster:
        return self.clusters["eu9"]

    def set_ready(self, cluster: str, ready: int, total: int) -> None:
        state = self.clusters[cluster].state
        current = state.get("endpointslices", NS, "web-abc")
        assert current is not None
        body = source_slice(cluster, ready, total)
        body["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
        state.update("endpointslices", NS, body)

    def readiness(self) -> dict[str, bool]:
        """cluster → whether its mirrored slice in eu9 has any endpoint ready."""
        found = {}
        for cluster in REGIONS:
            obj = self.west.state.get(
                "endpointslices", NS, mirrored_slice_name("web", cluster, "web-abc"))
            if obj is not None:
                found[cluster] = any(
                    e.get("conditions", {}).get("ready", True) for e in obj["endpoints"])
        return found

    def annotations(self) -> dict[str, str]:
        si = self.west.state.get("serviceimports", NS, "web") or {}
        return {k: v for k, v in (si.get("metadata", {}).get("annotations") or {}).items()
                if k.startswith("mcsync.io/")}

    def events(self, reason: str) -> list[str]:
        return [e["message"] for e in self.west.state.list("events", NS)
                if e.get("reason") == reason]

    def switches(self, direction: str) -> float:
        value = self.metrics.registry.get_sample_value(
            "mcsync_agent_cluster_selection_switches_total", {"direction": direction})
        return value or 0.0


def _register(hub: HubProcess, name: str) -> str:
    return hub.register(name)


@pytest.fixture
def selection_hub(database_url: str, tmp_path: Path) -> Iterator[HubProcess]:
    directory = tmp_path / "hub"
    directory.mkdir()
    hub = HubProcess(directory=directory, database=database_url,
                     extra_args=["--cluster-ttl", str(TTL_SECONDS)])
    hub.start()
    try:
        yield hub
    finally:
        hub.stop()
        forget_logs()


FleetFactory = Callable[..., Fleet]


@pytest.fixture
def fleet_factory(
    selection_hub: HubProcess, kube_cluster_factory: Any, agent_factory: AgentFactory,
) -> Iterator[FleetFactory]:
    stop = threading.Event()
    built: list[Importer] = []

    def factory(selectors: list[dict[str, Any]], *, eu1: tuple[int, int] = (1, 1),
                us1: tuple[int, int] = (1, 1), **policy: Any) -> Fleet:
        clusters: dict[str, KubeCluster] = {}
        agents = {}
        annotations = {"mcsync.io/cluster-selectors": json.dumps(selectors)}
        if policy:
            annotations["mcsync.io/cluster-selection"] = json.dumps(policy)
        for name, (ready, total) in (("eu1", eu1), ("us1", us1)):
            kube = clusters[name] = kube_cluster_factory(name)
            kube.state.create("services", NS, service_body("web", NS))
            kube.state.create("endpointslices", NS, source_slice(name, ready, total))
            export = service_export_body("web", NS)
            export["metadata"]["annotations"] = annotations
            kube.state.create("serviceexports", NS, export)
            agents[name] = agent_factory(
                name, kubeconfig=kube.kubeconfig, hub=selection_hub, cluster_id=name,
                token=_register(selection_hub, name))
        west = clusters["eu9"] = kube_cluster_factory("eu9")
        west.state.create_namespace(NS)
        properties = StaticProperties(
            {"region": "eu"}, {c: {"region": r} for c, r in REGIONS.items()})
        api = west.api_client()
        metrics = AgentMetrics(registry=CollectorRegistry())
        hub = HubClient(
            HubClientConfig(base_url=selection_hub.url, cluster_id="eu9",
                            token=_register(selection_hub, "eu9")),
            metrics=metrics.hub,
        )
        importer = Importer(
            api=api, hub=hub, namespaces=[None], deny_namespaces=(), watch_timeout=30,
            workers=2, metrics=metrics, queue_metrics=WorkQueueMetrics(registry=metrics.registry),
            events=EventRecorder(api=api, host="eu9"), may_write=lambda: True,
            properties=properties,
        )
        for informer in importer.informers():
            informer.start(stop)
        importer.start_workers(stop)
        built.append(importer)
        return Fleet(selection_hub, clusters, importer, properties, agents, metrics)

    try:
        yield factory
    finally:
        stop.set()
        for importer in built:
            importer.shutdown()


def wait_readiness(fleet: Fleet, expected: dict[str, bool], what: str) -> None:
    wait_for(lambda: fleet.readiness() == expected, what=f"{what}: {expected}", timeout=60)


def ready_in_view(fleet: Fleet, cluster: str) -> int:
    """Ready endpoints of `cluster`'s source slices as the importer's feed holds them now."""
    return sum(endpoint_counts(s.endpoints).ready
               for s in fleet.importer.view.slices(KEY) if s.cluster == cluster)


def set_and_see(fleet: Fleet, cluster: str, ready: int, total: int) -> None:
    """Set `cluster`'s readiness and wait until the importer's view of the hub has it."""
    fleet.set_ready(cluster, ready, total)
    wait_for(lambda: ready_in_view(fleet, cluster) == ready,
             what=f"{cluster} with {ready} ready in the importer's view", timeout=60)


def failback_waits(fleet: Fleet) -> bool:
    """Whether eu9's selection of web is waiting to fail back (it has seen a better tier
    qualify and counts its delay)."""
    selection = fleet.importer.selections.current(KEY)
    return bool(selection and selection.state and selection.state.qualified_since)


# --- every scenario: both databases --------------------------------------------------------------


def test_an_eu_importer_uses_eu_then_fails_over_to_us(fleet_factory: FleetFactory) -> None:
    fleet = fleet_factory([SAME_REGION, ANY_REGION])
    # (a) tier 1 is the importer's own region: only eu1's endpoints are ready in eu9.
    wait_readiness(fleet, {"eu1": True, "us1": False}, "tier 1 (eu1) active")
    wait_for(lambda: fleet.annotations() == {
        "mcsync.io/cluster-selector-results":
            '[{"clusters":["eu1"]},{"clusters":["eu1","us1"]}]',
        "mcsync.io/active-clusters": "eu1",
    }, what="the ServiceImport's selection annotations")
    assert fleet.west.state.get("services", NS, derived_service_name("web")) is not None
    assert fleet.events("ClusterSelectionFailover") == []

    # (b) eu1's last ready endpoint goes: tier 2 at once.
    fleet.set_ready("eu1", 0, 1)
    wait_readiness(fleet, {"eu1": False, "us1": True}, "failover to tier 2")
    wait_for(lambda: fleet.events("ClusterSelectionFailover") == [
        "cluster selection: tier 1 (eu1) → tier 2 (eu1,us1)"], what="the failover Event")
    wait_for(lambda: fleet.annotations().get("mcsync.io/active-clusters") == "eu1,us1",
             what="active clusters after failover")
    assert fleet.switches("failover") == 1


def test_a_stale_cluster_fails_over_the_same(fleet_factory: FleetFactory) -> None:
    fleet = fleet_factory([SAME_REGION, ANY_REGION])
    wait_readiness(fleet, {"eu1": True, "us1": False}, "tier 1 (eu1) active")
    # (d) eu1's agent stops: its heartbeats end, the hub marks it Stale after the TTL and
    # withdraws its endpoints, and eu9 fails over as for a down cluster.
    fleet.agents["eu1"].kill()
    wait_for(lambda: fleet.readiness().get("us1") is True and not fleet.readiness().get("eu1"),
             what="failover after eu1 went Stale", timeout=90)
    wait_for(lambda: len(fleet.events("ClusterSelectionFailover")) == 1,
             what="the failover Event")


def test_failback_waits_for_min_ready_percent_and_the_delay(
    fleet_factory: FleetFactory,
) -> None:
    # (c) eu1 has 10 endpoints; tier 1 needs half of them ready, and 5 s of it.
    fleet = fleet_factory([SAME_REGION, US_ONLY], eu1=(1, 10), us1=(2, 2),
                          minReadyPercent=50, failbackDelaySeconds=5)
    wait_readiness(fleet, {"eu1": False, "us1": True}, "1 of 10 ready: tier 2")
    # eu1 may export before us1 does: the importer then starts on the AllClusters fallback and
    # fails back to tier 2 once us1 appears. That switch is real; count from after it (its
    # Event is recorded after the slices are written: wait for it too).
    failbacks_before = fleet.switches("failback")
    wait_for(lambda: len(fleet.events("ClusterSelectionFailback")) == failbacks_before,
             what="the Event of each failback so far")
    settled = fleet.events("ClusterSelectionFailback")
    assert all(e.endswith("→ tier 2 (us1)") for e in settled), settled
    time.sleep(6)  # longer than the delay: 1 of 10 never qualifies
    assert fleet.readiness() == {"eu1": False, "us1": True}
    assert fleet.events("ClusterSelectionFailback") == settled

    set_and_see(fleet, "eu1", 5, 10)
    wait_for(lambda: failback_waits(fleet), what="tier 1 qualifies: the failback wait")
    time.sleep(2)
    set_and_see(fleet, "eu1", 4, 10)  # a dip: the wait starts again from the next qualifying
    wait_for(lambda: not failback_waits(fleet), what="the dip ends the wait")
    restarted = time.monotonic()
    set_and_see(fleet, "eu1", 5, 10)
    wait_readiness(fleet, {"eu1": True, "us1": False}, "failback to tier 1")
    # Without the restart it would have come 2 s after `restarted`; with it, 5 s or more.
    assert time.monotonic() - restarted >= 5
    assert fleet.events("ClusterSelectionFailback") == [
        *settled, "cluster selection: tier 2 (us1) → tier 1 (eu1)"]
    assert fleet.switches("failback") == failbacks_before + 1


def test_fallback_none_leaves_no_endpoint(fleet_factory: FleetFactory) -> None:
    # (e) only eu clusters, and no others when eu has nothing.
    fleet = fleet_factory([SAME_REGION], fallback="None")
    wait_readiness(fleet, {"eu1": True, "us1": False}, "tier 1 (eu1) active")
    fleet.set_ready("eu1", 0, 1)
    wait_readiness(fleet, {"eu1": False, "us1": False}, "fallback None: nothing ready")
    wait_for(lambda: fleet.annotations().get("mcsync.io/active-clusters") == "",
             what="no active cluster")
    wait_for(lambda: fleet.events("ClusterSelectionFailover") == [
        "cluster selection: tier 1 (eu1) → fallback None ()"], what="the failover Event")
