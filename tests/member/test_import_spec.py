"""The exact objects of docs/reference.md#import-path, one table row per outcome
(`member.imports.importspec`)."""

from __future__ import annotations

import hashlib
from typing import Any

import pytest

from member.imports.importspec import (
    OPTIONAL_IMPORT_FIELDS,
    SourceSlice,
    create_body,
    derived_service_name,
    desired_derived_service,
    desired_service_import,
    desired_service_import_status,
    desired_slices,
    matches,
    mirrored_body,
    mirrored_slice,
    mirrored_slice_name,
    ordered_ips,
    overlay,
)
from member.kube import importobjects
from member.kube.client import ApiException
from shared.models import EndpointSliceExport, ServiceImport, to_wire

API = "multicluster.x-k8s.io/v1beta1"
OWNER = {"apiVersion": API, "metadata": {"name": "hello", "uid": "si-uid"}}
SVC_OWNER = {"metadata": {"name": derived_service_name("hello"), "uid": "svc-uid"}}


def imported(**spec: Any) -> ServiceImport:
    status = spec.pop("status", None) or {
        "clusters": [{"cluster": "b"}, {"cluster": "a"}],
        "ports": [{"name": "http", "protocol": "TCP", "port": 80, "clusters": ["a", "b"]}],
    }
    body = {
        "type": "ClusterSetIP",
        "ports": [{"name": "http", "protocol": "TCP", "port": 80}],
        **spec,
    }
    return ServiceImport.model_validate(
        {"metadata": {"name": "hello", "namespace": "demo"}, "spec": body, "status": status}
    )


def source(cluster: str, name: str, ports: list[dict[str, Any]], **extra: Any) -> SourceSlice:
    return SourceSlice.of(source_export(cluster, name, ports, **extra))


def source_export(
    cluster: str, name: str, ports: list[dict[str, Any]], **extra: Any
) -> EndpointSliceExport:
    return EndpointSliceExport.model_validate(
        {
            "metadata": {"name": name, "namespace": extra.pop("namespace", "demo")},
            "spec": {
                "serviceName": extra.pop("service", "hello"),
                "clusterId": cluster,
                "addressType": "IPv4",
                "ports": ports,
                "endpoints": [
                    {"addresses": ["10.0.0.1"], "conditions": {"ready": True}, "zone": "z1"}
                ],
            },
        }
    )


def test_derived_name_is_sha256_prefix() -> None:
    assert derived_service_name("hello") == "mcsync-" + hashlib.sha256(b"hello").hexdigest()[:10]


def test_mirrored_slice_names_are_deterministic_distinct_and_short() -> None:
    a = mirrored_slice_name("x" * 63, "a", "hello-abcde")
    assert a == mirrored_slice_name("x" * 63, "a", "hello-abcde")
    assert a != mirrored_slice_name("x" * 63, "b", "hello-abcde")
    assert len(a) <= 63 and a.startswith(derived_service_name("x" * 63) + "-")


@pytest.mark.parametrize(
    ("spec", "svc", "expected"),
    [
        pytest.param({}, None, {"type": "ClusterSetIP", "ips": None}, id="no derived Service yet"),
        pytest.param(
            {"ipFamilies": ["IPv6", "IPv4"]},
            {"spec": {"clusterIPs": ["10.1.0.5", "fd00::5"]}},
            {"ips": ["fd00::5", "10.1.0.5"], "ipFamilies": ["IPv6", "IPv4"]},
            id="ips in ipFamilies order",
        ),
        pytest.param(
            {"type": "Headless"},
            {"spec": {"clusterIP": "None", "clusterIPs": ["None"]}},
            {"type": "Headless", "ips": None},
            id="headless has no ips",
        ),
        pytest.param(
            {
                "sessionAffinity": "ClientIP",
                "sessionAffinityConfig": {"clientIP": {"timeoutSeconds": 30}},
            },
            None,
            {
                "sessionAffinity": "ClientIP",
                "sessionAffinityConfig": {"clientIP": {"timeoutSeconds": 30}},
            },
            id="affinity",
        ),
        pytest.param(
            {"internalTrafficPolicy": "Local", "trafficDistribution": "PreferClose"},
            None,
            {"internalTrafficPolicy": "Local", "trafficDistribution": "PreferClose"},
            id="traffic policies",
        ),
    ],
)
def test_service_import_spec(
    spec: dict[str, Any], svc: dict[str, Any] | None, expected: dict[str, Any]
) -> None:
    desired = desired_service_import(imported(**spec), api_version=API, derived_service=svc)
    assert desired["apiVersion"] == API and desired["kind"] == "ServiceImport"
    assert desired["metadata"]["name"] == "hello" and desired["metadata"]["namespace"] == "demo"
    assert desired["spec"]["ports"] == [
        {"name": "http", "protocol": "TCP", "port": 80, "appProtocol": None}
    ]
    for field, value in expected.items():
        assert desired["spec"].get(field) == value, field


def test_service_import_fields_the_served_version_lacks_are_not_stated() -> None:
    desired = desired_service_import(
        imported(internalTrafficPolicy="Local"),
        api_version=API,
        derived_service=None,
        optional_fields=frozenset(),
    )
    assert "internalTrafficPolicy" not in desired["spec"]
    assert "trafficDistribution" not in desired["spec"]


def test_service_import_labels_are_the_winners_plus_managed_by() -> None:
    desired = desired_service_import(
        imported(labels={"team": "a"}, annotations={"note": "x"}),
        api_version=API,
        derived_service=None,
    )
    assert desired["metadata"]["labels"] == {"team": "a", "app.kubernetes.io/managed-by": "mcsync"}
    assert desired["metadata"]["annotations"] == {"note": "x"}


def test_service_import_status_lists_the_exporting_clusters() -> None:
    assert desired_service_import_status(imported()) == {
        "clusters": [{"cluster": "a"}, {"cluster": "b"}]
    }


def test_a_defaulted_client_ip_timeout_is_not_rewritten() -> None:
    desired = desired_derived_service(imported(sessionAffinity="ClientIP"), owner=OWNER)
    defaulted = {
        **desired,
        "spec": {
            **create_body(desired)["spec"],
            "sessionAffinityConfig": {"clientIP": {"timeoutSeconds": 10800}},
        },
    }
    assert matches(desired, defaulted)
    desired = desired_derived_service(imported(), owner=OWNER)  # affinity None: config goes
    assert not matches(
        desired,
        {
            **defaulted,
            "spec": {
                **defaulted["spec"],
                "sessionAffinity": "None",
            },
        },
    )


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        pytest.param({}, {"type": "ClusterIP", "sessionAffinity": "None"}, id="ClusterSetIP"),
        pytest.param(
            {"type": "Headless", "sessionAffinity": "ClientIP"},
            {"clusterIP": "None", "sessionAffinity": "None"},
            id="headless: no affinity",
        ),
        pytest.param(
            {"ipFamilies": ["IPv4"]},
            {"ipFamilies": ["IPv4"], "ipFamilyPolicy": "SingleStack"},
            id="single stack",
        ),
        pytest.param(
            {"ipFamilies": ["IPv6", "IPv4"]},
            {"ipFamilies": ["IPv6", "IPv4"], "ipFamilyPolicy": "RequireDualStack"},
            id="dual stack",
        ),
        pytest.param(
            {"sessionAffinity": "ClientIP"},
            {"sessionAffinity": "ClientIP"},
            id="affinity on ClusterSetIP",
        ),
        pytest.param(
            {"internalTrafficPolicy": "Local", "trafficDistribution": "PreferClose"},
            {"internalTrafficPolicy": "Local", "trafficDistribution": "PreferClose"},
            id="traffic policies",
        ),
    ],
)
def test_derived_service(spec: dict[str, Any], expected: dict[str, Any]) -> None:
    desired = desired_derived_service(imported(**spec), owner=OWNER)
    meta = desired["metadata"]
    assert meta["name"] == derived_service_name("hello") and meta["namespace"] == "demo"
    assert meta["labels"] == {
        "multicluster.kubernetes.io/service-name": "hello",
        "app.kubernetes.io/managed-by": "mcsync",
    }
    assert meta["ownerReferences"][0] | {} == {
        "apiVersion": API,
        "kind": "ServiceImport",
        "name": "hello",
        "uid": "si-uid",
        "controller": True,
        "blockOwnerDeletion": False,
    }
    body = create_body(desired)["spec"]
    assert "selector" not in body
    for field, value in expected.items():
        assert body.get(field) == value, field


def test_slices_mirror_each_source_with_the_mcs_labels() -> None:
    ports = [{"name": "http", "protocol": "TCP", "port": 8080}]
    found = desired_slices(
        imported(), [source("a", "hello-1", ports), source("b", "hello-1", ports)], owner=SVC_OWNER
    )
    assert len(found) == 2
    name = mirrored_slice_name("hello", "a", "hello-1")
    mirrored = mirrored_body(found[name])
    assert mirrored["metadata"]["labels"] == {
        "kubernetes.io/service-name": derived_service_name("hello"),
        "multicluster.kubernetes.io/service-name": "hello",
        "multicluster.kubernetes.io/source-cluster": "a",
        "endpointslice.kubernetes.io/managed-by": "mcsync.io",
        "app.kubernetes.io/managed-by": "mcsync",
    }
    assert mirrored["metadata"]["ownerReferences"][0]["kind"] == "Service"
    assert mirrored["metadata"]["ownerReferences"][0]["uid"] == "svc-uid"
    assert mirrored["addressType"] == "IPv4"
    assert mirrored["endpoints"] == [
        {"addresses": ["10.0.0.1"], "conditions": {"ready": True}, "zone": "z1"}
    ]


@pytest.mark.parametrize(
    ("served", "slice_ports", "kept"),
    [
        pytest.param(["a"], [{"name": "http", "port": 8080}], ["http"], id="serves the port"),
        pytest.param(["b"], [{"name": "http", "port": 8080}], None, id="serves none: no slice"),
        pytest.param(
            ["a"],
            [{"name": "http", "port": 8080}, {"name": "extra", "port": 9}],
            ["http"],
            id="ports cut to those served",
        ),
    ],
)
def test_slice_ports_are_those_the_source_serves(
    served: list[str], slice_ports: list[dict[str, Any]], kept: list[str] | None
) -> None:
    status = {
        "clusters": [{"cluster": "a"}, {"cluster": "b"}],
        "ports": [{"name": "http", "port": 80, "clusters": served}],
    }
    found = desired_slices(
        imported(status=status), [source("a", "s1", slice_ports)], owner=SVC_OWNER
    )
    if kept is None:
        assert found == {}
    else:
        (only,) = found.values()
        assert [p["name"] for p in mirrored_body(only)["ports"]] == kept


def test_slices_of_another_service_are_ignored() -> None:
    other = source("a", "s", [], service="other")
    assert desired_slices(imported(), [other], owner=SVC_OWNER) == {}


def test_a_source_slice_is_held_compactly_and_mirrored_exactly_as_before() -> None:
    """`SourceSlice` keeps what a mirrored slice states; the body is the one the wire dict
    of the export gave (endpoints as `to_wire` dumps them, defaults and all)."""
    ports = [{"name": "http", "port": 8080, "appProtocol": "h2c"}]
    export = source_export("a", "hello-1", ports)
    held = SourceSlice.of(export)
    assert held.mirrored == mirrored_slice_name("hello", "a", "hello-1")
    want = mirrored_slice(imported(), held, owner=SVC_OWNER)
    assert want is not None
    body = mirrored_body(want)
    assert body["endpoints"] == [to_wire(e) for e in export.spec.endpoints]
    assert body["ports"] == [
        {"name": "http", "protocol": "TCP", "port": 8080, "appProtocol": "h2c"}
    ]
    assert create_body(body)["ports"][0]["appProtocol"] == "h2c"


@pytest.mark.parametrize(
    ("change", "equal"),
    [
        pytest.param({}, True, id="the same source: equal tuples"),
        pytest.param({"cluster": "b"}, False, id="another cluster"),
        pytest.param({"address": "10.0.0.2"}, False, id="an endpoint moved"),
    ],
)
def test_desired_slices_compare_as_tuples(change: dict[str, Any], equal: bool) -> None:
    ports = [{"name": "http", "port": 8080}]
    first = source("a", "hello-1", ports)
    export = source_export(change.get("cluster", "a"), "hello-1", ports)
    if "address" in change:
        export.spec.endpoints[0].addresses = [change["address"]]
    second = SourceSlice.of(export)
    a = mirrored_slice(imported(), first, owner=SVC_OWNER)
    b = mirrored_slice(imported(), second, owner=SVC_OWNER)
    assert (a == b) is equal


def test_ordered_ips_of_no_service_is_empty() -> None:
    assert ordered_ips(None, ["IPv4"]) == []


@pytest.mark.parametrize(
    ("desired", "existing", "equal"),
    [
        pytest.param({"a": 1}, {"a": 1, "defaulted": 2}, True, id="server defaults ignored"),
        pytest.param({"a": None}, {"a": 1}, False, id="a field we dropped must go"),
        pytest.param({"a": None}, {}, True, id="absent as wanted"),
        pytest.param(
            {"labels": {"x": "1"}},
            {"labels": {"x": "1", "y": "2"}},
            False,
            id="labels compared whole",
        ),
        pytest.param(
            {"ports": [{"port": 80}]},
            {"ports": [{"port": 80, "targetPort": 80}]},
            True,
            id="list elements compared by what we state",
        ),
        pytest.param({"ports": [{"port": 80}]}, {"ports": []}, False, id="list lengths"),
    ],
)
def test_matches(desired: dict[str, Any], existing: dict[str, Any], equal: bool) -> None:
    assert matches(desired, existing) is equal


def test_overlay_keeps_server_fields_and_drops_what_we_removed() -> None:
    existing = {
        "metadata": {"name": "s", "uid": "u", "resourceVersion": "7", "labels": {"old": "1"}},
        "spec": {
            "clusterIP": "10.0.0.9",
            "trafficDistribution": "PreferClose",
            "ports": [{"name": "http", "port": 80, "targetPort": 8080}],
        },
    }
    desired = {
        "metadata": {"labels": {"new": "1"}},
        "spec": {"trafficDistribution": None, "ports": [{"name": "http", "port": 81}]},
    }
    body = overlay(existing, desired)
    assert body["metadata"] == {
        "name": "s",
        "uid": "u",
        "resourceVersion": "7",
        "labels": {"new": "1"},
    }
    assert body["spec"] == {
        "clusterIP": "10.0.0.9",
        "ports": [{"name": "http", "port": 81, "targetPort": 8080}],
    }
    assert matches(desired, body)


def _crd(version: str, fields: list[str]) -> dict[str, Any]:
    spec: dict[str, Any] = {"properties": {f: {} for f in fields}} if fields else {}
    schema = {"openAPIV3Schema": {"properties": {"spec": spec}}} if fields else {}
    return {"spec": {"versions": [{"name": version, "schema": schema}]}}


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        pytest.param(_crd("v1alpha1", ["type", "ports"]), frozenset(), id="an old CRD"),
        pytest.param(
            _crd("v1alpha1", ["type", "internalTrafficPolicy"]),
            frozenset({"internalTrafficPolicy"}),
            id="one of the two",
        ),
        pytest.param(_crd("v1alpha1", []), OPTIONAL_IMPORT_FIELDS, id="no schema: all"),
        pytest.param(_crd("v1beta1", ["type"]), OPTIONAL_IMPORT_FIELDS, id="other version"),
        pytest.param(
            ApiException(status=403, reason="Forbidden"),
            OPTIONAL_IMPORT_FIELDS,
            id="CRDs not readable: all",
        ),
    ],
)
def test_served_import_fields(
    monkeypatch: pytest.MonkeyPatch, answer: Any, expected: frozenset[str]
) -> None:
    def request_json(*_args: Any, **_kwargs: Any) -> Any:
        if isinstance(answer, Exception):
            raise answer
        return answer

    monkeypatch.setattr(importobjects, "request_json", request_json)
    api: Any = None
    assert importobjects.served_import_fields(api, "v1alpha1", OPTIONAL_IMPORT_FIELDS) == expected
