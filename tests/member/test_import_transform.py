"""What the import informers cache (`member.transform.transform_import_object`): less memory,
yet every comparison the import reconcilers make comes out as on the full object, a user's
edit of a managed object still shows, and an update built from the cache loses nothing on
the server."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from member.imports.importspec import (
    create_body,
    desired_derived_service,
    desired_service_import,
    matches,
    overlay,
)
from member.kube.importobjects import ImportObjectClient
from member.transform import PackedEndpoints, endpoint_count, transform_import_object, unpacked
from shared.models import ServiceImport
from tests.kube.fixtures import KubeCluster

NS = "shop"
MANAGED = {"app.kubernetes.io/managed-by": "mcsync"}
BOOKKEEPING = {
    "creationTimestamp": "2026-01-01T00:00:00Z",
    "generation": 4,
    "managedFields": [{"manager": "mcsync-agent", "operation": "Update", "fieldsV1": {}}],
}
IMPORTED = ServiceImport.model_validate(
    {
        "metadata": {"name": "web", "namespace": NS, "resourceVersion": "5"},
        "spec": {
            "type": "ClusterSetIP",
            "ports": [{"name": "http", "port": 80}],
            "ipFamilies": ["IPv4"],
            "labels": {"tier": "web"},
        },
        "status": {
            "clusters": [{"cluster": "east"}],
            "ports": [{"name": "http", "port": 80, "clusters": ["east"]}],
        },
    }
)
API_VERSION = "multicluster.x-k8s.io/v1beta1"


def mirrored_slice(owner: dict[str, Any], *addresses: str) -> dict[str, Any]:
    """A mirrored EndpointSlice as the agent states it, owned by the derived Service."""
    return {
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": {
            "name": f"{owner['metadata']['name']}-0123456789",
            "namespace": NS,
            "labels": {**MANAGED, "kubernetes.io/service-name": owner["metadata"]["name"]},
            "ownerReferences": [
                {
                    "apiVersion": "v1",
                    "kind": "Service",
                    "name": owner["metadata"]["name"],
                    "uid": owner["metadata"]["uid"],
                    "controller": True,
                }
            ],
        },
        "addressType": "IPv4",
        "ports": [{"name": "http", "protocol": "TCP", "port": 8080}],
        "endpoints": [
            {
                "addresses": [a],
                "conditions": {"ready": True, "serving": True, "terminating": False},
                "zone": "z1",
            }
            for a in addresses
        ],
    }


@pytest.fixture
def imported(kube_cluster: KubeCluster) -> dict[str, Any]:
    """The three objects of shop/web as the agent creates them, and how it stated them."""
    kube_cluster.state.create_namespace(NS)
    api = kube_cluster.api_client()
    clients = {
        kind: ImportObjectClient(api, kind=kind)
        for kind in ("ServiceImport", "Service", "EndpointSlice")
    }
    si_want = desired_service_import(IMPORTED, api_version=API_VERSION, derived_service=None)
    si = clients["ServiceImport"].create(create_body(si_want))
    svc_want = desired_derived_service(IMPORTED, owner=si)
    svc = clients["Service"].create(create_body(svc_want))
    slice_want = mirrored_slice(svc, "10.0.0.1", "10.0.0.2")
    eps = clients["EndpointSlice"].create(create_body(slice_want))
    return {
        "clients": clients,
        "ServiceImport": (si, si_want),
        "Service": (svc, svc_want),
        "EndpointSlice": (eps, slice_want),
    }


@pytest.mark.parametrize("kind", ["ServiceImport", "Service", "EndpointSlice"])
def test_only_the_servers_bookkeeping_goes(imported: dict[str, Any], kind: str) -> None:
    stored = copy.deepcopy(imported[kind][0])
    stored["metadata"].update(copy.deepcopy(BOOKKEEPING))
    stored["metadata"]["finalizers"] = ["example.com/keep"]
    stored["metadata"]["annotations"] = {"note": "a user's"}

    cached = transform_import_object(copy.deepcopy(stored))

    expected = copy.deepcopy(stored)
    for field in BOOKKEEPING:
        del expected["metadata"][field]
    if kind == "Service":
        expected.pop("status", None)  # ignored by an update of the Service itself
    assert unpacked(cached) == expected
    assert transform_import_object(cached) == cached  # idempotent
    if kind == "EndpointSlice":  # held packed, counted without unpacking
        assert isinstance(cached["endpoints"], PackedEndpoints)
        assert endpoint_count(cached) == endpoint_count(stored) == 2


@pytest.mark.parametrize("kind", ["ServiceImport", "Service", "EndpointSlice"])
def test_the_cached_object_matches_what_the_agent_stated(
    imported: dict[str, Any], kind: str
) -> None:
    stored, desired = imported[kind]
    assert matches(desired, unpacked(transform_import_object(copy.deepcopy(stored))))


def _edit(kind: str, obj: dict[str, Any]) -> None:
    """A user's `kubectl edit` of one field the agent states."""
    if kind == "ServiceImport":
        obj["metadata"]["labels"]["tier"] = "db"
    elif kind == "Service":
        obj["spec"]["ports"][0]["port"] = 81
    else:
        obj["endpoints"][1]["conditions"]["ready"] = False


@pytest.mark.parametrize("kind", ["ServiceImport", "Service", "EndpointSlice"])
def test_a_users_edit_still_shows_in_the_cache(imported: dict[str, Any], kind: str) -> None:
    stored, desired = imported[kind]
    edited = copy.deepcopy(stored)
    _edit(kind, edited)
    assert not matches(desired, unpacked(transform_import_object(edited)))


def test_updates_built_from_the_cache_lose_nothing_on_the_server(
    imported: dict[str, Any], kube_cluster: KubeCluster
) -> None:
    """The reconcilers PUT `overlay(cached, desired)`: what the API server allocated (the
    Service's clusterIPs) and what someone else added (a finalizer, an annotation) stay."""
    state = kube_cluster.state
    svc, svc_want = imported["Service"]
    eps, _ = imported["EndpointSlice"]
    for resource, obj in (("services", svc), ("endpointslices", eps)):
        found = state.get(resource, NS, obj["metadata"]["name"])
        assert found is not None
        mine = copy.deepcopy(found)
        mine["metadata"]["finalizers"] = ["example.com/keep"]
        mine["metadata"]["annotations"] = {"note": "a user's"}
        state.update(resource, NS, mine)
    stored_svc = state.get("services", NS, svc["metadata"]["name"])
    stored_eps = state.get("endpointslices", NS, eps["metadata"]["name"])
    assert stored_svc is not None and stored_eps is not None

    svc_want = copy.deepcopy(svc_want)
    svc_want["spec"]["ports"].append(
        {"name": "https", "port": 443, "protocol": "TCP", "appProtocol": None}
    )
    imported["clients"]["Service"].replace(
        overlay(transform_import_object(copy.deepcopy(stored_svc)), svc_want)
    )
    slice_want = mirrored_slice(svc, "10.0.0.3")
    imported["clients"]["EndpointSlice"].replace(
        overlay(unpacked(transform_import_object(copy.deepcopy(stored_eps))), slice_want)
    )

    after_svc = state.get("services", NS, svc["metadata"]["name"])
    after_eps = state.get("endpointslices", NS, eps["metadata"]["name"])
    assert after_svc is not None and after_eps is not None
    assert [p["port"] for p in after_svc["spec"]["ports"]] == [80, 443]
    assert [e["addresses"] for e in after_eps["endpoints"]] == [["10.0.0.3"]]
    for after, before in ((after_svc, stored_svc), (after_eps, stored_eps)):
        for field in ("finalizers", "annotations", "ownerReferences", "uid", "labels"):
            assert after["metadata"].get(field) == before["metadata"].get(field), field
    for field in ("clusterIP", "clusterIPs", "ipFamilies", "ipFamilyPolicy"):
        assert after_svc["spec"][field] == stored_svc["spec"][field], field
