"""What the informers cache (`member.transform`): less, but every answer the agent derives from
it is the same as from the full object, and no write built from it loses data on the server."""

from __future__ import annotations

import copy
import json
import threading
from datetime import UTC, datetime
from typing import Any

import pytest

from member.export.exportspec import derive_export, export_fingerprint, validate
from member.hubfeed import record_key
from member.informer import Informer
from member.kube.listwatch import ServiceExportListWatch, ServiceListWatch
from member.kube.resources import ServiceExportClient
from member.transform import transform_hub_record, transform_service, transform_service_export
from shared import conditions as c
from shared.constants import (
    ANNOTATION_EXPORTED_SINCE,
    ANNOTATION_EXPORTED_SPEC_HASH,
    ANNOTATION_LAST_OBSERVED_RESOURCE_VERSION,
    FINALIZER_SERVICEEXPORT_CLEANUP,
)
from shared.models import InternalServiceExport, to_wire
from tests.kube.fixtures import KubeCluster
from tests.kube.support import service, service_export, wait_for
from tests.member.informer_support import Recorder

SINCE = datetime(2026, 1, 1, tzinfo=UTC)
MANAGED_FIELDS = [
    {
        "manager": "kubectl-client-side-apply",
        "operation": "Update",
        "apiVersion": "v1",
        "fieldsType": "FieldsV1",
        "fieldsV1": {"f:metadata": {"f:labels": {".": {}, "f:app": {}}}},
    }
]
LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"


def full_service(**spec: Any) -> dict[str, Any]:
    """A Service as the API server answers it, with everything the agent never reads."""
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {
            "name": "web",
            "namespace": "shop",
            "uid": "0b3c3f5e-1111-2222-3333-444455556666",
            "resourceVersion": "812",
            "generation": 3,
            "creationTimestamp": "2026-01-01T00:00:00Z",
            "labels": {"app": "web"},
            "annotations": {LAST_APPLIED: "{" + "x" * 500 + "}"},
            "managedFields": copy.deepcopy(MANAGED_FIELDS),
        },
        "spec": {
            "type": "ClusterIP",
            "clusterIP": "10.96.0.12",
            "clusterIPs": ["10.96.0.12"],
            "ipFamilies": ["IPv4"],
            "ipFamilyPolicy": "SingleStack",
            "internalTrafficPolicy": "Cluster",
            "sessionAffinity": "ClientIP",
            "sessionAffinityConfig": {"clientIP": {"timeoutSeconds": 600}},
            "selector": {"app": "web"},
            "ports": [
                {"name": "http", "protocol": "TCP", "port": 80, "targetPort": 8080},
                {
                    "name": "grpc",
                    "protocol": "TCP",
                    "port": 9090,
                    "targetPort": "grpc",
                    "nodePort": 30090,
                    "appProtocol": "kubernetes.io/h2c",
                },
            ],
            **spec,
        },
        "status": {"loadBalancer": {}},
    }


def full_service_export() -> dict[str, Any]:
    return {
        "apiVersion": "multicluster.x-k8s.io/v1alpha1",
        "kind": "ServiceExport",
        "metadata": {
            "name": "web",
            "namespace": "shop",
            "uid": "9a9a9a9a-1111-2222-3333-444455556666",
            "resourceVersion": "900",
            "generation": 2,
            "creationTimestamp": "2026-01-01T00:00:05Z",
            "labels": {"team": "shop"},
            "finalizers": ["other.io/keep", FINALIZER_SERVICEEXPORT_CLEANUP],
            "annotations": {
                LAST_APPLIED: "{}",
                ANNOTATION_EXPORTED_SINCE: "2026-01-01T00:00:06.000Z",
                ANNOTATION_EXPORTED_SPEC_HASH: "abc123",
            },
            "managedFields": copy.deepcopy(MANAGED_FIELDS),
        },
        "spec": {"exportedLabels": {"tier": "web"}},
        "status": {
            "conditions": [
                {
                    "type": c.VALID,
                    "status": "True",
                    "reason": c.REASON_VALID,
                    "message": "ok",
                    "observedGeneration": 2,
                    "lastTransitionTime": "2026-01-01T00:00:07Z",
                },
                {
                    "type": "example.io/Audited",
                    "status": "True",
                    "reason": "Seen",
                    "message": "someone else's condition",
                    "lastTransitionTime": "2026-01-01T00:00:08Z",
                },
            ],
            "someoneElses": {"kept": True},
        },
    }


def hub_record(service_obj: dict[str, Any]) -> dict[str, Any]:
    """A hub record (wire dict) as the list and the feed deliver it."""
    export = derive_export(
        cluster_id="member-1",
        service=service_obj,
        service_export=full_service_export(),
        exported_since=SINCE,
    )
    record = to_wire(export)
    record["metadata"].update(
        {
            "resourceVersion": "4711",
            "creationTimestamp": "2026-01-01T00:00:09Z",
            "labels": {"x": "y"},
            "annotations": {
                ANNOTATION_LAST_OBSERVED_RESOURCE_VERSION: "812",
                "hub.example/other": "z",
            },
        }
    )
    record["status"] = {
        "conditions": [
            {
                "type": c.CONFLICT,
                "status": "True",
                "reason": "PortConflict",
                "message": "member-0 exports port 80 as UDP; " + "details " * 100,
                "observedGeneration": 3,
                "lastTransitionTime": "2026-01-01T00:00:10Z",
            },
            {"type": "Other", "status": "True", "reason": "X", "message": "long " * 200},
        ],
        "clusterState": "Ready",
    }
    return record


# -- Service ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "spec",
    [
        {},
        {"clusterIP": "None", "clusterIPs": ["None"]},  # headless
        {"trafficDistribution": "PreferClose", "ipFamilies": ["IPv6", "IPv4"]},
    ],
    ids=["clusterip", "headless", "optional-fields"],
)
def test_service_keeps_exactly_what_the_export_is_derived_from(spec: dict[str, Any]) -> None:
    raw = full_service(**spec)
    cached = transform_service(copy.deepcopy(raw))
    assert "managedFields" not in cached["metadata"]
    assert "labels" not in cached["metadata"] and "annotations" not in cached["metadata"]
    assert "status" not in cached and "selector" not in cached["spec"]
    assert all("targetPort" not in p and "nodePort" not in p for p in cached["spec"]["ports"])
    exports = [
        derive_export(
            cluster_id="member-1",
            service=s,
            service_export=full_service_export(),
            exported_since=SINCE,
        )
        for s in (raw, cached)
    ]
    assert exports[0] == exports[1]
    assert export_fingerprint(exports[0].spec) == export_fingerprint(exports[1].spec)
    assert len(json.dumps(cached)) < len(json.dumps(raw)) / 2


def test_service_validity_is_unchanged() -> None:
    for spec in ({}, {"type": "ExternalName", "externalName": "example.com"}):
        raw = full_service(**spec)
        assert validate(
            namespace="shop", name="web", service=transform_service(raw), deny_namespaces=()
        ) == validate(namespace="shop", name="web", service=raw, deny_namespaces=())


def test_odd_service_shapes_stay_reportable() -> None:
    """The transform does not hide what `derive_export` reports as not exportable."""
    for odd in ({"ports": "80"}, {"ports": ["80"]}):
        raw = full_service(**odd)
        assert transform_service(raw)["spec"]["ports"] == odd["ports"]
    assert transform_service({"metadata": {"name": "x"}, "spec": "nonsense"})["spec"] == "nonsense"


def test_transforms_are_idempotent() -> None:
    """The informer may see an object it already transformed (the relist keeps it)."""
    for transform, raw in (
        (transform_service, full_service()),
        (transform_service_export, full_service_export()),
        (transform_hub_record, hub_record(full_service())),
    ):
        once = transform(raw)
        assert transform(copy.deepcopy(once)) == once


# -- ServiceExport ------------------------------------------------------------------------------


def test_service_export_keeps_status_finalizers_and_own_annotations() -> None:
    raw = full_service_export()
    cached = transform_service_export(copy.deepcopy(raw))
    metadata = cached["metadata"]
    # Removed, not emptied: `managedFields: []` in a write would reset the field managers.
    assert "managedFields" not in metadata
    assert "labels" not in metadata
    assert metadata["annotations"] == {
        ANNOTATION_EXPORTED_SINCE: "2026-01-01T00:00:06.000Z",
        ANNOTATION_EXPORTED_SPEC_HASH: "abc123",
    }
    for field in ("name", "namespace", "uid", "resourceVersion", "generation", "finalizers"):
        assert metadata[field] == raw["metadata"][field]
    assert metadata["creationTimestamp"] == raw["metadata"]["creationTimestamp"]
    # The status write replaces .status whole: it must start from all of it.
    assert cached["status"] == raw["status"]
    assert cached["spec"] == raw["spec"]
    assert (cached["apiVersion"], cached["kind"]) == (raw["apiVersion"], raw["kind"])


def test_status_written_from_the_cached_object_loses_nothing(kube_cluster: KubeCluster) -> None:
    """The reconciler PUTs `{**cached, "status": …}` to /status: labels, annotations,
    managedFields and finalizers pruned from the cache stay on the server."""
    state = kube_cluster.state
    body = service_export("web", labels={"team": "shop"}, finalizers=["other.io/keep"])
    body["metadata"]["annotations"] = {LAST_APPLIED: "{}", ANNOTATION_EXPORTED_SINCE: "x"}
    body["metadata"]["managedFields"] = copy.deepcopy(MANAGED_FIELDS)
    body["spec"] = {"exportedLabels": {"tier": "web"}}
    state.create("serviceexports", "default", body)
    stored = state.get("serviceexports", "default", "web")
    assert stored is not None
    cached = transform_service_export(copy.deepcopy(stored))
    assert "labels" not in cached["metadata"] and "managedFields" not in cached["metadata"]

    condition = {
        "type": c.VALID,
        "status": "True",
        "reason": c.REASON_VALID,
        "message": "ok",
        "lastTransitionTime": "2026-01-01T00:00:00Z",
    }
    writer = ServiceExportClient(kube_cluster.api_client(), version="v1beta1")
    writer.replace_status({**cached, "status": {"conditions": [condition]}})

    after = state.get("serviceexports", "default", "web")
    assert after is not None
    assert after["status"] == {"conditions": [condition]}
    for field in ("labels", "annotations", "finalizers", "managedFields"):
        assert after["metadata"].get(field) == stored["metadata"].get(field), field
    assert after["spec"] == stored["spec"]


# -- hub record ---------------------------------------------------------------------------------


def test_hub_record_keeps_what_the_reconciler_reads() -> None:
    raw = hub_record(full_service())
    cached = transform_hub_record(copy.deepcopy(raw))
    assert record_key(cached) == record_key(raw) == "shop/web"
    full = InternalServiceExport.model_validate(raw)
    compact = InternalServiceExport.model_validate(cached)
    assert compact.spec == full.spec
    assert compact.metadata.resource_version == "4711"
    assert compact.metadata.annotations == {ANNOTATION_LAST_OBSERVED_RESOURCE_VERSION: "812"}
    verdict, expected = compact.condition(c.CONFLICT), full.condition(c.CONFLICT)
    assert verdict is not None and expected is not None
    assert (verdict.status, verdict.reason, verdict.message) == (
        expected.status,
        expected.reason,
        expected.message,
    )
    # Other conditions, timestamps and clusterState are never read.
    assert cached["status"] == {"conditions": [{k: verdict_raw(raw)[k] for k in KEPT}]}
    assert "creationTimestamp" not in cached["metadata"] and "labels" not in cached["metadata"]


KEPT = ("type", "status", "reason", "message")


def verdict_raw(record: dict[str, Any]) -> dict[str, Any]:
    return next(x for x in record["status"]["conditions"] if x["type"] == c.CONFLICT)


def test_hub_record_without_verdict_has_none() -> None:
    raw = hub_record(full_service())
    raw["status"] = {"conditions": []}
    compact = InternalServiceExport.model_validate(transform_hub_record(raw))
    assert compact.condition(c.CONFLICT) is None


# -- through the informers ------------------------------------------------------------------------


def test_informers_cache_the_transformed_objects_page_by_page(
    kube_cluster: KubeCluster, stop: threading.Event
) -> None:
    state = kube_cluster.state
    for i in range(5):
        state.create("services", "default", service(f"s{i}", labels={"app": f"s{i}"}))
        state.create("serviceexports", "default", service_export(f"s{i}", labels={"a": "b"}))
    api = kube_cluster.api_client()
    pages: list[int] = []

    def counting(obj: dict[str, Any]) -> dict[str, Any]:
        pages.append(state.count("list", "services"))
        return transform_service(obj)

    services = Informer(
        name="services",
        list_watch=ServiceListWatch(api, namespace=None, page_size=2),
        handler=Recorder(),
        transform=counting,
    )
    exports = Informer(
        name="exports",
        list_watch=ServiceExportListWatch(api, version="v1beta1", namespace=None, page_size=2),
        handler=Recorder(),
        transform=transform_service_export,
    )
    services.start(stop)
    exports.start(stop)
    assert services.wait_for_sync(30) and exports.wait_for_sync(30)
    # Transformed as each page arrived: the first items before the last page was read.
    assert pages[0] == 1 and pages[-1] == 3
    svc = services.get("default/s0")
    se = exports.get("default/s0")
    assert svc is not None and se is not None
    assert "labels" not in svc["metadata"] and "status" not in svc
    assert svc["spec"]["ports"][0]["port"] == 80
    assert "labels" not in se["metadata"] and se["kind"] == "ServiceExport"

    # Live events go through the same transform.
    state.create("services", "default", service("live", labels={"app": "live"}))
    live = wait_for(lambda: services.get("default/live"), what="the live Service")
    assert "labels" not in live["metadata"]
