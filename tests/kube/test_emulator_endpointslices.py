"""EndpointSlices (`discovery.k8s.io/v1`) through the official client, as the agent uses them."""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from shared.constants import LABEL_ENDPOINTSLICE_MANAGED_BY, LABEL_SERVICE_NAME
from tests.kube.fixtures import KubeCluster
from tests.kube.support import BackgroundWatch, failure

NS = "team-a"


def endpoint_slice(name: str, service: str, *, addresses: tuple[str, ...] = ("10.1.0.1",),
                   address_type: str = "IPv4", managed_by: str = "endpointslice-controller.k8s.io",
                   port: int = 8080) -> dict[str, Any]:
    return {
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": {"name": name, "labels": {LABEL_SERVICE_NAME: service,
                                              LABEL_ENDPOINTSLICE_MANAGED_BY: managed_by}},
        "addressType": address_type,
        "endpoints": [{"addresses": [a], "conditions": {"ready": True}} for a in addresses],
        "ports": [{"name": "http", "port": port, "protocol": "TCP"}],
    }


def discovery_api(cluster: KubeCluster) -> Any:
    return client.DiscoveryV1Api(cluster.api_client())


def test_create_get_update_delete(kube_cluster: KubeCluster) -> None:
    api = discovery_api(kube_cluster)
    created = api.create_namespaced_endpoint_slice(NS, endpoint_slice("web-abc", "web"))
    assert created.address_type == "IPv4"
    assert created.metadata.generation == 1 and created.metadata.uid
    assert [e.addresses for e in created.endpoints] == [["10.1.0.1"]]
    created.endpoints[0].addresses = ["10.1.0.2"]
    updated = api.replace_namespaced_endpoint_slice("web-abc", NS, created)
    assert updated.metadata.generation == 2
    assert api.read_namespaced_endpoint_slice("web-abc", NS).endpoints[0].addresses == [
        "10.1.0.2"]
    status = api.delete_namespaced_endpoint_slice("web-abc", NS)
    assert status["kind"] == "Status" and status["status"] == "Success"  # not the object
    with pytest.raises(ApiException) as gone:
        api.read_namespaced_endpoint_slice("web-abc", NS)
    assert gone.value.status == 404
    assert failure(gone.value)["message"] == (
        'endpointslices.discovery.k8s.io "web-abc" not found')


def test_list_with_equality_inequality_and_set_selectors(kube_cluster: KubeCluster) -> None:
    api = discovery_api(kube_cluster)
    api.create_namespaced_endpoint_slice(NS, endpoint_slice("web-1", "web"))
    api.create_namespaced_endpoint_slice(NS, endpoint_slice("web-2", "web", managed_by="mcsync.io"))
    api.create_namespaced_endpoint_slice(NS, endpoint_slice("db-1", "db"))
    api.create_namespaced_endpoint_slice("team-b", endpoint_slice("web-1", "web"))

    def names(**kwargs: str) -> list[str]:
        listed = api.list_endpoint_slice_for_all_namespaces(**kwargs).items
        return [f"{s.metadata.namespace}/{s.metadata.name}" for s in listed]

    assert names(label_selector=f"{LABEL_SERVICE_NAME}=web") == [
        "team-a/web-1", "team-a/web-2", "team-b/web-1"]
    assert names(label_selector=f"{LABEL_SERVICE_NAME}=web,"
                                f"{LABEL_ENDPOINTSLICE_MANAGED_BY}!=mcsync.io") == [
        "team-a/web-1", "team-b/web-1"]
    assert names(label_selector=f"{LABEL_SERVICE_NAME} in (db),"
                                f"{LABEL_ENDPOINTSLICE_MANAGED_BY} notin (mcsync.io)") == [
        "team-a/db-1"]
    namespaced = api.list_namespaced_endpoint_slice(
        "team-b", label_selector=f"{LABEL_SERVICE_NAME}=web").items
    assert [s.metadata.name for s in namespaced] == ["web-1"]


def test_watch_with_selector_sees_only_its_service(
    kube_cluster: KubeCluster, watches: list[BackgroundWatch],
) -> None:
    api = discovery_api(kube_cluster)
    rv = api.list_namespaced_endpoint_slice(NS).metadata.resource_version
    w = BackgroundWatch(api.list_namespaced_endpoint_slice, NS, resource_version=rv,
                        label_selector=f"{LABEL_SERVICE_NAME}=web,"
                                       f"{LABEL_ENDPOINTSLICE_MANAGED_BY}!=mcsync.io")
    watches.append(w)
    api.create_namespaced_endpoint_slice(NS, endpoint_slice("db-1", "db"))
    api.create_namespaced_endpoint_slice(NS, endpoint_slice("mirror", "web",
                                                            managed_by="mcsync.io"))
    api.create_namespaced_endpoint_slice(NS, endpoint_slice("web-1", "web"))
    api.patch_namespaced_endpoint_slice("web-1", NS, {"endpoints": [
        {"addresses": ["10.1.0.9"]}]})
    api.delete_namespaced_endpoint_slice("web-1", NS)
    seen = [(e["type"], e["raw_object"]["metadata"]["name"]) for e in w.take(3)]
    assert seen == [("ADDED", "web-1"), ("MODIFIED", "web-1"), ("DELETED", "web-1")]
    assert w.events.empty()


def test_stale_resource_version_is_a_conflict(kube_cluster: KubeCluster) -> None:
    api = discovery_api(kube_cluster)
    stale = api.create_namespaced_endpoint_slice(NS, endpoint_slice("web-1", "web"))
    api.patch_namespaced_endpoint_slice("web-1", NS, {"endpoints": [{"addresses": ["10.1.0.7"]}]})
    stale.endpoints[0].addresses = ["10.1.0.8"]
    with pytest.raises(ApiException) as info:
        api.replace_namespaced_endpoint_slice("web-1", NS, stale)
    assert info.value.status == 409
    assert failure(info.value)["reason"] == "Conflict"
    assert api.read_namespaced_endpoint_slice("web-1", NS).endpoints[0].addresses == [
        "10.1.0.7"]


def test_address_type_is_immutable(kube_cluster: KubeCluster) -> None:
    api = discovery_api(kube_cluster)
    api.create_namespaced_endpoint_slice(NS, endpoint_slice("web-1", "web"))
    with pytest.raises(ApiException) as info:
        api.patch_namespaced_endpoint_slice("web-1", NS, {
            "addressType": "IPv6", "endpoints": [{"addresses": ["fd00::1"]}]})
    assert info.value.status == 422
    status = failure(info.value)
    assert status["reason"] == "Invalid"
    assert status["message"] == ('EndpointSlice.discovery.k8s.io "web-1" is invalid: '
                                 'addressType: Invalid value: "IPv6": field is immutable')
    assert status["details"]["causes"][0]["field"] == "addressType"
    assert api.read_namespaced_endpoint_slice("web-1", NS).address_type == "IPv4"


@pytest.mark.parametrize(("change", "field"), [
    ({"addressType": "IPv5"}, "addressType"),
    ({"endpoints": [{"addresses": ["fd00::1"]}]}, "endpoints[0].addresses[0]"),
    ({"endpoints": [{"addresses": []}]}, "endpoints[0].addresses"),
    ({"endpoints": [{"addresses": [f"10.2.{i // 256}.{i % 256}"]} for i in range(1001)]},
     "endpoints"),
    ({"ports": [{"port": 70000}]}, "ports[0].port"),
])
def test_invalid_slices_are_refused_naming_the_field(
    kube_cluster: KubeCluster, change: dict[str, Any], field: str,
) -> None:
    api = discovery_api(kube_cluster)
    with pytest.raises(ApiException) as info:
        api.create_namespaced_endpoint_slice(NS, {**endpoint_slice("bad", "web"), **change})
    assert info.value.status == 422
    assert failure(info.value)["details"]["causes"][0]["field"] == field
    assert api.list_namespaced_endpoint_slice(NS).items == []


def test_discovery_lists_endpointslices(kube_cluster: KubeCluster) -> None:
    api = kube_cluster.api_client()
    groups = {g.name: g for g in client.ApisApi(api).get_api_versions().groups}
    assert [v.version for v in groups["discovery.k8s.io"].versions] == ["v1"]
    resources = discovery_api(kube_cluster).get_api_resources().resources
    (entry,) = [r for r in resources if r.name == "endpointslices"]
    assert entry.kind == "EndpointSlice" and entry.namespaced
    assert {"create", "list", "watch", "update", "patch", "delete"} <= set(entry.verbs)
