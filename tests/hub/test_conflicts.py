"""Case-by-case tests of the pure conflict judge (hub/conflicts.py, docs/reference.md#conflicts).

Table-driven, the way fleet-networking tests its conflict rules: plain export specs in,
verdicts out. Each case names the exports (cluster, age, the fields that differ from a
default spec) and the verdicts users rely on: who wins, the key's reasons, each export's
own reasons and overridden fields, and the ServiceImport the key produces (its ports and
which clusters serve each). The peers' port cases (the MCS conformance suite, cilium,
Submariner Lighthouse) are rows of their own, each naming the test it mirrors. Hypothesis
properties at the end check the rules that must hold for every set of exports.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hub.conflicts import ExportVerdict, KeyJudgement, judge, precedence_key
from shared import conditions
from shared.models import Condition, InternalServiceExportSpec

T0 = datetime(2026, 3, 1, 9, 30, 0, tzinfo=UTC)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def port(
    number: int, name: str = "", protocol: str = "TCP", app: str | None = None
) -> dict[str, Any]:
    body: dict[str, Any] = {"name": name, "protocol": protocol, "port": number}
    if app is not None:
        body["appProtocol"] = app
    return body


HTTP = port(80, "http")
HTTPS = port(443, "https")
PC = ("PortConflict",)


def served(p: dict[str, Any], *clusters: str) -> dict[str, Any]:
    """A port of the import as `status.ports` shows it: the port and the clusters serving it."""
    return {
        "name": p["name"],
        "protocol": p["protocol"],
        "port": p["port"],
        "appProtocol": p.get("appProtocol"),
        "clusters": list(clusters),
    }


def spec(
    cluster: str,
    *,
    created: datetime = T0,
    ports: list[dict[str, Any]] | None = None,
    namespace: str = "demo",
    name: str = "web",
    **fields: Any,
) -> InternalServiceExportSpec:
    """An export spec of `cluster` for demo/web; `fields` are wire-named spec fields."""
    return InternalServiceExportSpec.model_validate(
        {
            "ports": [HTTP] if ports is None else ports,
            "serviceReference": {
                "clusterId": cluster,
                "namespace": namespace,
                "name": name,
                "uid": f"uid-{cluster}",
                "resourceVersion": "1",
                "generation": 3,
                "exportedSince": created.isoformat(),
                "exportCreationTimestamp": created.isoformat(),
            },
            **fields,
        }
    )


def ordered(*specs: InternalServiceExportSpec) -> list[InternalServiceExportSpec]:
    """The exports in precedence order, as the store's SQL hands them to the judge."""
    return sorted(specs, key=precedence_key)


# --- the table ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Case:
    id: str
    exports: list[InternalServiceExportSpec]
    winner: str
    reasons: tuple[str, ...]
    # cluster -> its own reasons; clusters not listed have none
    own: dict[str, tuple[str, ...]] = field(default_factory=dict)
    # cluster -> overridden fields; clusters not listed have none
    overridden: dict[str, tuple[str, ...]] = field(default_factory=dict)
    # the import's ports, each with the clusters that serve it (`served`); None: not checked
    ports: list[dict[str, Any]] | None = None


CASES = [
    Case("single export", [spec("a", type="Headless", ipFamilies=["IPv6"])], "a", ()),
    Case(
        "identical specs from three clusters",
        [spec("a", created=at(0)), spec("b", created=at(1)), spec("c", created=at(2))],
        "a",
        (),
    ),
    Case(
        "type",
        [spec("a", created=at(0)), spec("b", created=at(1), type="Headless")],
        "a",
        ("TypeConflict",),
        own={"b": ("TypeConflict",)},
        overridden={"b": ("type",)},
    ),
    Case(
        "port: same name, another number",
        [spec("a", created=at(0)), spec("b", created=at(1), ports=[port(8080, "http")])],
        "a",
        PC,
        own={"a": PC, "b": PC},
        overridden={"b": ("ports",)},
        ports=[served(HTTP, "a")],
    ),
    Case(
        "sessionAffinity",
        [spec("a", created=at(0)), spec("b", created=at(1), sessionAffinity="ClientIP")],
        "a",
        ("SessionAffinityConflict",),
        own={"b": ("SessionAffinityConflict",)},
        overridden={"b": ("sessionAffinity",)},
    ),
    Case(
        "sessionAffinityConfig timeouts differ",
        [
            spec("a", created=at(0), sessionAffinityConfig={"clientIP": {"timeoutSeconds": 60}}),
            spec("b", created=at(1), sessionAffinityConfig={"clientIP": {"timeoutSeconds": 90}}),
        ],
        "a",
        ("SessionAffinityConfigConflict",),
        own={"b": ("SessionAffinityConfigConflict",)},
        overridden={"b": ("sessionAffinityConfig",)},
    ),
    Case(
        "sessionAffinityConfig present vs absent",
        [
            spec("a", created=at(0)),
            spec("b", created=at(1), sessionAffinityConfig={"clientIP": {"timeoutSeconds": 90}}),
        ],
        "a",
        ("SessionAffinityConfigConflict",),
        own={"b": ("SessionAffinityConfigConflict",)},
        overridden={"b": ("sessionAffinityConfig",)},
    ),
    Case(
        "sessionAffinityConfig without a value equals none",
        [
            spec("a", created=at(0)),
            spec("b", created=at(1), sessionAffinityConfig={}),
            spec("c", created=at(2), sessionAffinityConfig={"clientIP": {}}),
        ],
        "a",
        (),
    ),
    Case(
        "internalTrafficPolicy",
        [
            spec("a", created=at(0), internalTrafficPolicy="Cluster"),
            spec("b", created=at(1), internalTrafficPolicy="Local"),
        ],
        "a",
        ("InternalTrafficPolicyConflict",),
        own={"b": ("InternalTrafficPolicyConflict",)},
        overridden={"b": ("internalTrafficPolicy",)},
    ),
    Case(
        "trafficDistribution",
        [
            spec("a", created=at(0)),
            spec("b", created=at(1), trafficDistribution="PreferClose"),
        ],
        "a",
        ("TrafficDistributionConflict",),
        own={"b": ("TrafficDistributionConflict",)},
        overridden={"b": ("trafficDistribution",)},
    ),
    Case(
        "ipFamilies with nothing in common",
        [
            spec("a", created=at(0), ipFamilies=["IPv4"]),
            spec("b", created=at(1), ipFamilies=["IPv6"]),
        ],
        "a",
        ("IPFamilyConflict",),
        own={"b": ("IPFamilyConflict",)},
        overridden={"b": ("ipFamilies",)},
    ),
    Case(
        "exportedLabels",
        [
            spec("a", created=at(0), exportedLabels={"tier": "web"}),
            spec("b", created=at(1), exportedLabels={"tier": "api"}),
        ],
        "a",
        ("LabelsConflict",),
        own={"b": ("LabelsConflict",)},
        overridden={"b": ("exportedLabels",)},
    ),
    Case(
        "exportedAnnotations",
        [
            spec("a", created=at(0)),
            spec("b", created=at(1), exportedAnnotations={"team": "payments"}),
        ],
        "a",
        ("AnnotationsConflict",),
        own={"b": ("AnnotationsConflict",)},
        overridden={"b": ("exportedAnnotations",)},
    ),
    Case(
        "port and type from one cluster",
        [
            spec("a", created=at(0)),
            spec("b", created=at(1), type="Headless", ports=[port(81, "http")]),
        ],
        "a",
        ("PortConflict", "TypeConflict"),
        own={"a": PC, "b": ("PortConflict", "TypeConflict")},
        overridden={"b": ("ports", "type")},
    ),
    Case(
        "reasons from different clusters are unioned in fixed order",
        [
            spec("a", created=at(0), exportedLabels={"x": "1"}),
            spec("b", created=at(1), exportedLabels={"x": "1"}, type="Headless"),
            spec("c", created=at(2), exportedLabels={"x": "2"}),
            spec("d", created=at(3), exportedLabels={"x": "1"}, ports=[port(443, "http")]),
        ],
        "a",
        ("LabelsConflict", "PortConflict", "TypeConflict"),
        own={
            "a": PC,
            "b": ("PortConflict", "TypeConflict"),
            "c": ("LabelsConflict", "PortConflict"),
            "d": PC,
        },
        overridden={"b": ("type",), "c": ("exportedLabels",), "d": ("ports",)},
    ),
    Case(
        "port: same number under another name",
        [spec("a", created=at(0)), spec("b", created=at(1), ports=[port(80, "web")])],
        "a",
        PC,
        own={"a": PC, "b": PC},
        overridden={"b": ("ports",)},
        ports=[served(HTTP, "a")],
    ),
    Case(
        "port: two unnamed ports with different numbers clash on the empty name",
        [
            spec("a", created=at(0), ports=[port(80)]),
            spec("b", created=at(1), ports=[port(81)]),
        ],
        "a",
        PC,
        own={"a": PC, "b": PC},
        overridden={"b": ("ports",)},
        ports=[served(port(80), "a")],
    ),
    Case(
        "port: appProtocol differs",
        [
            spec("a", created=at(0), ports=[port(80, "http", app="http")]),
            spec("b", created=at(1), ports=[port(80, "http", app="kubernetes.io/h2c")]),
        ],
        "a",
        PC,
        own={"a": PC, "b": PC},
        overridden={"b": ("ports",)},
        ports=[served(port(80, "http", app="http"), "a")],
    ),
    Case(
        "port: same number on another protocol is another port of the union, and a conflict",
        [
            spec("a", created=at(0), ports=[port(53, "dns")]),
            spec("b", created=at(1), ports=[port(53, "dns"), port(53, "dns-udp", "UDP")]),
        ],
        "a",
        PC,
        own={"a": PC, "b": PC},
        ports=[served(port(53, "dns"), "a", "b"), served(port(53, "dns-udp", "UDP"), "b")],
    ),
    Case(
        "port: disjoint ports form the union and conflict",
        [
            spec("a", created=at(0), ports=[HTTP]),
            spec("b", created=at(1), ports=[HTTPS]),
        ],
        "a",
        PC,
        own={"a": PC, "b": PC},
        ports=[served(HTTP, "a"), served(HTTPS, "b")],
    ),
    Case(
        "port: a cluster that declares no port at all conflicts with one that does",
        [spec("a", created=at(0), ports=[]), spec("b", created=at(1), ports=[HTTP])],
        "a",
        PC,
        own={"a": PC, "b": PC},
        ports=[served(HTTP, "b")],
    ),
    Case(
        "port: clusters declaring no ports at all agree",
        [spec("a", created=at(0), ports=[]), spec("b", created=at(1), ports=[])],
        "a",
        (),
        ports=[],
    ),
    Case(
        # Port *sets* are compared. cilium compares the lists in order (`mergePorts`,
        # slices.EqualFunc), so it would flag this key; docs/reference.md#conflicts speaks of sets,
        # and the order of a Service's ports carries no meaning for routing.
        "port: the same ports in another order do not conflict",
        [
            spec("a", created=at(0), ports=[HTTP, HTTPS]),
            spec("b", created=at(1), ports=[HTTPS, HTTP]),
        ],
        "a",
        (),
        ports=[served(HTTP, "a", "b"), served(HTTPS, "a", "b")],
    ),
    Case(
        "port clash with an older non-winner's port",
        [
            spec("a", created=at(0), ports=[port(80, "http")]),
            spec("b", created=at(1), ports=[port(80, "http"), port(443, "https")]),
            spec("c", created=at(2), ports=[port(80, "http"), port(443, "tls")]),
        ],
        "a",
        PC,
        own={"a": PC, "b": PC, "c": PC},
        overridden={"c": ("ports",)},
        ports=[served(HTTP, "a", "b", "c"), served(HTTPS, "b")],
    ),
    Case(
        "timestamp tie broken by cluster id in string order",
        [
            spec("cluster-9", created=at(0), type="Headless"),
            spec("cluster-10", created=at(0)),
        ],
        "cluster-10",
        ("TypeConflict",),
        own={"cluster-9": ("TypeConflict",)},
        overridden={"cluster-9": ("type",)},
    ),
    Case(
        "timestamps in other offsets compare in UTC",
        [
            # 10:00+02:00 is 08:00Z, an hour and a half older than T0 (09:30Z)
            spec("z", created=datetime(2026, 3, 1, 10, 0, tzinfo=timezone(timedelta(hours=2)))),
            spec("a", created=T0, type="Headless"),
        ],
        "z",
        ("TypeConflict",),
        own={"a": ("TypeConflict",)},
        overridden={"a": ("type",)},
    ),
    Case(
        "ipFamilies: an empty list places no constraint",
        [
            spec("a", created=at(0)),
            spec("b", created=at(1), ipFamilies=["IPv6", "IPv4"]),
            spec("c", created=at(2), ipFamilies=["IPv4"]),
        ],
        "a",
        (),
    ),
    Case(
        "ipFamilies: the export sharing nothing with the running intersection loses",
        [
            spec("a", created=at(0), ipFamilies=["IPv4", "IPv6"]),
            spec("b", created=at(1), ipFamilies=["IPv4"]),
            spec("c", created=at(2), ipFamilies=["IPv6"]),
        ],
        "a",
        ("IPFamilyConflict",),
        own={"c": ("IPFamilyConflict",)},
        overridden={"c": ("ipFamilies",)},
    ),
]


# --- the peers' port cases -------------------------------------------------------------------
# One row per case of the port tests of sigs.k8s.io/mcs-api (conformance/), cilium
# (pkg/clustermesh/mcsapi) and Submariner Lighthouse (pkg/agent/controller), on our "a"
# (older) and "b". The peers' own cluster names are given where the precedence matters.

# mcs-api's hello Service (conformance/k8s_objects.go)
TCP_42 = port(42, "tcp")
UDP_42 = port(42, "udp", "UDP")
STCP_142 = port(142, "stcp", "SCTP")
# Lighthouse's port1..port3 (controller_suite_test.go); its "POP3" is "pop3" here, as a port
# name must be a DNS-1123 label (the Kubernetes API refuses "POP3" on a Service, too).
LH_HTTP = port(8080, "http")
LH_HTTPS = port(8443, "https")
LH_POP3 = port(110, "pop3", "UDP", app="smtp")
# cilium's ports (serviceimport_controller_test.go)
MYPORT1 = port(4242, "myport1")
MYPORT2 = port(4243, "myport2")

PEER_PORT_CASES = [
    Case(
        # mcs-api conformance/service_import.go, "A ClusterIP service exported on two
        # clusters": "should expose the union of the constituent service ports and raise a
        # conflict" (Required)
        "mcs-api: union of the constituent ports and a conflict",
        [
            spec("a", created=at(0), ports=[TCP_42, UDP_42]),
            spec("b", created=at(1), ports=[TCP_42, STCP_142]),
        ],
        "a",
        PC,
        own={"a": PC, "b": PC},
        ports=[served(TCP_42, "a", "b"), served(UDP_42, "a"), served(STCP_142, "b")],
    ),
    Case(
        # mcs-api conformance/service_import.go, "with conflicting ports": "should apply the
        # conflict resolution policy and report a Conflict condition on each ServiceExport"
        # (Required): the import keeps the oldest export's ports
        "mcs-api: conflicting ports resolve to the oldest export's",
        [
            spec("a", created=at(0), ports=[TCP_42, UDP_42]),
            spec("b", created=at(1), ports=[port(43, "tcp")]),
        ],
        "a",
        PC,
        own={"a": PC, "b": PC},
        overridden={"b": ("ports",)},
        ports=[served(TCP_42, "a"), served(UDP_42, "a")],
    ),
    Case(
        # mcs-api conformance/service_import.go, "The ports for a ClusterSetIP ServiceImport
        # should match those of the exported service" (Required)
        "mcs-api: a lone export's ports are the import's",
        [spec("a", ports=[TCP_42, UDP_42])],
        "a",
        (),
        ports=[served(TCP_42, "a"), served(UDP_42, "a")],
    ),
    Case(
        # mcs-api conformance/connectivity.go, "same port name but different port numbers on
        # each cluster": "should only route traffic to the cluster that exposes the port"
        # (Optional, StrictPortConflict): port 42 lists only "a"
        "mcs-api connectivity: same name, another number: only the cluster that exposes it",
        [
            spec("a", created=at(0), ports=[TCP_42, UDP_42]),
            spec("b", created=at(1), ports=[port(4242, "tcp")]),
        ],
        "a",
        PC,
        own={"a": PC, "b": PC},
        overridden={"b": ("ports",)},
        ports=[served(TCP_42, "a"), served(UDP_42, "a")],
    ),
    Case(
        # mcs-api conformance/connectivity.go, "different port name on each cluster": "should
        # route traffic to each port only to the cluster that exposes it" (Optional)
        "mcs-api connectivity: another name on each cluster: each port to its own cluster",
        [
            spec("a", created=at(0), ports=[TCP_42, UDP_42]),
            spec("b", created=at(1), ports=[port(4242, "tcp2")]),
        ],
        "a",
        PC,
        own={"a": PC, "b": PC},
        ports=[served(TCP_42, "a"), served(UDP_42, "a"), served(port(4242, "tcp2"), "b")],
    ),
    Case(
        # cilium Test_mcsServiceImport_Reconcile, "Basic service import sync" (cilium leaves
        # port 4242 unnamed; with two ports Kubernetes and our wire model require names)
        "cilium: basic: the same two ports on both clusters",
        [
            spec("a", created=at(0), ports=[port(80, "named"), port(4242, "p4242")]),
            spec("b", created=at(1), ports=[port(80, "named"), port(4242, "p4242")]),
        ],
        "a",
        (),
        ports=[served(port(80, "named"), "a", "b"), served(port(4242, "p4242"), "a", "b")],
    ),
    Case(
        # cilium "Conflict test conflict-port-name with remote conflict" (a = remote, older)
        "cilium: conflict-port-name, remote older",
        [
            spec("a", created=at(0), ports=[port(4242, "remote")]),
            spec("b", created=at(1), ports=[port(4242)]),
        ],
        "a",
        PC,
        own={"a": PC, "b": PC},
        overridden={"b": ("ports",)},
        ports=[served(port(4242, "remote"), "a")],
    ),
    Case(
        # cilium "Conflict test conflict-port-name with local precedence" (a = local, older)
        "cilium: conflict-port-name, local older",
        [
            spec("a", created=at(0), ports=[port(4242)]),
            spec("b", created=at(1), ports=[port(4242, "remote")]),
        ],
        "a",
        PC,
        own={"a": PC, "b": PC},
        overridden={"b": ("ports",)},
        ports=[served(port(4242), "a")],
    ),
    Case(
        # cilium "Conflict test conflict-port-appprotocol with remote conflict"
        "cilium: conflict-port-appprotocol, remote older",
        [
            spec("a", created=at(0), ports=[port(4242, app="something-else")]),
            spec("b", created=at(1), ports=[port(4242)]),
        ],
        "a",
        PC,
        own={"a": PC, "b": PC},
        overridden={"b": ("ports",)},
        ports=[served(port(4242, app="something-else"), "a")],
    ),
    Case(
        # cilium "Conflict test conflict-port-appprotocol with local precedence"
        "cilium: conflict-port-appprotocol, local older",
        [
            spec("a", created=at(0), ports=[port(4242)]),
            spec("b", created=at(1), ports=[port(4242, app="something-else")]),
        ],
        "a",
        PC,
        own={"a": PC, "b": PC},
        overridden={"b": ("ports",)},
        ports=[served(port(4242), "a")],
    ),
    Case(
        # cilium "Conflict test conflict-duplicated-port-name with remote conflict"
        "cilium: conflict-duplicated-port-name, remote older",
        [
            spec("a", created=at(0), ports=[port(4243, "myport")]),
            spec("b", created=at(1), ports=[port(4242, "myport")]),
        ],
        "a",
        PC,
        own={"a": PC, "b": PC},
        overridden={"b": ("ports",)},
        ports=[served(port(4243, "myport"), "a")],
    ),
    Case(
        # cilium "Conflict test conflict-duplicated-port-name with local precedence"
        "cilium: conflict-duplicated-port-name, local older",
        [
            spec("a", created=at(0), ports=[port(4242, "myport")]),
            spec("b", created=at(1), ports=[port(4243, "myport")]),
        ],
        "a",
        PC,
        own={"a": PC, "b": PC},
        overridden={"b": ("ports",)},
        ports=[served(port(4242, "myport"), "a")],
    ),
    Case(
        # cilium "Conflict test conflict-port-union-1 with remote conflict" (its "with local
        # precedence" run is conflict-port-union-2's shape: the next row)
        "cilium: conflict-port-union-1: the older declares more",
        [
            spec("a", created=at(0), ports=[MYPORT1, MYPORT2]),
            spec("b", created=at(1), ports=[MYPORT1]),
        ],
        "a",
        PC,
        own={"a": PC, "b": PC},
        ports=[served(MYPORT1, "a", "b"), served(MYPORT2, "a")],
    ),
    Case(
        # cilium "Conflict test conflict-port-union-2 with remote conflict"
        "cilium: conflict-port-union-2: the newer declares more",
        [
            spec("a", created=at(0), ports=[MYPORT1]),
            spec("b", created=at(1), ports=[MYPORT1, MYPORT2]),
        ],
        "a",
        PC,
        own={"a": PC, "b": PC},
        ports=[served(MYPORT1, "a", "b"), served(MYPORT2, "b")],
    ),
    Case(
        # Lighthouse clusterip_service_test.go, "with differing ports": "should correctly set
        # the ports in the aggregated ServiceImport and set the Conflict status condition"
        "lighthouse: differing ports",
        [
            spec("a", created=at(0), ports=[LH_HTTP, LH_HTTPS]),
            spec("b", created=at(1), ports=[LH_HTTP, LH_POP3]),
        ],
        "a",
        PC,
        own={"a": PC, "b": PC},
        ports=[served(LH_HTTP, "a", "b"), served(LH_HTTPS, "a"), served(LH_POP3, "b")],
    ),
    Case(
        # Lighthouse "with differing ports" "and after unexporting from one cluster": "should
        # correctly update the ports ... and clear the Conflict status condition"
        "lighthouse: differing ports, after unexporting from one cluster",
        [spec("b", created=at(1), ports=[LH_HTTP, LH_POP3])],
        "b",
        (),
        ports=[served(LH_HTTP, "b"), served(LH_POP3, "b")],
    ),
    Case(
        # Lighthouse "with differing ports" "initially and after updating the ports to match"
        "lighthouse: differing ports, after updating the ports to match",
        [
            spec("a", created=at(0), ports=[LH_HTTP, LH_HTTPS]),
            spec("b", created=at(1), ports=[LH_HTTP, LH_HTTPS]),
        ],
        "a",
        (),
        ports=[served(LH_HTTP, "a", "b"), served(LH_HTTPS, "a", "b")],
    ),
    Case(
        # Lighthouse "with conflicting ports": cluster2 declares port1 one number up and port3;
        # the aggregated import is port1, port2, port3
        "lighthouse: conflicting ports",
        [
            spec("a", created=at(0), ports=[LH_HTTP, LH_HTTPS]),
            spec("b", created=at(1), ports=[port(8081, "http"), LH_POP3]),
        ],
        "a",
        PC,
        own={"a": PC, "b": PC},
        overridden={"b": ("ports",)},
        ports=[served(LH_HTTP, "a"), served(LH_HTTPS, "a"), served(LH_POP3, "b")],
    ),
]

ALL_CASES = CASES + PEER_PORT_CASES


@pytest.mark.parametrize("case", ALL_CASES, ids=[c.id for c in ALL_CASES])
def test_verdicts(case: Case) -> None:
    exports = ordered(*case.exports)
    result = judge(exports)
    clusters = tuple(e.service_reference.cluster_id for e in exports)

    assert result.winner == case.winner
    assert result.clusters == clusters
    assert result.reasons == case.reasons
    assert set(result.verdicts) == set(clusters)
    for cluster in clusters:
        verdict = result.verdicts[cluster]
        assert verdict.cluster_id == cluster
        # all or nothing: every export of a conflicting key is in conflict, winner included
        assert verdict.conflict is bool(case.reasons)
        assert verdict.reasons == case.own.get(cluster, ())
        assert verdict.overridden_fields == case.overridden.get(cluster, ())
    # the winner's values always stand; it can only share a port conflict
    assert result.verdicts[case.winner].overridden_fields == ()
    assert set(result.verdicts[case.winner].reasons) <= set(PC)
    if case.ports is not None:
        assert [p.model_dump() for p in result.port_clusters] == case.ports
        # the import's ports are the same union, without the cluster lists
        assert [p.model_dump() for p in result.import_spec.ports] == [
            {k: v for k, v in p.items() if k != "clusters"} for p in case.ports
        ]


# --- the ServiceImport ----------------------------------------------------------------------


def test_identical_specs_list_every_cluster_on_the_merged_port() -> None:
    result = judge([spec(c, created=at(i)) for i, c in enumerate(["a", "b", "c"])])
    assert [p.model_dump() for p in result.port_clusters] == [
        {
            "name": "http",
            "protocol": "TCP",
            "port": 80,
            "appProtocol": None,
            "clusters": ["a", "b", "c"],
        }
    ]
    assert [(p.name, p.port) for p in result.import_spec.ports] == [("http", 80)]


def test_port_union_keeps_first_seen_order_and_leaves_clashing_ports_out() -> None:
    result = judge(
        [
            spec("a", created=at(0), ports=[port(80, "http"), port(9090, "metrics")]),
            spec("b", created=at(1), ports=[port(443, "https"), port(80, "http")]),
            # "metrics" is taken by 9090; 443 is taken by "https"; 8443 is new
            spec(
                "c",
                created=at(2),
                ports=[port(9091, "metrics"), port(443, "tls"), port(8443, "alt")],
            ),
        ]
    )
    assert [(p.name, p.port, p.clusters) for p in result.port_clusters] == [
        ("http", 80, ["a", "b"]),
        ("metrics", 9090, ["a"]),
        ("https", 443, ["b"]),
        ("alt", 8443, ["c"]),
    ]
    assert [p.name for p in result.import_spec.ports] == ["http", "metrics", "https", "alt"]
    assert result.reasons == ("PortConflict",)
    # every export is party to the port conflict; only c's own ports were left out
    assert all(v.reasons == ("PortConflict",) for v in result.verdicts.values())
    assert [c for c, v in result.verdicts.items() if v.overridden_fields] == ["c"]


def test_import_takes_the_winners_decided_properties() -> None:
    decided: dict[str, Any] = {
        "type": "Headless",
        "sessionAffinity": "ClientIP",
        "sessionAffinityConfig": {"clientIP": {"timeoutSeconds": 300}},
        "internalTrafficPolicy": "Local",
        "trafficDistribution": "PreferClose",
        "exportedAnnotations": {"team": "edge"},
    }
    winner = spec(
        "b", created=at(0), ipFamilies=["IPv6", "IPv4"], exportedLabels={"tier": "web"}, **decided
    )
    # the loser agrees on everything but its labels, and narrows the families
    loser = spec("a", created=at(5), ipFamilies=["IPv4"], exportedLabels={"tier": "api"}, **decided)
    result = judge([winner, loser])
    imported = result.import_spec
    assert result.winner == "b"
    assert imported.type == "Headless"
    assert imported.session_affinity == "ClientIP"
    assert imported.session_affinity_config is not None
    assert imported.session_affinity_config.client_ip is not None
    assert imported.session_affinity_config.client_ip.timeout_seconds == 300
    assert imported.internal_traffic_policy == "Local"
    assert imported.traffic_distribution == "PreferClose"
    assert imported.labels == {"tier": "web"}
    assert imported.annotations == {"team": "edge"}
    # families: the winner's that every constraining export shares
    assert imported.ip_families == ["IPv4"]
    assert result.reasons == ("LabelsConflict",)


@pytest.mark.parametrize(
    ("families", "expected", "losers"),
    [
        ([["IPv6", "IPv4"], ["IPv4", "IPv6"]], ["IPv6", "IPv4"], []),
        ([["IPv6", "IPv4"], ["IPv4"]], ["IPv4"], []),
        ([[], ["IPv6", "IPv4"], ["IPv4"]], ["IPv4"], []),
        ([[], []], [], []),
        ([["IPv4"], ["IPv6"], ["IPv4"]], ["IPv4"], ["b"]),
        ([[], ["IPv6"], ["IPv4"]], ["IPv6"], ["c"]),
        # cilium pkg/clustermesh/mcsapi TestIntersectIPFamilies, one row per case:
        ([["IPv4", "IPv6"], ["IPv6", "IPv4"]], ["IPv4", "IPv6"], []),  # all dual-stack
        ([[], []], [], []),  # all legacy
        ([[], ["IPv4", "IPv6"], ["IPv4"]], ["IPv4"], []),  # dual-stack then narrows to IPv4
        ([["IPv6"], [], ["IPv4", "IPv6"]], ["IPv6"], []),  # keep oldest single stack IPv6
        ([["IPv4"], ["IPv6"]], ["IPv4"], ["b"]),  # simple conflict
        # dual-stack then narrow to IPv4 and conflict with IPv6
        ([["IPv4", "IPv6"], ["IPv4"], ["IPv6"]], ["IPv4"], ["c"]),
    ],
)
def test_ip_families_of_the_import(
    families: list[list[str]], expected: list[str], losers: list[str]
) -> None:
    exports = [
        spec(cluster, created=at(i), ipFamilies=fams)
        for i, (cluster, fams) in enumerate(zip("abc", families, strict=False))
    ]
    result = judge(exports)
    assert result.import_spec.ip_families == expected
    assert [c for c, v in result.verdicts.items() if "ipFamilies" in v.overridden_fields] == losers
    assert result.reasons == (("IPFamilyConflict",) if losers else ())


# --- the verdict as a function of the set ---------------------------------------------------


def test_winner_withdrawal_makes_the_next_oldest_win() -> None:
    a = spec("a", created=at(0), type="Headless")
    b = spec("b", created=at(5))
    c = spec("c", created=at(9))
    before = judge([a, b, c])
    assert before.winner == "a"
    assert before.reasons == ("TypeConflict",)
    assert before.verdicts["b"].overridden_fields == ("type",)

    after = judge([b, c])
    assert after.winner == "b"
    assert after.reasons == ()
    assert after.import_spec.type == "ClusterSetIP"
    for cluster in ("b", "c"):
        assert after.verdicts[cluster].conflict is False
        assert after.verdicts[cluster].message != before.verdicts[cluster].message
        assert "b's export is the oldest" in after.verdicts[cluster].message


def test_verdict_flips_to_no_conflict_when_specs_converge() -> None:
    diverged = judge([spec("a", created=at(0)), spec("b", created=at(1), type="Headless")])
    converged = judge([spec("a", created=at(0)), spec("b", created=at(1))])
    assert all(v.conflict for v in diverged.verdicts.values())
    assert not any(v.conflict for v in converged.verdicts.values())
    assert converged.reasons == ()


def test_a_matching_cluster_joining_does_not_change_the_others_messages() -> None:
    # The store rewrites a record only when its message changes: agreement must be quiet.
    two = judge([spec("a", created=at(0)), spec("b", created=at(1))])
    three = judge([spec("a", created=at(0)), spec("b", created=at(1)), spec("c", created=at(2))])
    assert two.verdicts["a"].message == three.verdicts["a"].message
    assert two.verdicts["b"].message == three.verdicts["b"].message


# --- messages -------------------------------------------------------------------------------


def conflict_key() -> KeyJudgement:
    return judge(
        [
            spec("alpha", created=at(0)),
            spec("beta", created=at(60), type="Headless", ports=[port(8080, "http")]),
            spec("gamma", created=at(120)),
        ]
    )


def test_conflict_message_of_an_overridden_export() -> None:
    message = conflict_key().verdicts["beta"].message
    assert message == (
        "Clusters disagree on ports, type: alpha wins as the oldest export, created "
        "2026-03-01T09:30:00.000Z. This cluster's type (Headless here, ClusterSetIP in alpha) "
        "was overridden by the winner's; its "
        "port http (8080/TCP) clashes with ports of older exports and was left out of the "
        "import; it does not declare the import's port http (80/TCP), whose traffic goes only "
        "to clusters that do."
    )


def test_conflict_message_of_the_winner_says_its_values_stand() -> None:
    message = conflict_key().verdicts["alpha"].message
    assert message.startswith("Clusters disagree on ports, type: alpha wins as the oldest")
    assert message.endswith("This cluster is the winner; its values stand.")


def test_conflict_message_of_a_matching_export_says_it_was_not_overridden() -> None:
    message = conflict_key().verdicts["gamma"].message
    assert "alpha wins as the oldest export, created 2026-03-01T09:30:00.000Z" in message
    assert "compatible with the winner's" in message
    assert "overridden" not in message


def test_port_set_messages_say_who_lacks_which_port() -> None:
    # the winner lacks a port a newer export adds: the import keeps it, served by b only
    result = judge(
        [
            spec("a", created=at(0), ports=[HTTP]),
            spec("b", created=at(1), ports=[HTTP, HTTPS]),
            spec("c", created=at(2), ports=[]),
        ]
    )
    head = (
        "Clusters disagree on ports: a wins as the oldest export, created 2026-03-01T09:30:00.000Z."
    )
    assert result.verdicts["a"].message == (
        f"{head} This cluster is the winner and its values stand, but it does not declare the "
        "import's port https (443/TCP), whose traffic goes only to clusters that do."
    )
    assert result.verdicts["b"].message == (
        f"{head} This cluster's values are compatible with the winner's and it declares every "
        "port of the import; other clusters do not."
    )
    assert result.verdicts["c"].message == (
        f"{head} This cluster does not declare the import's ports http (80/TCP), "
        "https (443/TCP), whose traffic goes only to clusters that do."
    )
    assert all(v.overridden_fields == () for v in result.verdicts.values())


def test_conflict_message_names_every_overridden_decided_field() -> None:
    result = judge(
        [
            spec("a", created=at(0)),
            spec("b", created=at(1), sessionAffinity="ClientIP", exportedLabels={"x": "y"}),
        ]
    )
    assert (
        "This cluster's sessionAffinity (ClientIP here, None in a), exportedLabels were "
        "overridden by the winner's." in result.verdicts["b"].message
    )


@pytest.mark.parametrize(("own", "winner_value", "phrase"), [
    ({"type": "Headless"}, {}, "type (Headless here, ClusterSetIP in a) was"),
    ({}, {"type": "Headless"}, "type (ClusterSetIP here, Headless in a) was"),
    ({"internalTrafficPolicy": "Local"}, {}, "internalTrafficPolicy (Local here, unset in a) was"),
    ({"trafficDistribution": "PreferClose"}, {"trafficDistribution": "PreferSameZone"},
     "trafficDistribution (PreferClose here, PreferSameZone in a) was"),
    ({"exportedAnnotations": {"k": "v"}}, {}, "exportedAnnotations was"),
])
def test_a_conflict_message_names_both_short_values(
    own: dict[str, Any], winner_value: dict[str, Any], phrase: str
) -> None:
    result = judge([spec("a", created=at(0), **winner_value), spec("b", created=at(1), **own)])
    assert f"This cluster's {phrase} overridden by the winner's." in result.verdicts["b"].message


def test_conflict_message_says_a_tie_was_broken_by_cluster_id() -> None:
    result = judge([spec("cluster-10", created=at(0)), spec("cluster-9", type="Headless")])
    message = result.verdicts["cluster-9"].message
    assert "cluster-10 wins as the oldest export, created 2026-03-01T09:30:00.000Z" in message
    assert "tied with cluster-9; the tie was broken by cluster id" in message
    untied = judge([spec("a", created=at(0)), spec("b", created=at(1), type="Headless")])
    assert "tie" not in untied.verdicts["b"].message


def test_message_keeps_sub_millisecond_precision_instead_of_showing_a_false_tie() -> None:
    result = judge(
        [
            spec("b", created=T0 + timedelta(microseconds=1)),
            spec("a", created=T0 + timedelta(microseconds=2), type="Headless"),
        ]
    )
    assert result.winner == "b"
    assert "created 2026-03-01T09:30:00.000001Z" in result.verdicts["a"].message
    assert "tie" not in result.verdicts["a"].message


def test_no_conflict_message() -> None:
    result = judge([spec("a", created=at(0)), spec("b", created=at(1))])
    expected = (
        "No conflicts: every exporting cluster's spec is compatible; a's export is the "
        "oldest, created 2026-03-01T09:30:00.000Z."
    )
    assert [v.message for v in result.verdicts.values()] == [expected, expected]


def test_many_rejected_ports_are_counted_not_all_named() -> None:
    theirs = [port(1000 + i, f"p{i}") for i in range(8)]
    mine = [port(2000 + i, f"p{i}") for i in range(8)]
    result = judge([spec("a", created=at(0), ports=theirs), spec("b", created=at(1), ports=mine)])
    message = result.verdicts["b"].message
    assert "ports p0 (2000/TCP), p1 (2001/TCP), p2 (2002/TCP), p3 (2003/TCP), p4 (2004/TCP)" in (
        message
    )
    assert "and 3 more clash with ports of older exports" in message
    assert "p5 (" not in message


# --- condition() ----------------------------------------------------------------------------

NOW = datetime(2026, 3, 2, tzinfo=UTC)
EARLIER = datetime(2026, 2, 1, tzinfo=UTC)


def test_condition_of_a_conflicting_key_joins_the_key_reasons() -> None:
    result = judge(
        [
            spec("a", created=at(0)),
            spec("b", created=at(1), type="Headless"),
            spec("c", created=at(2), ports=[port(81, "http")]),
        ]
    )
    # b's own reason is only TypeConflict; its condition carries the whole key's
    condition = result.verdicts["b"].condition(
        key_reasons=result.reasons, observed_generation=7, now=NOW, previous=None
    )
    assert condition.type == "Conflict"
    assert condition.status == "True"
    assert condition.reason == "PortConflict,TypeConflict"
    assert condition.message == result.verdicts["b"].message
    assert condition.observed_generation == 7
    assert condition.last_transition_time == NOW


def test_condition_without_conflict() -> None:
    result = judge([spec("a")])
    condition = result.verdicts["a"].condition(
        key_reasons=(), observed_generation=None, now=NOW, previous=None
    )
    assert (condition.status, condition.reason) == ("False", "NoConflicts")
    assert condition.observed_generation is None


def test_condition_keeps_transition_time_while_status_is_unchanged() -> None:
    verdict = judge([spec("a", created=at(0)), spec("b", created=at(1), type="Headless")]).verdicts[
        "b"
    ]
    previous = Condition(
        type="Conflict",
        status="True",
        reason="PortConflict",
        message="an older message",
        last_transition_time=EARLIER,
    )
    kept = verdict.condition(
        key_reasons=("TypeConflict",), observed_generation=3, now=NOW, previous=previous
    )
    assert kept.last_transition_time == EARLIER
    assert kept.reason == "TypeConflict"

    flipped_from = previous.model_copy(update={"status": "False", "reason": "NoConflicts"})
    moved = verdict.condition(
        key_reasons=("TypeConflict",), observed_generation=3, now=NOW, previous=flipped_from
    )
    assert moved.last_transition_time == NOW


def test_condition_refuses_reasons_that_contradict_the_verdict() -> None:
    verdict = judge([spec("a")]).verdicts["a"]
    with pytest.raises(ValueError, match="conflict=False"):
        verdict.condition(
            key_reasons=("TypeConflict",), observed_generation=1, now=NOW, previous=None
        )


# --- input checks ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("exports", "match"),
    [
        ([], "at least one export"),
        ([spec("b", created=at(1)), spec("a", created=at(0))], "precedence order"),
        ([spec("b", created=at(0)), spec("a", created=at(0))], "precedence order"),
        ([spec("a"), spec("b", name="api")], "one service key"),
        ([spec("a"), spec("b", namespace="other")], "one service key"),
        ([spec("a", created=at(0)), spec("a", created=at(1))], "exports twice"),
    ],
    ids=["empty", "older after newer", "tie out of id order", "name", "namespace", "twice"],
)
def test_judge_rejects_bad_input(exports: list[InternalServiceExportSpec], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        judge(exports)


def test_precedence_key_normalises_to_utc() -> None:
    plus_two = timezone(timedelta(hours=2))
    key = precedence_key(spec("a", created=datetime(2026, 3, 1, 11, 30, tzinfo=plus_two)))
    assert key == (T0, "a")
    assert key[0].utcoffset() == timedelta(0)


# --- properties -----------------------------------------------------------------------------

CLUSTERS = ["a", "b", "c", "cluster-1", "cluster-10", "cluster-9"]

port_names = st.sampled_from(["", "http", "https", "grpc"])
ports_strategy = st.lists(
    st.fixed_dictionaries(
        {
            "name": port_names,
            "protocol": st.sampled_from(["TCP", "UDP"]),
            "port": st.sampled_from([53, 80, 443]),
            "appProtocol": st.sampled_from([None, "http"]),
        }
    ),
    max_size=3,
).filter(
    # the wire model's own rules: unique names and numbers; several ports must be named
    lambda ps: (
        len({p["name"] for p in ps}) == len(ps)
        and len({(p["protocol"], p["port"]) for p in ps}) == len(ps)
        and (len(ps) <= 1 or all(p["name"] for p in ps))
    )
)

fields_strategy = st.fixed_dictionaries(
    {
        "ports": ports_strategy,
        "type": st.sampled_from(["ClusterSetIP", "Headless"]),
        "sessionAffinity": st.sampled_from(["None", "ClientIP"]),
        "sessionAffinityConfig": st.sampled_from(
            [None, {}, {"clientIP": {"timeoutSeconds": 10800}}]
        ),
        "internalTrafficPolicy": st.sampled_from([None, "Cluster", "Local"]),
        "trafficDistribution": st.sampled_from([None, "PreferClose"]),
        "ipFamilies": st.sampled_from([[], ["IPv4"], ["IPv6"], ["IPv4", "IPv6"]]),
        "exportedLabels": st.sampled_from([{}, {"tier": "web"}]),
        "exportedAnnotations": st.sampled_from([{}, {"team": "edge"}]),
    }
)


@st.composite
def key_exports(draw: st.DrawFn) -> list[InternalServiceExportSpec]:
    """A key's exports in precedence order: distinct clusters, often tied timestamps."""
    clusters = draw(st.lists(st.sampled_from(CLUSTERS), min_size=1, max_size=5, unique=True))
    specs = []
    for cluster in clusters:
        fields: dict[str, Any] = draw(fields_strategy)
        specs.append(spec(cluster, created=at(draw(st.integers(0, 3))), **fields))
    return ordered(*specs)


def verdict_table(result: KeyJudgement) -> dict[str, ExportVerdict]:
    return dict(result.verdicts)


@settings(max_examples=200, deadline=None)
@given(key_exports())
def test_property_judging_is_deterministic(exports: list[InternalServiceExportSpec]) -> None:
    first = judge(exports)
    copies = [InternalServiceExportSpec.model_validate(e.model_dump()) for e in exports]
    second = judge(copies)
    assert verdict_table(first) == verdict_table(second)
    assert first.reasons == second.reasons
    assert first.import_spec == second.import_spec
    assert first.port_clusters == second.port_clusters


@settings(max_examples=200, deadline=None)
@given(key_exports())
def test_property_conflict_is_all_or_nothing(exports: list[InternalServiceExportSpec]) -> None:
    result = judge(exports)
    flags = {v.conflict for v in result.verdicts.values()}
    assert len(flags) == 1
    assert flags == {bool(result.reasons)}
    own = {r for v in result.verdicts.values() for r in v.reasons}
    assert set(result.reasons) == own
    assert list(result.reasons) == [r for r in conditions.CONFLICT_REASONS if r in own]


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.sampled_from(CLUSTERS), min_size=1, max_size=6, unique=True),
    fields_strategy,
    st.data(),
)
def test_property_identical_specs_never_conflict(
    clusters: list[str], fields: dict[str, Any], data: st.DataObject
) -> None:
    exports = ordered(
        *(spec(c, created=at(data.draw(st.integers(0, 3))), **fields) for c in clusters)
    )
    result = judge(exports)
    assert result.reasons == ()
    assert all(not v.conflict and not v.overridden_fields for v in result.verdicts.values())
    for merged in result.port_clusters:
        assert merged.clusters == list(result.clusters)


@settings(max_examples=200, deadline=None)
@given(key_exports())
def test_property_winner_is_the_minimum_by_precedence(
    exports: list[InternalServiceExportSpec],
) -> None:
    result = judge(exports)
    assert result.winner == min(exports, key=precedence_key).service_reference.cluster_id
    assert result.verdicts[result.winner].overridden_fields == ()
    # the import's decided properties are the winner's own
    winner = exports[0]
    assert result.import_spec.type == winner.type
    assert result.import_spec.labels == winner.exported_labels
    # withdrawing the winner hands the key to the next oldest
    if len(exports) > 1:
        assert judge(exports[1:]).winner == exports[1].service_reference.cluster_id


def _port_tuple(p: Any) -> tuple[str, str, int, str | None]:
    return (p.name, p.protocol, p.port, p.app_protocol)


@settings(max_examples=300, deadline=None)
@given(key_exports())
def test_property_port_conflict_exactly_when_port_sets_differ(
    exports: list[InternalServiceExportSpec],
) -> None:
    result = judge(exports)
    sets = {frozenset(_port_tuple(p) for p in e.ports) for e in exports}
    differ = len(sets) > 1
    assert ("PortConflict" in result.reasons) is differ
    # on every export, the winner's too: a port mismatch involves them all
    assert all(("PortConflict" in v.reasons) is differ for v in result.verdicts.values())
    if differ:
        assert all(v.conflict for v in result.verdicts.values())
        assert all("ports" in v.message for v in result.verdicts.values())


@settings(max_examples=300, deadline=None)
@given(key_exports())
def test_property_per_port_cluster_lists_are_exact(
    exports: list[InternalServiceExportSpec],
) -> None:
    """Each import port lists exactly the clusters declaring it identically, in precedence
    order; every declared port is in the union or clashes with one that is."""
    result = judge(exports)
    merged = [_port_tuple(p) for p in result.port_clusters]
    assert merged == [_port_tuple(p) for p in result.import_spec.ports]
    # the union is a valid port list: names and (protocol, port) unique
    assert len({m[0] for m in merged}) == len(merged)
    assert len({(m[1], m[2]) for m in merged}) == len(merged)
    for status in result.port_clusters:
        declaring = [
            e.service_reference.cluster_id
            for e in exports
            if _port_tuple(status) in {_port_tuple(p) for p in e.ports}
        ]
        assert status.clusters == declaring
    for e in exports:
        cluster = e.service_reference.cluster_id
        left_out = [p for p in e.ports if _port_tuple(p) not in merged]
        for p in left_out:
            assert any(m[0] == p.name or (m[1], m[2]) == (p.protocol, p.port) for m in merged)
        assert ("ports" in result.verdicts[cluster].overridden_fields) is bool(left_out)
    # the winner's ports are all served: the oldest export never loses a port
    assert {_port_tuple(p) for p in exports[0].ports} <= set(merged)
