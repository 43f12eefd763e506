"""ownerReferences and the background garbage collector of kube-controller-manager."""

from __future__ import annotations

from typing import Any

import httpx
from kubernetes import client

from shared.constants import LABEL_SERVICE_NAME, MCS_GROUP
from tests.kube.fixtures import KubeCluster
from tests.kube.support import core_api, custom_api, service, wait_for

NS = "team-a"


def owner(obj: dict[str, Any], api_version: str, kind: str) -> dict[str, Any]:
    return {"apiVersion": api_version, "kind": kind, "name": obj["metadata"]["name"],
            "uid": obj["metadata"]["uid"], "controller": True, "blockOwnerDeletion": False}


def slice_of(name: str, owners: list[dict[str, Any]]) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": {LABEL_SERVICE_NAME: "web"},
                         "ownerReferences": owners},
            "addressType": "IPv4", "endpoints": [{"addresses": ["10.1.0.1"]}]}


def _chain(cluster: KubeCluster) -> tuple[Any, Any, Any]:
    """ServiceImport `web` owns Service `web`, which owns EndpointSlice `web-1`."""
    custom, core = custom_api(cluster), core_api(cluster)
    slices: Any = client.DiscoveryV1Api(cluster.api_client())
    imported = custom.create_namespaced_custom_object(MCS_GROUP, "v1beta1", NS,
                                                      "serviceimports", {
        "metadata": {"name": "web"}, "spec": {"type": "ClusterSetIP", "ports": []}})
    svc = service("web")
    svc["metadata"]["ownerReferences"] = [owner(imported, f"{MCS_GROUP}/v1beta1",
                                                "ServiceImport")]
    derived = core.create_namespaced_service(NS, svc)
    slices.create_namespaced_endpoint_slice(NS, slice_of("web-1", [{
        "apiVersion": "v1", "kind": "Service", "name": "web", "uid": derived.metadata.uid}]))
    return custom, core, slices


def _gone(cluster: KubeCluster, resource: str, name: str) -> bool:
    return cluster.state.get(resource, NS, name) is None


def test_deleting_the_owner_deletes_the_chain_in_the_background(
    kube_cluster: KubeCluster,
) -> None:
    custom, _core, _slices = _chain(kube_cluster)
    custom.delete_namespaced_custom_object(MCS_GROUP, "v1beta1", NS, "serviceimports", "web")
    wait_for(lambda: _gone(kube_cluster, "services", "web"), what="the owned Service to go")
    wait_for(lambda: _gone(kube_cluster, "endpointslices", "web-1"),
             what="the Service's EndpointSlice to go")


def test_dependents_stay_while_the_owner_lives(kube_cluster: KubeCluster) -> None:
    _custom, core, slices = _chain(kube_cluster)
    core.create_namespaced_service(NS, service("unrelated"))
    core.delete_namespaced_service("unrelated", NS)
    assert kube_cluster.state.wait_collected()
    assert core.read_namespaced_service("web", NS).metadata.name == "web"
    assert slices.read_namespaced_endpoint_slice("web-1", NS).metadata.name == "web-1"


def test_owner_is_matched_by_uid_not_by_name(kube_cluster: KubeCluster) -> None:
    core = core_api(kube_cluster)
    slices: Any = client.DiscoveryV1Api(kube_cluster.api_client())
    first = core.create_namespaced_service(NS, service("web"))
    slices.create_namespaced_endpoint_slice(NS, slice_of("web-1", [{
        "apiVersion": "v1", "kind": "Service", "name": "web", "uid": first.metadata.uid}]))
    core.delete_namespaced_service("web", NS)
    core.create_namespaced_service(NS, service("web"))  # same name, another uid
    wait_for(lambda: _gone(kube_cluster, "endpointslices", "web-1"),
             what="the first Service's slice to go despite a new Service of the same name")


def test_a_dependent_of_a_missing_owner_is_collected(kube_cluster: KubeCluster) -> None:
    slices: Any = client.DiscoveryV1Api(kube_cluster.api_client())
    slices.create_namespaced_endpoint_slice(NS, slice_of("orphan", [{
        "apiVersion": "v1", "kind": "Service", "name": "web", "uid": "no-such-uid"}]))
    wait_for(lambda: _gone(kube_cluster, "endpointslices", "orphan"),
             what="a slice whose owner never existed to go")


def test_one_remaining_owner_keeps_a_dependent(kube_cluster: KubeCluster) -> None:
    core = core_api(kube_cluster)
    slices: Any = client.DiscoveryV1Api(kube_cluster.api_client())
    a = core.create_namespaced_service(NS, service("a"))
    b = core.create_namespaced_service(NS, service("b"))
    slices.create_namespaced_endpoint_slice(NS, slice_of("shared", [
        {"apiVersion": "v1", "kind": "Service", "name": "a", "uid": a.metadata.uid},
        {"apiVersion": "v1", "kind": "Service", "name": "b", "uid": b.metadata.uid}]))
    core.delete_namespaced_service("a", NS)
    assert kube_cluster.state.wait_collected()
    assert not _gone(kube_cluster, "endpointslices", "shared")
    core.delete_namespaced_service("b", NS)
    wait_for(lambda: _gone(kube_cluster, "endpointslices", "shared"),
             what="the slice to go with its last owner")


def test_a_dependent_with_a_finalizer_is_only_marked(kube_cluster: KubeCluster) -> None:
    core = core_api(kube_cluster)
    owner_svc = core.create_namespaced_service(NS, service("web"))
    held = service("held")
    held["metadata"]["finalizers"] = ["example.com/hold"]
    held["metadata"]["ownerReferences"] = [
        {"apiVersion": "v1", "kind": "Service", "name": "web", "uid": owner_svc.metadata.uid}]
    core.create_namespaced_service(NS, held)
    core.delete_namespaced_service("web", NS)
    marked = wait_for(lambda: (kube_cluster.state.get("services", NS, "held") or {})
                      .get("metadata", {}).get("deletionTimestamp"), what="deletion to start")
    assert marked
    core.patch_namespaced_service("held", NS, {"metadata": {"finalizers": None}})
    wait_for(lambda: _gone(kube_cluster, "services", "held"), what="the dependent to go")


def test_http_control_waits_for_the_collector(kube_cluster: KubeCluster) -> None:
    custom, _core, _slices = _chain(kube_cluster)
    custom.delete_namespaced_custom_object(MCS_GROUP, "v1beta1", NS, "serviceimports", "web")
    answer = httpx.post(f"{kube_cluster.url}/emulator/wait-collected", timeout=30)
    assert answer.json() == {"idle": True}
    assert _gone(kube_cluster, "services", "web")
    assert _gone(kube_cluster, "endpointslices", "web-1")


def test_orphan_propagation_keeps_dependents_without_the_reference(
    kube_cluster: KubeCluster,
) -> None:
    custom, core, _slices = _chain(kube_cluster)
    custom.delete_namespaced_custom_object(MCS_GROUP, "v1beta1", NS, "serviceimports", "web",
                                           propagation_policy="Orphan")
    assert kube_cluster.state.wait_collected()
    kept = core.read_namespaced_service("web", NS)
    assert kept.metadata.owner_references is None
    assert not _gone(kube_cluster, "endpointslices", "web-1")  # still owned by the Service
