"""Table-driven tests of `member.export.exportspec`: validation reasons and the exported spec."""

from __future__ import annotations

import copy
from datetime import UTC, datetime
from typing import Any

import pytest

from member.export.exportspec import (
    InvalidExport,
    derive_export,
    export_fingerprint,
    exported_view,
    same_exported_spec,
    validate,
)
from shared import conditions as c
from shared.constants import DEFAULT_DENY_NAMESPACES

SINCE = datetime(2026, 1, 2, 3, 4, 5, 678000, tzinfo=UTC)


def service(**spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"type": "ClusterIP", "clusterIP": "10.0.0.1"}
    body.update(spec)
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {
            "name": "web",
            "namespace": "shop",
            "uid": "svc-uid-1",
            "resourceVersion": "42",
            "generation": 3,
        },
        "spec": {k: v for k, v in body.items() if v is not None},
    }


def service_export(**spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "multicluster.x-k8s.io/v1alpha1",
        "kind": "ServiceExport",
        "metadata": {
            "name": "web",
            "namespace": "shop",
            "creationTimestamp": "2026-01-01T00:00:00Z",
            "generation": 1,
        },
        "spec": spec,
    }


def derive(svc: dict[str, Any], se: dict[str, Any] | None = None) -> Any:
    return derive_export(
        cluster_id="member-1",
        service=svc,
        service_export=se or service_export(),
        exported_since=SINCE,
    )


# -- validation ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("namespace", "svc", "reason", "in_message"),
    [
        ("shop", service(), c.REASON_VALID, "valid for export"),
        ("shop", service(type="NodePort"), c.REASON_VALID, "valid"),
        ("shop", service(type="LoadBalancer"), c.REASON_VALID, "valid"),
        ("shop", service(clusterIP="None"), c.REASON_VALID, "valid"),
        ("shop", {"metadata": {"name": "web"}}, c.REASON_VALID, "valid"),  # type defaults
        ("shop", None, c.REASON_NO_SERVICE, "create a Service"),
        ("shop", service(type="ExternalName", clusterIP=None), c.REASON_INVALID_SERVICE_TYPE,
         "ExternalName"),
        ("kube-system", service(), c.REASON_NAMESPACE_NOT_ALLOWED, "deny list"),
        ("kube-public", None, c.REASON_NAMESPACE_NOT_ALLOWED, "another namespace"),
    ],
)
def test_validate(namespace: str, svc: dict[str, Any] | None, reason: str, in_message: str) -> None:
    result = validate(
        namespace=namespace, name="web", service=svc, deny_namespaces=DEFAULT_DENY_NAMESPACES
    )
    assert result.reason == reason
    assert result.valid is (reason == c.REASON_VALID)
    assert result.status == (c.TRUE if result.valid else c.FALSE)
    assert in_message in result.message
    # One sentence a user can act on.
    assert result.message.endswith(".") and result.message.count(". ") == 0


def test_deny_list_is_configurable() -> None:
    allowed = validate(namespace="kube-system", name="dns", service=service(), deny_namespaces=())
    assert allowed.valid
    denied = validate(namespace="shop", name="web", service=service(), deny_namespaces=["shop"])
    assert denied.reason == c.REASON_NAMESPACE_NOT_ALLOWED


# -- derivation ------------------------------------------------------------------------------


def test_ports_keep_only_exported_fields() -> None:
    svc = service(
        type="NodePort",
        ports=[
            {"name": "http", "protocol": "TCP", "port": 80, "targetPort": 8080, "nodePort": 30080,
             "appProtocol": "http"},
            {"name": "dns", "protocol": "UDP", "port": 53, "targetPort": "dns"},
        ],
    )
    export = derive(svc)
    wire = exported_view(export.spec)
    assert wire["ports"] == [
        {"name": "http", "protocol": "TCP", "port": 80, "appProtocol": "http"},
        {"name": "dns", "protocol": "UDP", "port": 53},
    ]
    assert export.spec.type == "ClusterSetIP"


def test_headless_iff_cluster_ip_none() -> None:
    assert derive(service(clusterIP="None")).spec.type == "Headless"
    assert derive(service(clusterIP="10.1.2.3")).spec.type == "ClusterSetIP"
    assert derive(service(clusterIP=None)).spec.type == "ClusterSetIP"


def test_service_reference() -> None:
    export = derive(service())
    ref = export.spec.service_reference
    assert (ref.cluster_id, ref.kind) == ("member-1", "Service")
    assert (ref.namespace, ref.name) == ("shop", "web")
    assert (ref.uid, ref.resource_version, ref.generation) == ("svc-uid-1", "42", 3)
    assert ref.exported_since == SINCE
    assert ref.export_creation_timestamp == datetime(2026, 1, 1, tzinfo=UTC)
    assert export.metadata.name == "web" and export.metadata.namespace == "shop"


def test_affinity_policies_families_copied() -> None:
    svc = service(
        sessionAffinity="ClientIP",
        sessionAffinityConfig={"clientIP": {"timeoutSeconds": 600}},
        internalTrafficPolicy="Local",
        trafficDistribution="PreferClose",
        ipFamilies=["IPv4", "IPv6"],
    )
    spec = derive(svc).spec
    assert spec.session_affinity == "ClientIP"
    assert spec.session_affinity_config is not None
    assert spec.session_affinity_config.client_ip is not None
    assert spec.session_affinity_config.client_ip.timeout_seconds == 600
    assert spec.internal_traffic_policy == "Local"
    assert spec.traffic_distribution == "PreferClose"
    assert spec.ip_families == ["IPv4", "IPv6"]


def test_exported_labels_and_annotations_come_from_the_service_export() -> None:
    se = service_export(
        exportedLabels={"team": "shop"}, exportedAnnotations={"example.com/owner": "alice"}
    )
    spec = derive(service(), se).spec
    assert spec.exported_labels == {"team": "shop"}
    assert spec.exported_annotations == {"example.com/owner": "alice"}


@pytest.mark.parametrize(
    "svc",
    [
        service(ports=None),  # no ports at all (headless, selector-less)
        service(ports=[{"port": 80}]),  # single unnamed port, protocol defaulted
        {"metadata": {"name": "web", "namespace": "shop", "resourceVersion": "1"}},  # no spec
        service(ports=[{"port": 80, "protocol": None, "name": None}]),
    ],
)
def test_odd_but_legal_shapes_derive(svc: dict[str, Any]) -> None:
    export = derive(svc)
    for port in export.spec.ports:
        assert port.protocol == "TCP"


@pytest.mark.parametrize(
    ("svc", "se", "names"),
    [
        (service(ports=[{"port": 0}]), None, "ports.0.port"),
        (service(ports=[{"port": 80}, {"port": 81}]), None, "must be named"),
        (service(ports=[{"name": "a", "port": 80, "protocol": "HTTP"}]), None, "protocol"),
        (service(ports="eighty"), None, "not a list"),
        (service(ports=["eighty"]), None, "not an object"),
        (service(internalTrafficPolicy="Sideways"), None, "internalTrafficPolicy"),
        (service(), service_export(exportedLabels={"bad key!": "x"}), "exportedLabels"),
        ({"metadata": {"name": "web", "namespace": "shop"}}, None, "resourceVersion"),
    ],
)
def test_unexportable_shapes_raise_a_readable_error(
    svc: dict[str, Any], se: dict[str, Any] | None, names: str
) -> None:
    with pytest.raises(InvalidExport) as info:
        derive(svc, se)
    message = str(info.value)
    assert names in message
    assert message.startswith(("Service shop/web", "ServiceExport shop/web"))


def test_service_export_without_creation_timestamp() -> None:
    se = service_export()
    del se["metadata"]["creationTimestamp"]
    with pytest.raises(InvalidExport, match="creationTimestamp"):
        derive(service(), se)


# -- what "changes the exported spec" --------------------------------------------------------


def test_volatile_fields_do_not_change_the_fingerprint() -> None:
    base = derive(service(ports=[{"name": "http", "port": 80}]))
    touched = copy.deepcopy(service(ports=[{"name": "http", "port": 80}]))
    touched["metadata"]["resourceVersion"] = "99"
    touched["metadata"]["generation"] = 7
    other = derive_export(
        cluster_id="member-1",
        service=touched,
        service_export=service_export(),
        exported_since=datetime(2030, 1, 1, tzinfo=UTC),
    )
    assert export_fingerprint(base.spec) == export_fingerprint(other.spec)
    assert same_exported_spec(base.spec, other.spec)


@pytest.mark.parametrize(
    "change",
    [
        lambda s: s["spec"].update(ports=[{"name": "http", "port": 8080}]),
        lambda s: s["spec"].update(clusterIP="None"),
        lambda s: s["spec"].update(sessionAffinity="ClientIP"),
        lambda s: s["spec"].update(ipFamilies=["IPv6"]),
        lambda s: s["metadata"].update(uid="recreated"),
    ],
)
def test_exported_changes_change_the_fingerprint(change: Any) -> None:
    svc = service(ports=[{"name": "http", "port": 80}])
    base = derive(svc)
    changed = copy.deepcopy(svc)
    change(changed)
    other = derive(changed)
    assert export_fingerprint(base.spec) != export_fingerprint(other.spec)
    assert not same_exported_spec(base.spec, other.spec)


def test_target_port_change_is_not_an_exported_change() -> None:
    a = derive(service(ports=[{"name": "http", "port": 80, "targetPort": 8080}]))
    b = derive(service(ports=[{"name": "http", "port": 80, "targetPort": 9090}]))
    assert export_fingerprint(a.spec) == export_fingerprint(b.spec)


def test_exported_labels_change_the_fingerprint() -> None:
    a = derive(service(), service_export(exportedLabels={"a": "1"}))
    b = derive(service(), service_export(exportedLabels={"a": "2"}))
    assert export_fingerprint(a.spec) != export_fingerprint(b.spec)
