"""ServiceExport writes (docs/reference.md#export-path): status with a precondition, finalizer and
annotations."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from member.informer import Informer
from member.kube.listwatch import ServiceExportListWatch, ServiceListWatch
from member.kube.resources import NotFoundError, ServiceExportClient, StaleObject
from shared.constants import ANNOTATION_EXPORTED_SINCE, FINALIZER_SERVICEEXPORT_CLEANUP
from tests.kube.fixtures import KubeCluster
from tests.kube.support import service, service_export


def valid_condition(generation: int) -> dict[str, Any]:
    return {
        "type": "Valid",
        "status": "True",
        "reason": "Valid",
        "message": "Service default/web is exported.",
        "observedGeneration": generation,
        "lastTransitionTime": "2026-01-01T00:00:00Z",
    }


@pytest.fixture
def exports(kube_cluster: KubeCluster) -> ServiceExportClient:
    kube_cluster.state.create("serviceexports", "default", service_export("web"))
    return ServiceExportClient(kube_cluster.api_client(), version="v1beta1")


def test_get(exports: ServiceExportClient) -> None:
    obj = exports.get("default", "web")
    assert obj is not None and obj["metadata"]["name"] == "web"
    assert exports.get("default", "missing") is None


def test_replace_status_then_stale_resource_version_is_409(
    kube_cluster: KubeCluster, exports: ServiceExportClient
) -> None:
    obj = exports.get("default", "web")
    assert obj is not None
    obj["status"] = {"conditions": [valid_condition(obj["metadata"]["generation"])]}
    stored = exports.replace_status(obj)
    assert stored["status"]["conditions"][0]["reason"] == "Valid"
    assert stored["metadata"]["resourceVersion"] != obj["metadata"]["resourceVersion"]
    server = kube_cluster.state.get("serviceexports", "default", "web")
    assert server is not None and server["status"] == obj["status"]

    # Written from the old read: someone else's change (ours, here) must not be overwritten.
    obj["status"] = {"conditions": []}
    with pytest.raises(StaleObject):
        exports.replace_status(obj)
    server = kube_cluster.state.get("serviceexports", "default", "web")
    assert server is not None and server["status"]["conditions"][0]["reason"] == "Valid"


def test_replace_status_needs_a_resource_version(exports: ServiceExportClient) -> None:
    obj = exports.get("default", "web")
    assert obj is not None
    del obj["metadata"]["resourceVersion"]
    with pytest.raises(ValueError, match="resourceVersion"):
        exports.replace_status(obj)


def test_replace_status_conflict_from_server(
    kube_cluster: KubeCluster, exports: ServiceExportClient
) -> None:
    kube_cluster.state.inject_conflict("serviceexports", "default", "web")
    obj = exports.get("default", "web")
    assert obj is not None
    obj["status"] = {"conditions": [valid_condition(1)]}
    with pytest.raises(StaleObject):
        exports.replace_status(obj)
    stored = exports.replace_status(obj)  # the next try goes through
    assert stored["status"]["conditions"][0]["type"] == "Valid"


def test_replace_status_of_deleted_object_is_not_found(
    kube_cluster: KubeCluster, exports: ServiceExportClient
) -> None:
    obj = exports.get("default", "web")
    assert obj is not None
    kube_cluster.state.delete("serviceexports", "default", "web")
    obj["status"] = {"conditions": [valid_condition(1)]}
    with pytest.raises(NotFoundError):
        exports.replace_status(obj)


def test_finalizer_and_annotation_patches(
    kube_cluster: KubeCluster, exports: ServiceExportClient
) -> None:
    obj = exports.get("default", "web")
    assert obj is not None
    rv = obj["metadata"]["resourceVersion"]
    patched = exports.patch_metadata(
        "default",
        "web",
        resource_version=rv,
        finalizers=[FINALIZER_SERVICEEXPORT_CLEANUP],
        annotations={ANNOTATION_EXPORTED_SINCE: "2026-01-01T00:00:00.000Z"},
    )
    assert patched["metadata"]["finalizers"] == [FINALIZER_SERVICEEXPORT_CLEANUP]
    assert patched["metadata"]["annotations"] == {
        ANNOTATION_EXPORTED_SINCE: "2026-01-01T00:00:00.000Z"
    }

    with pytest.raises(StaleObject):  # the old resourceVersion no longer holds
        exports.patch_metadata("default", "web", resource_version=rv, finalizers=[])

    # Deletion waits for our finalizer; removing it (with a fresh rv) lets the object go.
    kube_cluster.state.delete("serviceexports", "default", "web")
    terminating = exports.get("default", "web")
    assert terminating is not None and terminating["metadata"].get("deletionTimestamp")
    exports.patch_metadata(
        "default",
        "web",
        resource_version=terminating["metadata"]["resourceVersion"],
        finalizers=[],
        annotations={ANNOTATION_EXPORTED_SINCE: None},
    )
    assert exports.get("default", "web") is None
    with pytest.raises(NotFoundError):
        exports.patch_metadata("default", "web", resource_version="1", finalizers=[])


def test_annotation_none_removes_only_that_annotation(exports: ServiceExportClient) -> None:
    obj = exports.get("default", "web")
    assert obj is not None
    first = exports.patch_metadata(
        "default",
        "web",
        resource_version=obj["metadata"]["resourceVersion"],
        annotations={"a": "1", "b": "2"},
    )
    second = exports.patch_metadata(
        "default",
        "web",
        resource_version=first["metadata"]["resourceVersion"],
        annotations={"a": None},
    )
    assert second["metadata"]["annotations"] == {"b": "2"}


def test_the_agent_kube_layer_never_writes_services(kube_cluster: KubeCluster) -> None:
    state = kube_cluster.state
    state.create("services", "default", service("web"))
    state.create("serviceexports", "default", service_export("web"))
    api = kube_cluster.api_client()
    stop = threading.Event()
    try:
        informers = [
            Informer(
                name="svc",
                list_watch=ServiceListWatch(api, namespace=None),
                handler=lambda *_: None,
            ),
            Informer(
                name="se",
                list_watch=ServiceExportListWatch(api, version="v1beta1", namespace=None),
                handler=lambda *_: None,
            ),
        ]
        for informer in informers:
            informer.start(stop)
            assert informer.wait_for_sync(30)
        exports = ServiceExportClient(api, version="v1beta1")
        obj = exports.get("default", "web")
        assert obj is not None
        obj = exports.patch_metadata(
            "default",
            "web",
            resource_version=obj["metadata"]["resourceVersion"],
            finalizers=[FINALIZER_SERVICEEXPORT_CLEANUP],
        )
        obj["status"] = {"conditions": [valid_condition(1)]}
        exports.replace_status(obj)
    finally:
        stop.set()
    assert state.writes("services") == 0
    assert state.writes("services/status") == 0
    assert state.count("patch", "serviceexports") == 1
    assert state.count("update", "serviceexports/status") == 1
