"""Cluster selection with nothing injected: every part a real process over loopback.

A hub process (SQLite and PostgreSQL), three emulated clusters serving the About API, and
one agent process each: `eu1` (region eu) and `us1` (region us) export `shop/web` with the
selection annotations on their ServiceExports; `eu9` (region eu) imports it. Each agent
reports its cluster's `ClusterProperty` objects to the hub, and the importing agent learns
the exporters' from the hub's fleet-properties feed. The importer's own region decides
its first tier through `@SameAsImporter@`, and relabelling a cluster moves it between
tiers within a feed round trip (docs/failover-order.md).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from member.imports.importspec import mirrored_slice_name
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
REGION = "region"
SELECTORS = [
    {"propertySelector": {"matchProperties": {REGION: "@SameAsImporter@"}}},
    {"propertySelector": {"matchExpressions": [{"key": REGION, "operator": "Exists"}]}},
]


def source_slice(cluster: str, ready: bool) -> dict[str, Any]:
    octet = 10 if cluster == "eu1" else 20
    return {
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": {"name": "web-abc", "namespace": NS, "labels": {
            "kubernetes.io/service-name": "web",
            "endpointslice.kubernetes.io/managed-by": "endpointslice-controller.k8s.io"}},
        "addressType": "IPv4",
        "ports": [{"name": "http", "protocol": "TCP", "port": 8080}],
        "endpoints": [{"addresses": [f"10.{octet}.0.1"],
                       "conditions": {"ready": ready, "serving": ready}}],
    }


def set_property(cluster: KubeCluster, name: str, value: str) -> None:
    found = cluster.state.get("clusterproperties", None, name)
    if found is None:
        cluster.state.create("clusterproperties", None,
                             {"metadata": {"name": name}, "spec": {"value": value}})
    else:
        cluster.state.update("clusterproperties", None, {**found, "spec": {"value": value}})


def readiness(west: KubeCluster) -> dict[str, bool]:
    found = {}
    for cluster in ("eu1", "us1"):
        obj = west.state.get("endpointslices", NS, mirrored_slice_name("web", cluster, "web-abc"))
        if obj is not None:
            found[cluster] = any(e.get("conditions", {}).get("ready", True)
                                 for e in obj["endpoints"])
    return found


def active(west: KubeCluster) -> str | None:
    si = west.state.get("serviceimports", NS, "web") or {}
    value = (si.get("metadata", {}).get("annotations") or {}).get("mcsync.io/active-clusters")
    return str(value) if value is not None else None


@pytest.fixture
def hub(database_url: str, tmp_path: Path) -> Iterator[HubProcess]:
    directory = tmp_path / "hub"
    directory.mkdir()
    process = HubProcess(directory=directory, database=database_url)
    process.start()
    try:
        yield process
    finally:
        process.stop()
        forget_logs()


def test_tiers_follow_the_clusters_reported_properties(
    hub: HubProcess, kube_cluster_factory: Any, agent_factory: AgentFactory,
) -> None:
    clusters: dict[str, KubeCluster] = {}
    for name, region in (("eu1", "eu"), ("us1", "us"), ("eu9", "eu")):
        kube = clusters[name] = kube_cluster_factory(name, about_api=True)
        set_property(kube, REGION, region)
        kube.state.create_namespace(NS)
        if name != "eu9":
            kube.state.create("services", NS, service_body("web", NS))
            kube.state.create("endpointslices", NS, source_slice(name, True))
            export = service_export_body("web", NS)
            export["metadata"]["annotations"] = {
                "mcsync.io/cluster-selectors": json.dumps(SELECTORS)}
            kube.state.create("serviceexports", NS, export)
        agent_factory(name, kubeconfig=kube.kubeconfig, hub=hub, cluster_id=name,
                      token=hub.register(name))
    west = clusters["eu9"]

    # The importer's region is eu: eu1 is tier 1, us1's endpoints are not ready in eu9.
    wait_for(lambda: readiness(west) == {"eu1": True, "us1": False} and active(west) == "eu1",
             what="tier 1 = eu1 in eu9")

    # eu9 is relabelled us: its own tier 1 is now us1 (a property change re-evaluates).
    set_property(west, REGION, "us")
    wait_for(lambda: readiness(west) == {"eu1": False, "us1": True} and active(west) == "us1",
             what="tier 1 = us1 once eu9 is in us")

    # us1 is relabelled eu: tier 1 (us) is empty, so tier 2 (any region) serves.
    set_property(clusters["us1"], REGION, "eu")
    wait_for(lambda: readiness(west) == {"eu1": True, "us1": True}
             and active(west) == "eu1,us1", what="tier 2 once no cluster is in us")
