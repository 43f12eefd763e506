"""Status subresource isolation, finalizers and graceful deletion, patch formats."""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes.client.exceptions import ApiException

from shared.constants import FINALIZER_SERVICEEXPORT_CLEANUP, MCS_GROUP
from tests.kube.fixtures import KubeCluster
from tests.kube.support import core_api, custom_api, failure, service, service_export

NS = "team-a"
SE = (MCS_GROUP, "v1beta1", NS, "serviceexports")
JSON_PATCH = "application/json-patch+json"
CONDITION = {"type": "Valid", "status": "True", "reason": "Valid", "message": "ok",
             "lastTransitionTime": "2025-01-01T00:00:00Z"}


def test_status_endpoint_changes_only_status(kube_cluster: KubeCluster) -> None:
    custom = custom_api(kube_cluster)
    created = custom.create_namespaced_custom_object(*SE, service_export("web"))
    body: dict[str, Any] = {
        **created,
        "metadata": {**created["metadata"], "labels": {"sneaky": "yes"}},
        "spec": {"exportedLabels": {"a": "b"}},
        "status": {"conditions": [CONDITION]},
    }
    updated = custom.replace_namespaced_custom_object_status(*SE, "web", body)
    assert updated["status"] == {"conditions": [CONDITION]}
    assert "labels" not in updated["metadata"]
    assert "spec" not in updated
    assert updated["metadata"]["generation"] == 1
    assert int(updated["metadata"]["resourceVersion"]) > int(
        created["metadata"]["resourceVersion"])


def test_main_endpoint_ignores_status(kube_cluster: KubeCluster) -> None:
    custom = custom_api(kube_cluster)
    created = custom.create_namespaced_custom_object(
        *SE, {**service_export("web"), "status": {"conditions": [CONDITION]}})
    assert "status" not in created  # create drops status for a resource with /status
    custom.patch_namespaced_custom_object_status(*SE, "web", {"status": {"conditions": [
        CONDITION]}})
    patched = custom.patch_namespaced_custom_object(*SE, "web", {
        "metadata": {"labels": {"x": "y"}}, "status": {"conditions": []}})
    assert patched["status"] == {"conditions": [CONDITION]}
    assert patched["metadata"]["labels"] == {"x": "y"}


def test_status_patch_with_stale_resource_version_conflicts(kube_cluster: KubeCluster) -> None:
    custom = custom_api(kube_cluster)
    created = custom.create_namespaced_custom_object(*SE, service_export("web"))
    custom.patch_namespaced_custom_object(*SE, "web", {"metadata": {"labels": {"a": "b"}}})
    with pytest.raises(ApiException) as info:
        custom.patch_namespaced_custom_object_status(*SE, "web", {
            "metadata": {"resourceVersion": created["metadata"]["resourceVersion"]},
            "status": {"conditions": [CONDITION]}})
    assert info.value.status == 409


def test_service_status_isolation(kube_cluster: KubeCluster) -> None:
    core = core_api(kube_cluster)
    core.create_namespaced_service(NS, service("web"))
    lb = {"loadBalancer": {"ingress": [{"ip": "192.0.2.1"}]}}
    after_status = core.patch_namespaced_service_status(
        "web", NS, {"spec": {"type": "NodePort"}, "status": lb})
    assert after_status.spec.type == "ClusterIP"
    assert after_status.status.load_balancer.ingress[0].ip == "192.0.2.1"
    after_main = core.patch_namespaced_service(
        "web", NS, {"status": {"loadBalancer": {}}, "metadata": {"labels": {"a": "b"}}})
    assert after_main.status.load_balancer.ingress[0].ip == "192.0.2.1"


def test_finalizers_hold_deletion_until_emptied(kube_cluster: KubeCluster) -> None:
    custom = custom_api(kube_cluster)
    custom.create_namespaced_custom_object(
        *SE, service_export("web", finalizers=[FINALIZER_SERVICEEXPORT_CLEANUP]))
    deleting = custom.delete_namespaced_custom_object(*SE, "web")
    meta = deleting["metadata"]
    assert meta["deletionTimestamp"] and meta["deletionGracePeriodSeconds"] == 0
    still = custom.get_namespaced_custom_object(*SE, "web")
    assert still["metadata"]["deletionTimestamp"] == meta["deletionTimestamp"]
    # Deleting again changes nothing.
    again = custom.delete_namespaced_custom_object(*SE, "web")
    assert again["metadata"]["resourceVersion"] == still["metadata"]["resourceVersion"]

    with pytest.raises(ApiException) as info:
        custom.patch_namespaced_custom_object(*SE, "web", {"metadata": {"finalizers": [
            FINALIZER_SERVICEEXPORT_CLEANUP, "other.io/new"]}})
    assert info.value.status == 422
    assert "no new finalizers can be added" in failure(info.value)["message"]

    custom.patch_namespaced_custom_object(*SE, "web", {"metadata": {"finalizers": None}})
    with pytest.raises(ApiException) as gone:
        custom.get_namespaced_custom_object(*SE, "web")
    assert gone.value.status == 404


def test_delete_without_finalizers_removes_at_once(kube_cluster: KubeCluster) -> None:
    core = core_api(kube_cluster)
    core.create_namespaced_service(NS, service("web"))
    deleted = core.delete_namespaced_service("web", NS)
    assert deleted.metadata.name == "web"
    with pytest.raises(ApiException) as gone:
        core.read_namespaced_service("web", NS)
    assert gone.value.status == 404
    with pytest.raises(ApiException) as twice:
        core.delete_namespaced_service("web", NS)
    assert twice.value.status == 404


def test_update_emptying_finalizers_deletes(kube_cluster: KubeCluster) -> None:
    custom = custom_api(kube_cluster)
    custom.create_namespaced_custom_object(
        *SE, service_export("web", finalizers=["a.io/x", "b.io/y"]))
    custom.delete_namespaced_custom_object(*SE, "web")
    current = custom.get_namespaced_custom_object(*SE, "web")
    current["metadata"]["finalizers"] = ["b.io/y"]
    current = custom.replace_namespaced_custom_object(*SE, "web", current)
    assert current["metadata"]["finalizers"] == ["b.io/y"]
    current["metadata"]["finalizers"] = []
    custom.replace_namespaced_custom_object(*SE, "web", current)
    assert custom.list_namespaced_custom_object(*SE)["items"] == []


def test_json_patch_and_merge_patch_preconditions(kube_cluster: KubeCluster) -> None:
    custom = custom_api(kube_cluster)
    created = custom.create_namespaced_custom_object(
        *SE, service_export("web", finalizers=["a.io/x"]))
    rv = created["metadata"]["resourceVersion"]
    patched = custom.patch_namespaced_custom_object(*SE, "web", [
        {"op": "test", "path": "/metadata/resourceVersion", "value": rv},
        {"op": "add", "path": "/metadata/finalizers/-", "value": "b.io/y"},
    ], _content_type=JSON_PATCH)
    assert patched["metadata"]["finalizers"] == ["a.io/x", "b.io/y"]
    with pytest.raises(ApiException) as failed_test:
        custom.patch_namespaced_custom_object(*SE, "web", [
            {"op": "test", "path": "/metadata/resourceVersion", "value": rv}],
            _content_type=JSON_PATCH)
    assert failed_test.value.status == 422
    with pytest.raises(ApiException) as stale:
        custom.patch_namespaced_custom_object(*SE, "web", {
            "metadata": {"resourceVersion": rv, "labels": {"a": "b"}}})
    assert stale.value.status == 409


def test_strategic_merge_patch_on_core_merges_finalizers(kube_cluster: KubeCluster) -> None:
    core = core_api(kube_cluster)
    svc = service("web")
    svc["metadata"]["finalizers"] = ["a.io/x", "b.io/y"]
    core.create_namespaced_service(NS, svc)
    # A dict body makes the official client send application/strategic-merge-patch+json,
    # and finalizers are a merge list there: the patch adds, it does not replace.
    patched = core.patch_namespaced_service("web", NS, {"metadata": {"finalizers": ["c.io/z"]}})
    assert patched.metadata.finalizers == ["a.io/x", "b.io/y", "c.io/z"]
    removed = core.patch_namespaced_service("web", NS, {"metadata": {
        "$deleteFromPrimitiveList/finalizers": ["a.io/x"]}})
    assert removed.metadata.finalizers == ["b.io/y", "c.io/z"]


def test_injected_conflict_fails_next_update_once(kube_cluster: KubeCluster) -> None:
    custom = custom_api(kube_cluster)
    custom.create_namespaced_custom_object(*SE, service_export("web"))
    kube_cluster.state.inject_conflict("serviceexports", NS, "web")
    with pytest.raises(ApiException) as info:
        custom.patch_namespaced_custom_object_status(*SE, "web", {"status": {"conditions": [
            CONDITION]}})
    assert info.value.status == 409
    ok = custom.patch_namespaced_custom_object_status(*SE, "web", {"status": {"conditions": [
        CONDITION]}})
    assert ok["status"]["conditions"] == [CONDITION]


def test_strategic_merge_patch_on_custom_resource_is_unsupported(
    kube_cluster: KubeCluster,
) -> None:
    custom = custom_api(kube_cluster)
    custom.create_namespaced_custom_object(*SE, service_export("web"))
    with pytest.raises(ApiException) as info:
        custom.patch_namespaced_custom_object(
            *SE, "web", {"metadata": {"labels": {"a": "b"}}},
            _content_type="application/strategic-merge-patch+json")
    assert info.value.status == 415  # as a real apiserver answers for CRDs
