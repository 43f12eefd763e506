"""What the EndpointSlice informer caches (`transform_endpointslice`): exactly what the slice
export sends, so the EndpointSliceExport built from the cached slice equals the one built
from the full object, and nothing local to the cluster is kept."""

from __future__ import annotations

import copy
from typing import Any

from member.export.sliceindex import service_key
from member.export.slicewire import slice_export
from member.transform import transform_endpointslice
from shared.constants import LABEL_ENDPOINTSLICE_MANAGED_BY, LABEL_SERVICE_NAME
from shared.models import to_wire


def full_slice() -> dict[str, Any]:
    """An EndpointSlice as the API server answers it, with everything that is not sent."""
    return {
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": {
            "name": "web-7xk2p",
            "namespace": "shop",
            "uid": "0b3c3f5e-1111-2222-3333-444455556666",
            "resourceVersion": "912",
            "generation": 4,
            "generateName": "web-",
            "creationTimestamp": "2026-01-01T00:00:00Z",
            "labels": {
                LABEL_SERVICE_NAME: "web",
                LABEL_ENDPOINTSLICE_MANAGED_BY: "endpointslice-controller.k8s.io",
                "app": "web",
            },
            "annotations": {"endpoints.kubernetes.io/last-change-trigger-time": "2026-01-01"},
            "ownerReferences": [{"apiVersion": "v1", "kind": "Service", "name": "web"}],
            "managedFields": [{"manager": "kube-controller-manager", "operation": "Update"}],
        },
        "addressType": "IPv6",
        "ports": [{"name": "grpc", "protocol": "TCP", "port": 9090, "appProtocol": "grpc"}],
        "endpoints": [
            {
                "addresses": ["fd00::1"],
                "conditions": {"ready": True, "serving": True, "terminating": False},
                "hostname": "web-0",
                "zone": "eu-1a",
                "nodeName": "node-1",
                "targetRef": {"kind": "Pod", "namespace": "shop", "name": "web-0", "uid": "p"},
                "hints": {"forZones": [{"name": "eu-1a"}]},
                "deprecatedTopology": {"kubernetes.io/hostname": "node-1"},
            }
        ],
    }


def test_slice_keeps_exactly_what_is_sent() -> None:
    full = full_slice()
    cached = transform_endpointslice(copy.deepcopy(full))

    assert cached == {
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": {
            "name": "web-7xk2p",
            "namespace": "shop",
            "resourceVersion": "912",
            "labels": {
                LABEL_SERVICE_NAME: "web",
                LABEL_ENDPOINTSLICE_MANAGED_BY: "endpointslice-controller.k8s.io",
            },
        },
        "addressType": "IPv6",
        "ports": [{"name": "grpc", "protocol": "TCP", "port": 9090, "appProtocol": "grpc"}],
        "endpoints": [
            {
                "addresses": ["fd00::1"],
                "conditions": {"ready": True, "serving": True, "terminating": False},
                "hostname": "web-0",
                "zone": "eu-1a",
            }
        ],
    }
    assert to_wire(slice_export(cluster_id="c", obj=cached)) == to_wire(
        slice_export(cluster_id="c", obj=full)
    )
    assert service_key(cached) == service_key(full) == "shop/web"


def test_slice_transform_is_idempotent_and_keeps_odd_shapes_reportable() -> None:
    once = transform_endpointslice(full_slice())
    assert transform_endpointslice(copy.deepcopy(once)) == once

    odd = full_slice()
    odd["ports"] = None
    odd["endpoints"] = [{"addresses": ["fd00::2"]}, "not an endpoint"]
    cached = transform_endpointslice(odd)
    assert cached["ports"] is None
    assert cached["endpoints"] == [{"addresses": ["fd00::2"]}, "not an endpoint"]


def test_a_slice_being_deleted_keeps_the_mark() -> None:
    obj = full_slice()
    obj["metadata"]["deletionTimestamp"] = "2026-01-02T00:00:00Z"
    assert transform_endpointslice(obj)["metadata"]["deletionTimestamp"] == "2026-01-02T00:00:00Z"
