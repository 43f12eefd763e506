"""CRUD through the official client: metadata, resourceVersions, conflicts, errors."""

from __future__ import annotations

import pytest
from kubernetes.client.exceptions import ApiException

from shared.constants import MCS_GROUP
from tests.kube.fixtures import KubeCluster
from tests.kube.support import core_api, custom_api, failure, service, service_export

NS = "team-a"


def test_create_sets_server_metadata(kube_cluster: KubeCluster) -> None:
    core = core_api(kube_cluster)
    created = core.create_namespaced_service(NS, service("web"))
    meta = created.metadata
    assert meta.uid and meta.creation_timestamp is not None
    assert meta.namespace == NS
    assert meta.generation == 1
    assert int(meta.resource_version) > 1
    # What the apiserver defaults and allocates.
    assert created.spec.type == "ClusterIP"
    assert created.spec.cluster_ip and created.spec.cluster_ip != "None"
    assert created.spec.session_affinity == "None"
    assert created.spec.internal_traffic_policy == "Cluster"
    assert created.spec.ip_families == ["IPv4"]
    assert created.spec.ports[0].protocol == "TCP"
    assert created.spec.ports[0].target_port == 80
    fetched = core.read_namespaced_service("web", NS)
    assert fetched.metadata.uid == meta.uid
    assert fetched.metadata.resource_version == meta.resource_version


def test_headless_and_external_name_services(kube_cluster: KubeCluster) -> None:
    core = core_api(kube_cluster)
    headless = core.create_namespaced_service(NS, service("db", clusterIP="None"))
    assert headless.spec.cluster_ip == "None"
    ext = core.create_namespaced_service(NS, {
        "metadata": {"name": "ext"}, "spec": {"type": "ExternalName",
                                              "externalName": "example.com"}})
    assert ext.spec.type == "ExternalName" and ext.spec.cluster_ip is None


def test_resource_version_is_one_global_counter(kube_cluster: KubeCluster) -> None:
    core = core_api(kube_cluster)
    custom = custom_api(kube_cluster)
    rvs = [
        int(core.create_namespaced_service(NS, service("a")).metadata.resource_version),
        int(custom.create_namespaced_custom_object(
            MCS_GROUP, "v1beta1", NS, "serviceexports", service_export("a")
        )["metadata"]["resourceVersion"]),
        int(core.create_namespaced_service("other", service("b")).metadata.resource_version),
    ]
    assert rvs == sorted(rvs) and len(set(rvs)) == 3
    listed = core.list_service_for_all_namespaces()
    assert int(listed.metadata.resource_version) == rvs[-1]
    assert {s.metadata.name for s in listed.items} == {"a", "b"}


def test_stale_update_is_conflict_and_missing_rv_is_unconditional(
    kube_cluster: KubeCluster,
) -> None:
    core = core_api(kube_cluster)
    first = core.create_namespaced_service(NS, service("web"))
    first.metadata.labels = {"v": "1"}
    second = core.replace_namespaced_service("web", NS, first)
    assert int(second.metadata.resource_version) > int(first.metadata.resource_version)

    first.metadata.labels = {"v": "stale"}
    with pytest.raises(ApiException) as info:
        core.replace_namespaced_service("web", NS, first)  # carries the old resourceVersion
    assert info.value.status == 409
    status = failure(info.value)
    assert status["kind"] == "Status" and status["status"] == "Failure"
    assert status["reason"] == "Conflict" and status["code"] == 409
    assert status["message"] == (
        'Operation cannot be fulfilled on services "web": the object has been modified; '
        "please apply your changes to the latest version and try again")
    assert status["details"] == {"name": "web", "kind": "services"}

    second.metadata.resource_version = None
    second.metadata.labels = {"v": "unconditional"}
    third = core.replace_namespaced_service("web", NS, second)
    assert third.metadata.labels == {"v": "unconditional"}


def test_create_twice_and_missing_object(kube_cluster: KubeCluster) -> None:
    core = core_api(kube_cluster)
    core.create_namespaced_service(NS, service("web"))
    with pytest.raises(ApiException) as dup:
        core.create_namespaced_service(NS, service("web"))
    assert dup.value.status == 409 and failure(dup.value)["reason"] == "AlreadyExists"
    with pytest.raises(ApiException) as missing:
        core.read_namespaced_service("nope", NS)
    assert missing.value.status == 404
    assert failure(missing.value)["reason"] == "NotFound"
    assert failure(missing.value)["message"] == 'services "nope" not found'


def test_generation_bumps_on_spec_change_only(kube_cluster: KubeCluster) -> None:
    core = core_api(kube_cluster)
    core.create_namespaced_service(NS, service("web"))
    labelled = core.patch_namespaced_service("web", NS, {"metadata": {"labels": {"a": "b"}}})
    assert labelled.metadata.generation == 1
    status = core.patch_namespaced_service_status(
        "web", NS, {"status": {"loadBalancer": {"ingress": [{"ip": "1.2.3.4"}]}}})
    assert status.metadata.generation == 1
    assert int(status.metadata.resource_version) > int(labelled.metadata.resource_version)
    # A strategic merge patch merges Service ports by their port number.
    retarget = {"spec": {"ports": [{"port": 80, "targetPort": 8080}]}}
    changed = core.patch_namespaced_service("web", NS, retarget)
    assert changed.metadata.generation == 2
    assert [(p.port, p.target_port) for p in changed.spec.ports] == [(80, 8080)]
    same = core.patch_namespaced_service("web", NS, retarget)
    # An update that changes nothing writes nothing.
    assert same.metadata.generation == 2
    assert same.metadata.resource_version == changed.metadata.resource_version


def test_invalid_bodies_are_rejected(kube_cluster: KubeCluster) -> None:
    core = core_api(kube_cluster)
    with pytest.raises(ApiException) as bad_name:
        core.create_namespaced_service(NS, service("Not_A_Name"))
    assert bad_name.value.status == 422
    with pytest.raises(ApiException) as bad_port:
        core.create_namespaced_service(NS, {"metadata": {"name": "x"},
                                            "spec": {"ports": [{"port": 0}]}})
    assert bad_port.value.status == 422
    assert failure(bad_port.value)["reason"] == "Invalid"
    assert "spec.ports[0].port" in failure(bad_port.value)["message"]
    custom = custom_api(kube_cluster)
    with pytest.raises(ApiException) as wrong_version:
        custom.create_namespaced_custom_object(
            MCS_GROUP, "v1beta1", NS, "serviceexports",
            service_export("x", version="v1alpha1"))
    assert wrong_version.value.status == 400


def test_custom_resource_generation_tracks_spec(kube_cluster: KubeCluster) -> None:
    custom = custom_api(kube_cluster)
    se = ("multicluster.x-k8s.io", "v1beta1", NS, "serviceexports")
    created = custom.create_namespaced_custom_object(*se, service_export("web"))
    assert created["metadata"]["generation"] == 1
    annotated = custom.patch_namespaced_custom_object(
        *se, "web", {"metadata": {"annotations": {"mcsync.io/exported-since": "x"}}})
    assert annotated["metadata"]["generation"] == 1
    changed = custom.patch_namespaced_custom_object(
        *se, "web", {"spec": {"exportedLabels": {"team": "a"}}})
    assert changed["metadata"]["generation"] == 2
    # Reading through the other served version shows the same object at that version.
    alpha = custom.get_namespaced_custom_object(
        "multicluster.x-k8s.io", "v1alpha1", NS, "serviceexports", "web")
    assert alpha["apiVersion"] == "multicluster.x-k8s.io/v1alpha1"
    assert alpha["metadata"]["resourceVersion"] == changed["metadata"]["resourceVersion"]
    assert alpha["spec"] == {"exportedLabels": {"team": "a"}}
