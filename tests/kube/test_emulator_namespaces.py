"""Namespaces: cluster-scoped CRUD and watch, 404 for content in a missing namespace, and
deletion that empties the namespace first, as the namespace controller does."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from kubernetes.client.exceptions import ApiException

from shared.constants import MCS_GROUP
from tests.kube.fixtures import KubeCluster
from tests.kube.support import (
    BackgroundWatch,
    core_api,
    custom_api,
    failure,
    service,
    service_export,
    wait_for,
)


def namespace(name: str, **labels: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": name, **({"labels": labels} if labels else {})}}


def test_a_new_cluster_has_the_system_namespaces(kube_cluster: KubeCluster) -> None:
    names = {n.metadata.name for n in core_api(kube_cluster).list_namespace().items}
    assert {"default", "kube-system", "kube-public", "kube-node-lease"} <= names


def test_create_get_list_update_namespace(kube_cluster: KubeCluster) -> None:
    core = core_api(kube_cluster)
    created = core.create_namespace(namespace("shop", team="a"))
    assert created.metadata.namespace is None  # cluster-scoped
    assert created.status.phase == "Active"
    assert created.spec.finalizers == ["kubernetes"]
    assert created.metadata.labels == {"team": "a", "kubernetes.io/metadata.name": "shop"}
    assert core.read_namespace("shop").metadata.uid == created.metadata.uid
    assert [n.metadata.name for n in core.list_namespace(label_selector="team=a").items] == [
        "shop"]
    assert "shop" in {n.metadata.name for n in core.list_namespace(
        field_selector="status.phase=Active").items}
    patched = core.patch_namespace("shop", {"metadata": {"labels": {"team": "b"}}})
    assert patched.metadata.labels["team"] == "b"
    with pytest.raises(ApiException) as twice:
        core.create_namespace(namespace("shop"))
    assert twice.value.status == 409
    assert failure(twice.value)["message"] == 'namespaces "shop" already exists'


def test_namespace_names_must_be_dns_labels(kube_cluster: KubeCluster) -> None:
    with pytest.raises(ApiException) as info:
        core_api(kube_cluster).create_namespace(namespace("a.b"))
    assert info.value.status == 422
    assert failure(info.value)["details"]["causes"][0]["field"] == "metadata.name"


def test_create_in_a_missing_namespace_is_not_found(kube_cluster: KubeCluster) -> None:
    core = core_api(kube_cluster)
    with pytest.raises(ApiException) as info:
        core.create_namespaced_service("nowhere", service("web"))
    assert info.value.status == 404
    status = failure(info.value)
    assert status["reason"] == "NotFound"
    assert status["message"] == 'namespaces "nowhere" not found'
    assert status["details"] == {"name": "nowhere", "kind": "namespaces"}
    with pytest.raises(ApiException) as custom:
        custom_api(kube_cluster).create_namespaced_custom_object(
            MCS_GROUP, "v1beta1", "nowhere", "serviceexports", service_export("web"))
    assert custom.value.status == 404
    assert core.list_service_for_all_namespaces().items == []
    core.create_namespace(namespace("nowhere"))
    assert core.create_namespaced_service("nowhere", service("web")).metadata.name == "web"


def test_in_process_seeding_creates_the_namespace(kube_cluster: KubeCluster) -> None:
    kube_cluster.state.create("services", "seeded", service("web"))
    assert core_api(kube_cluster).read_namespace("seeded").status.phase == "Active"


def test_namespace_watch_sees_create_and_delete(
    kube_cluster: KubeCluster, watches: list[BackgroundWatch],
) -> None:
    core = core_api(kube_cluster)
    rv = core.list_namespace().metadata.resource_version
    w = BackgroundWatch(core.list_namespace, resource_version=rv,
                        field_selector="metadata.name=shop")
    watches.append(w)
    core.create_namespace(namespace("shop"))
    core.delete_namespace("shop")
    events = [(e["type"], e["raw_object"]["status"]["phase"]) for e in w.take(3)]
    assert events == [("ADDED", "Active"), ("MODIFIED", "Terminating"),
                      ("DELETED", "Terminating")]


def test_deleting_a_namespace_deletes_its_objects_then_itself(kube_cluster: KubeCluster) -> None:
    core = core_api(kube_cluster)
    custom = custom_api(kube_cluster)
    core.create_namespace(namespace("shop"))
    core.create_namespaced_service("shop", service("web"))
    custom.create_namespaced_custom_object(MCS_GROUP, "v1beta1", "shop", "serviceexports",
                                           service_export("web"))
    core.create_namespaced_service("default", service("web"))  # another namespace: kept
    answer = core.delete_namespace("shop")  # the Namespace, now Terminating (a dict here:
    assert answer["kind"] == "Namespace"     # the client types this answer V1Status)
    assert answer["status"]["phase"] == "Terminating" and answer["metadata"]["deletionTimestamp"]
    wait_for(lambda: kube_cluster.state.get("namespaces", None, "shop") is None,
             what="namespace shop to be gone")
    assert core.list_namespaced_service("shop").items == []
    assert custom.list_namespaced_custom_object(MCS_GROUP, "v1beta1", "shop",
                                                "serviceexports")["items"] == []
    assert [s.metadata.name for s in core.list_namespaced_service("default").items] == ["web"]


def test_terminating_namespace_waits_for_finalizers_and_refuses_new_content(
    kube_cluster: KubeCluster,
) -> None:
    core = core_api(kube_cluster)
    custom = custom_api(kube_cluster)
    core.create_namespace(namespace("shop"))
    custom.create_namespaced_custom_object(
        MCS_GROUP, "v1beta1", "shop", "serviceexports",
        service_export("web", finalizers=["mcsync.io/serviceexport-cleanup"]))
    core.delete_namespace("shop")
    held = wait_for(lambda: (kube_cluster.state.get("serviceexports", "shop", "web") or {})
                    .get("metadata", {}).get("deletionTimestamp"), what="deletion to start")
    assert held
    assert kube_cluster.state.wait_collected()
    assert core.read_namespace("shop").status.phase == "Terminating"  # held by the finalizer
    with pytest.raises(ApiException) as refused:
        core.create_namespaced_service("shop", service("late"))
    assert refused.value.status == 403
    assert failure(refused.value)["message"] == (
        'services "late" is forbidden: unable to create new content in namespace shop '
        "because it is being terminated")
    custom.patch_namespaced_custom_object(MCS_GROUP, "v1beta1", "shop", "serviceexports", "web",
                                          {"metadata": {"finalizers": None}})
    wait_for(lambda: kube_cluster.state.get("namespaces", None, "shop") is None,
             what="namespace shop to be gone once the finalizer is removed")


def test_cluster_scoped_paths(kube_cluster: KubeCluster) -> None:
    base = kube_cluster.url
    assert httpx.get(f"{base}/api/v1/namespaces/default").json()["kind"] == "Namespace"
    status = httpx.get(f"{base}/api/v1/namespaces/default/status").json()
    assert status["status"]["phase"] == "Active"
    # A cluster-scoped resource has no namespaced path.
    assert httpx.get(f"{base}/apis/apiextensions.k8s.io/v1/namespaces/default/"
                     "customresourcedefinitions").status_code == 404
