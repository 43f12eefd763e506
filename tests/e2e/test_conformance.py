"""The upstream MCS API conformance suite, ported to the real fleet (hub, agents, clusters).

`sigs.k8s.io/mcs-api/conformance` is the bar KEP-1645 implementations measure themselves
against (docs/reference.md#import-path: where it is stricter than the reference, it wins). Its tests
talk to member clusters only, through the Kubernetes API; so do these, with the suite's driver
rebuilt in `tests/e2e/conformance.py` (namespace per test, `hello` Service and ServiceExport as in
`k8s_objects.go`, the same awaits). Clusters are the fleet's west, north, east; upstream's
`clients[0]` (the exporting "remote" cluster) is west, `clients[1]` north. Each test keeps
its upstream name in its docstring and, as far as our objects allow, its assertions; where
we differ, a comment says why. Upstream commit read: ded161a (kubernetes-sigs/mcs-api).

Coverage, upstream test → label → here:

service_import.go
- "A ServiceImport should only exist as long as there's at least one exporting cluster"
  — Required — `test_service_import_exists_while_any_cluster_exports`.
- "Only labels and annotations specified as exported in the ServiceExport should be
  propagated to the ServiceImport" — Optional (ExportedLabels) — ported:
  `test_only_exported_labels_and_annotations_reach_the_service_import`.
- "A service exported on two clusters with conflicting annotations and labels should apply
  the conflict resolution policy and report a Conflict condition on each ServiceExport" —
  Optional (ExportedLabels) — ported: `test_conflicting_labels_and_annotations`.
- "Exporting a ClusterIP service should create a ServiceImport of type ClusterSetIP in the
  service's namespace in each cluster. Unexporting should delete the ServiceImport" —
  Required — `test_clusterip_export_imports_clustersetip_everywhere_and_unexport_deletes`.
- "The SessionAffinity for a ClusterSetIP ServiceImport should match the exported
  service's SessionAffinity" — Required — `test_session_affinity_matches`.
- "The InternalTrafficPolicy … should match" — Required — `test_internal_traffic_policy_matches`.
- "The TrafficDistribution … should match" — Required — `test_traffic_distribution_matches`.
- "An IP should be allocated for a ClusterSetIP ServiceImport for each IP family" —
  Required — `test_a_clusterset_ip_per_ip_family`.
- "The ports for a ClusterSetIP ServiceImport should match those of the exported service"
  — Required — `test_ports_match_the_exported_service`.
- "A ClusterIP service exported on two clusters should expose the union of the constituent
  service ports and raise a conflict" — Required — `test_union_of_ports_and_a_conflict`.
- "A ClusterIP service exported on two clusters with conflicting ports should apply the
  conflict resolution policy and report a Conflict condition on each ServiceExport" —
  Required — `test_conflicting_ports_resolve_to_the_oldest_export`.
- "Exporting a headless service should create a ServiceImport of type Headless … in each
  cluster. Unexporting should delete the ServiceImport" — Required —
  `test_headless_export_imports_headless_everywhere_and_unexport_deletes`.
- "No clusterset IP should be allocated for a Headless ServiceImport" — Required —
  `test_no_clusterset_ip_for_headless`.
- "Exporting an ExternalName service should set ServiceExport Valid condition to False" —
  Required — `test_externalname_export_is_invalid_and_not_imported`.
- "A service exported on two clusters with conflicting headlessness should apply the
  conflict resolution policy and report a Conflict condition on the ServiceExport" —
  Required — `test_conflicting_headlessness`.

endpoint_slice.go
- "Exporting a service should create an MCS EndpointSlice in the service's namespace in
  each cluster with the required MCS labels. Unexporting should delete the EndpointSlice."
  — Optional (EndpointSlice) — `test_mcs_endpoint_slices_everywhere_and_unexport_deletes`.

connectivity.go — each test checks packets: a request pod in every cluster resolves
`hello.<ns>.svc.clusterset.local` and `nc`s port 42 or 4242, expecting the answering pod's
IP. Here, only the control-plane half: the objects a DNS server and kube-proxy act on, in
every cluster (ServiceImport with its ClusterSetIPs, the derived Service holding them, MCS
EndpointSlices whose endpoints are exactly the pods that must answer, per port).
- "Connectivity to a service that is not exported should be inaccessible" — Required —
  `test_not_exported_service_is_not_imported`: no ServiceImport and no MCS slice anywhere.
- "Connectivity to an exported ClusterIP service should be accessible through DNS" —
  Optional (Connectivity) — `test_exported_clusterip_service_is_routable_everywhere`.
- "… existing in two clusters but exported from one should only access the exporting
  cluster" — Optional (Connectivity) — `test_only_the_exporting_cluster_is_routed_to`.
- "… same port name but different port numbers on each cluster should only route traffic
  to the cluster that exposes the port" — Optional (Connectivity, StrictPortConflict) —
  `test_same_port_name_other_number_routes_only_to_the_winner`.
- "… different port name on each cluster should route traffic to each port only to the
  cluster that exposes it" — Optional (Connectivity, StrictPortConflict) —
  `test_each_port_routes_only_to_the_clusters_that_expose_it`.

clusterip_service_dns.go and headless_service_dns.go (Optional, DNS) — upstream runs
`nslookup` in a pod of each cluster; no DNS server runs around the emulated clusters, so
these ask `tests/e2e/mcsdns.py`, a model of the CoreDNS `multicluster` plugin that reads
the objects mcsync wrote as the plugin reads them and answers what it answers:
- "A DNS lookup of the <service>.<ns>.svc.clusterset.local domain for a ClusterIP service
  should resolve to the clusterset IP" — `test_dns_clusterip_resolves_to_the_clusterset_ip`.
- "A DNS SRV query … for a ClusterIP service should return valid SRV records" —
  `test_dns_clusterip_srv_records`.
- "DNS lookups of the <service>.<ns>.svc.cluster.local domain for a ClusterIP service
  should only resolve local services" — not ported: that is CoreDNS's `kubernetes` plugin
  over the local Service, which mcsync does not touch.
- "A DNS query … for a headless service should return the ready endpoint addresses of all
  the backing pods" — `test_dns_headless_resolves_to_the_ready_pods`.
- "A DNS query of the <hostname>.<clusterid>.<service>.<ns>.svc.clusterset.local domain for
  a headless StatefulSet service should return the requested pod's endpoint address" —
  `test_dns_headless_statefulset_pod_by_hostname_and_cluster`.
- "A DNS SRV query … for a headless service should return valid SRV records" —
  `test_dns_headless_srv_records`.

Out of scope, and how a real fleet does it. The packet half of connectivity.go, and DNS
answered by a real server, need pods, a CNI that routes pod IPs between clusters,
kube-proxy and CoreDNS: none exists around the emulated clusters. In a real fleet, mcsync
writes the objects checked here and the rest is standard Kubernetes: kube-proxy programs
the derived Service's ClusterSetIP to the mirrored EndpointSlices' endpoints, the CoreDNS
`multicluster` plugin (docs/install.md) answers `<svc>.<ns>.svc.clusterset.local` from
ServiceImports and those slices, and the pod network between clusters (a flat network, or
a gateway such as Submariner's) carries the packets. Run the upstream suite itself there
(`go test ./conformance -args --contexts=a,b`) to check those halves.

The fleet is the module-scoped one of tests/e2e/fleet.py (one per back end); every test
has a namespace of its own in every cluster and deletes it at the end.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from shared import conditions as c
from shared.constants import (
    ENDPOINTSLICE_MANAGER,
    LABEL_ENDPOINTSLICE_MANAGED_BY,
    LABEL_MCS_SERVICE_NAME,
    LABEL_MCS_SOURCE_CLUSTER,
    MCS_GROUP,
)
from tests.e2e import conformance
from tests.e2e.conformance import (
    HELLO,
    K8S_ENDPOINTSLICE_MANAGER,
    Driver,
    address_type_of,
    consistently,
    eventually,
    ip_family_of,
    mcs_ports,
)
from tests.e2e.fleet import CLUSTERS, Fleet, Member
from tests.e2e.mcsdns import ZONE as DNS_ZONE
from tests.e2e.mcsdns import MulticlusterDns, Srv, endpoint_hostname

pytestmark = pytest.mark.e2e


@pytest.fixture
def t(fleet: Fleet) -> Iterator[Driver]:
    """Upstream's BeforeEach/AfterEach: a driver with a fresh namespace name; its
    namespaces are deleted in every cluster afterwards (the agents clean up the rest)."""
    driver = Driver(fleet, CLUSTERS)
    yield driver
    driver.delete_namespaces()


def _has(actual: dict[str, str] | None, expected: dict[str, str]) -> None:
    for key, value in expected.items():
        assert (actual or {}).get(key) == value, f"{key}={value} missing from {actual}"


def _has_not(actual: dict[str, str] | None, unexpected: dict[str, str]) -> None:
    for key, value in unexpected.items():
        assert (actual or {}).get(key) != value, f"{key}={value} found in {actual}"


def _meta(obj: dict[str, Any], field: str) -> dict[str, str]:
    found: dict[str, str] = obj["metadata"].get(field) or {}
    return found


# -- service_import.go: testGeneralServiceImport -------------------------------------------


def test_service_import_exists_while_any_cluster_exports(t: Driver) -> None:
    """A ServiceImport should only exist as long as there's at least one exporting cluster."""
    t.start()
    first, second = t.clients[0], t.clients[1]
    t.await_service_import(first)

    t.deploy_hello_service(second, t.hello_service2)
    t.create_service_export(second, t.hello_export2)
    t.ensure_service_import(first, f"the ServiceImport no longer exists after exporting on "
                                   f"cluster {second.name!r}")

    t.delete_service_export(first)
    t.ensure_service_import(first, f"the ServiceImport no longer exists after unexporting on "
                                   f"{first.name!r} while still exported on {second.name!r}")

    t.delete_service_export(second)
    t.await_no_service_import(first, "the ServiceImport still exists after unexporting the "
                                     "service on all clusters")


def test_only_exported_labels_and_annotations_reach_the_service_import(t: Driver) -> None:
    """Only labels and annotations specified as exported in the ServiceExport should be
    propagated to the ServiceImport. (Optional upstream.)"""
    t.hello_export["spec"] = {"exportedAnnotations": {"dummy-annotation": "true"},
                              "exportedLabels": {"dummy-label": "true"}}
    t.start()

    def verify(si: dict[str, Any]) -> None:
        _has(_meta(si, "annotations"), t.hello_export["spec"]["exportedAnnotations"])
        _has_not(_meta(si, "annotations"), _meta(t.hello_service, "annotations"))
        _has(_meta(si, "labels"), t.hello_export["spec"]["exportedLabels"])
        _has_not(_meta(si, "labels"), _meta(t.hello_service, "labels"))
        # Upstream checks the Service's own; the ServiceExport's own metadata is not
        # "specified as exported" either.
        _has_not(_meta(si, "labels"), t.hello_export["metadata"]["labels"])
        _has_not(_meta(si, "annotations"), t.hello_export["metadata"]["annotations"])

    for client in t.clients:  # upstream reads clients[0]; the import is the same everywhere
        t.await_service_import(client, verify)


def test_conflicting_labels_and_annotations(t: Driver) -> None:
    """A service exported on two clusters with conflicting annotations and labels should
    apply the conflict resolution policy and report a Conflict condition on each
    ServiceExport. (Optional upstream.)"""
    t.hello_export["spec"] = {"exportedAnnotations": {"dummy-annotation": "true"},
                              "exportedLabels": {"dummy-label": "true"}}
    t.hello_export2["spec"] = {"exportedAnnotations": {"dummy-annotation2": "true"},
                               "exportedLabels": {"dummy-label2": "true"}}
    t.start_two_clusters()
    first, second = t.clients[0], t.clients[1]
    t.await_service_export_condition(first, c.CONFLICT, c.TRUE)
    t.await_service_export_condition(second, c.CONFLICT, c.TRUE)

    def verify(si: dict[str, Any]) -> None:  # the oldest export's win
        _has(_meta(si, "annotations"), t.hello_export["spec"]["exportedAnnotations"])
        _has_not(_meta(si, "annotations"), t.hello_export2["spec"]["exportedAnnotations"])
        _has(_meta(si, "labels"), t.hello_export["spec"]["exportedLabels"])
        _has_not(_meta(si, "labels"), t.hello_export2["spec"]["exportedLabels"])

    t.await_service_import(first, verify)


# -- service_import.go: testClusterIPServiceImport -----------------------------------------


def test_clusterip_export_imports_clustersetip_everywhere_and_unexport_deletes(
    t: Driver,
) -> None:
    """Exporting a ClusterIP service should create a ServiceImport of type ClusterSetIP in
    the service's namespace in each cluster. Unexporting should delete the ServiceImport."""
    t.start()
    t.await_service_export_condition(t.clients[0], c.VALID, c.TRUE)
    for client in t.clients:
        si = t.await_service_import(client)
        assert si["spec"]["type"] == "ClusterSetIP", \
            f"ServiceImport on cluster {client.name!r} has type {si['spec']['type']!r}"

    t.delete_service_export(t.clients[0])
    for client in t.clients:
        t.await_no_service_import(client, f"the ServiceImport still exists on cluster "
                                          f"{client.name!r} after unexporting the service")


def test_session_affinity_matches(t: Driver) -> None:
    """The SessionAffinity for a ClusterSetIP ServiceImport should match the exported
    service's SessionAffinity."""
    t.start()

    def verify(si: dict[str, Any]) -> None:
        assert si["spec"].get("sessionAffinity") == t.hello_service["spec"]["sessionAffinity"]
        assert si["spec"].get("sessionAffinityConfig") == \
            t.hello_service["spec"].get("sessionAffinityConfig"), (
                "The SessionAffinityConfig of the ServiceImport does not match the exported "
                "Service's SessionAffinityConfig")

    t.await_service_import(t.clients[0], verify)


def test_internal_traffic_policy_matches(t: Driver) -> None:
    """The InternalTrafficPolicy for a ClusterSetIP ServiceImport should match the exported
    service's InternalTrafficPolicy."""
    t.hello_service["spec"]["internalTrafficPolicy"] = "Cluster"
    t.start()

    def verify(si: dict[str, Any]) -> None:
        assert si["spec"].get("internalTrafficPolicy") == \
            t.hello_service["spec"]["internalTrafficPolicy"], (
                "The InternalTrafficPolicy of the ServiceImport does not match the exported "
                "Service's InternalTrafficPolicy")

    t.await_service_import(t.clients[0], verify)


def test_traffic_distribution_matches(t: Driver) -> None:
    """The TrafficDistribution for a ClusterSetIP ServiceImport should match the exported
    service's TrafficDistribution."""
    t.hello_service["spec"]["trafficDistribution"] = "PreferClose"
    t.start()

    def verify(si: dict[str, Any]) -> None:
        assert si["spec"].get("trafficDistribution") == \
            t.hello_service["spec"]["trafficDistribution"], (
                "The TrafficDistribution of the ServiceImport does not match the exported "
                "Service's TrafficDistribution")

    t.await_service_import(t.clients[0], verify)


def test_a_clusterset_ip_per_ip_family(t: Driver) -> None:
    """An IP should be allocated for a ClusterSetIP ServiceImport for each IP family."""
    t.start()

    def verify(si: dict[str, Any]) -> None:
        assert si["spec"].get("ips"), "the ServiceImport has no IPs"

    si = t.await_service_import(t.clients[0], verify)
    ips, families = si["spec"]["ips"], si["spec"].get("ipFamilies") or []
    assert len(ips) == len(families), (
        "The ServiceImport IPs field must have the same number of IPs as ServiceImport "
        f"IPFamilies: {ips} / {families}")
    for i, ip in enumerate(ips):
        assert ip_family_of(ip) == families[i], (
            f"The IP family of ServiceImport.Spec.IPs[{i}] ({ip!r}) must match "
            f"ServiceImport.Spec.IPFamilies[{i}] ({families[i]!r})")
    # Beyond upstream: the emulated clusters are dual-stack and hello is PreferDualStack,
    # so both families are there (a single-family answer would pass upstream's loop alone).
    assert families == t.hello_service["spec"]["ipFamilies"] == ["IPv4", "IPv6"]


def test_ports_match_the_exported_service(t: Driver) -> None:
    """The ports for a ClusterSetIP ServiceImport should match those of the exported
    service."""
    t.start()

    def verify(si: dict[str, Any]) -> None:
        assert mcs_ports(si["spec"]["ports"]) == mcs_ports(t.hello_service["spec"]["ports"])

    t.await_service_import(t.clients[0], verify)


def test_union_of_ports_and_a_conflict(t: Driver) -> None:
    """A ClusterIP service exported on two clusters should expose the union of the
    constituent service ports and raise a conflict."""
    stcp = {"name": "stcp", "port": 142, "protocol": "SCTP"}
    t.hello_service2["spec"]["ports"] = [t.hello_service["spec"]["ports"][0], stcp]
    t.start_two_clusters()
    first, second = t.clients[0], t.clients[1]
    t.await_service_export_condition(first, c.CONFLICT, c.TRUE)
    t.await_service_export_condition(second, c.CONFLICT, c.TRUE)

    def verify(si: dict[str, Any]) -> None:
        assert mcs_ports(si["spec"]["ports"]) == mcs_ports(
            [*t.hello_service["spec"]["ports"], stcp])

    t.await_service_import(first, verify)


def test_conflicting_ports_resolve_to_the_oldest_export(t: Driver) -> None:
    """A ClusterIP service exported on two clusters with conflicting ports should apply the
    conflict resolution policy and report a Conflict condition on each ServiceExport."""
    moved = dict(t.hello_service["spec"]["ports"][0])
    moved["port"] += 1
    t.hello_service2["spec"]["ports"] = [moved]
    t.start_two_clusters()
    first, second = t.clients[0], t.clients[1]
    t.await_service_export_condition(first, c.CONFLICT, c.TRUE)
    t.await_service_export_condition(second, c.CONFLICT, c.TRUE)

    def verify(si: dict[str, Any]) -> None:
        assert mcs_ports(si["spec"]["ports"]) == mcs_ports(t.hello_service["spec"]["ports"]), \
            "The service ports were not resolved correctly"

    t.await_service_import(first, verify)


# -- service_import.go: testHeadlessServiceImport, testExternalNameService, type conflict --


def test_headless_export_imports_headless_everywhere_and_unexport_deletes(t: Driver) -> None:
    """Exporting a headless service should create a ServiceImport of type Headless in the
    service's namespace in each cluster. Unexporting should delete the ServiceImport."""
    t.hello_service["spec"]["clusterIP"] = "None"
    t.start()
    for client in t.clients:
        si = t.await_service_import(client)
        assert si["spec"]["type"] == "Headless", \
            f"ServiceImport on cluster {client.name!r} has type {si['spec']['type']!r}"

    t.delete_service_export(t.clients[0])
    for client in t.clients:
        t.await_no_service_import(client, f"the ServiceImport still exists on cluster "
                                          f"{client.name!r} after unexporting the service")


def test_no_clusterset_ip_for_headless(t: Driver) -> None:
    """No clusterset IP should be allocated for a Headless ServiceImport."""
    t.hello_service["spec"]["clusterIP"] = "None"
    t.start()
    first = t.clients[0]
    t.await_service_import(first)

    def no_ips() -> None:
        si = t.get_service_import(first)
        assert si is not None and not si["spec"].get("ips"), si

    consistently(no_ips, what="a Headless ServiceImport has no IPs")


def test_externalname_export_is_invalid_and_not_imported(t: Driver) -> None:
    """Exporting an ExternalName service should set ServiceExport Valid condition to False."""
    spec = t.hello_service["spec"]
    spec.update(type="ExternalName", externalName="example.com")
    spec.pop("ipFamilyPolicy")
    t.start()
    first = t.clients[0]
    t.await_service_export_condition(first, c.VALID, c.FALSE)
    t.ensure_no_service_import(first, "the ServiceImport should not exist for an "
                                      "ExternalName service")


def test_conflicting_headlessness(t: Driver) -> None:
    """A service exported on two clusters with conflicting headlessness should apply the
    conflict resolution policy and report a Conflict condition on the ServiceExport."""
    t.hello_service2["spec"]["clusterIP"] = "None"
    t.start_two_clusters()
    t.await_service_export_condition(t.clients[0], c.CONFLICT, c.TRUE)
    t.await_service_export_condition(t.clients[1], c.CONFLICT, c.TRUE)
    for client in t.clients:
        si = t.await_service_import(client)
        assert si["spec"]["type"] == "ClusterSetIP", \
            f"ServiceImport on cluster {client.name!r} has type {si['spec']['type']!r}"


# -- endpoint_slice.go ---------------------------------------------------------------------


def test_mcs_endpoint_slices_everywhere_and_unexport_deletes(t: Driver) -> None:
    """Exporting a service should create an MCS EndpointSlice in the service's namespace in
    each cluster with the required MCS labels. Unexporting should delete the EndpointSlice.
    (Optional upstream; run here without `--skip-verify-eps-managed-by`.)"""
    t.start()
    names: dict[str, list[str]] = {}
    for client in t.clients:
        for family in t.await_service_import_ip_families(client):
            eps = t.await_mcs_endpoint_slice(client, address_type_of(family))
            names.setdefault(client.name, []).append(eps["metadata"]["name"])
            labels = _meta(eps, "labels")
            assert labels.get(LABEL_MCS_SERVICE_NAME) == HELLO, (
                f"the MCS EndpointSlice {eps['metadata']['name']!r} does not contain the "
                f"{LABEL_MCS_SERVICE_NAME!r} label referencing the service name")
            assert LABEL_ENDPOINTSLICE_MANAGED_BY in labels
            assert labels[LABEL_ENDPOINTSLICE_MANAGED_BY] != K8S_ENDPOINTSLICE_MANAGER
            # Beyond upstream: ours say who manages them (docs/reference.md#import-path).
            assert labels[LABEL_ENDPOINTSLICE_MANAGED_BY] == ENDPOINTSLICE_MANAGER
    assert {name: len(found) for name, found in names.items()} == {n: 2 for n in CLUSTERS}

    t.delete_service_export(t.clients[0])
    for client in t.clients:
        for name in names[client.name]:
            def gone(client: Member = client, name: str = name) -> None:
                assert name not in {s["metadata"]["name"] for s in t.endpoint_slices(client)}, \
                    f"the EndpointSlice {name!r} was not deleted on unexport from {client.name!r}"
            eventually(gone, what=f"{client.name}'s MCS EndpointSlice {name} deleted")


# -- connectivity.go, the control-plane half -------------------------------------------------


def _routing(t: Driver, client: Member) -> dict[str, set[tuple[str, str]]]:
    """What kube-proxy would route `client`'s hello ClusterSetIP to: port name → {(source
    cluster, endpoint address)} over the MCS slices of the derived Service."""
    si = t.get_service_import(client)
    assert si is not None, f"no ServiceImport on {client.name}"
    ips = si["spec"].get("ips") or []
    assert ips, f"the ServiceImport on {client.name} has no ClusterSetIP"
    slices = t.mcs_endpoint_slices(client)
    assert slices, f"no MCS EndpointSlice on {client.name}"
    derived = {s["metadata"]["labels"].get("kubernetes.io/service-name") for s in slices}
    assert len(derived) == 1, derived
    service = t.service(client, derived.pop() or "")
    assert service is not None, f"no derived Service on {client.name}"
    # The derived Service holds the ClusterSetIPs kube-proxy programs.
    assert service["spec"].get("clusterIPs") == ips, (service["spec"], ips)
    routes: dict[str, set[tuple[str, str]]] = {}
    for eps in slices:
        source = eps["metadata"]["labels"][LABEL_MCS_SOURCE_CLUSTER]
        ready = [a for e in eps.get("endpoints") or []
                 if (e.get("conditions") or {}).get("ready") is not False
                 for a in e["addresses"]]
        for port in eps.get("ports") or []:
            routes.setdefault(port["name"], set()).update((source, a) for a in ready)
    return routes


def _pods(t: Driver, cluster: str) -> set[tuple[str, str]]:
    return {(cluster, ip) for ips in t.pod_ips[cluster].values() for ip in ips}


def test_not_exported_service_is_not_imported(t: Driver) -> None:
    """Connectivity to a service that is not exported should be inaccessible. (Control
    plane: nothing that DNS or kube-proxy could serve exists in any cluster.)"""
    t.start(auto_export=False)
    assert t.endpoint_slices(t.clients[0]), "hello's own slices, as the controller made them"

    def nothing() -> None:
        for client in t.clients:
            assert t.get_service_import(client) is None, client.name
            assert t.mcs_endpoint_slices(client) == [], client.name

    consistently(nothing, what="no ServiceImport nor MCS EndpointSlice for an unexported "
                               "service")
    assert t.fleet.read(f"/api/v1/serviceimports/{t.namespace}/{HELLO}") is None


def test_exported_clusterip_service_is_routable_everywhere(t: Driver) -> None:
    """Connectivity to an exported ClusterIP service should be accessible through DNS.
    (Control plane: in every cluster the ClusterSetIPs lead to west's pod, per port.)"""
    t.start()
    expected = {"tcp": _pods(t, "west"), "udp": _pods(t, "west")}
    for client in t.clients:
        eventually(lambda client=client: _assert_routes(t, client, expected),  # type: ignore[misc]
                   what=f"{client.name} routes hello to west's pods")


def test_only_the_exporting_cluster_is_routed_to(t: Driver) -> None:
    """Connectivity to a ClusterIP service existing in two clusters but exported from one
    should only access the exporting cluster."""
    t.start(auto_export=False)
    t.deploy_hello_service(t.clients[1], t.hello_service2)
    t.create_service_export(t.clients[0], t.hello_export)
    expected = {"tcp": _pods(t, "west"), "udp": _pods(t, "west")}
    for client in t.clients:
        eventually(lambda client=client: _assert_routes(t, client, expected),  # type: ignore[misc]
                   what=f"{client.name} routes hello to west's pods only")
    consistently(lambda: _assert_routes(t, t.clients[1], expected),
                 what="north's own hello pods stay out of the import")


def test_same_port_name_other_number_routes_only_to_the_winner(t: Driver) -> None:
    """Connectivity to exported services with same port name but different port numbers on
    each cluster should only route traffic to the cluster that exposes the port. (Upstream
    checks port 42 answers from west's pod only.)"""
    t.hello_service2["spec"]["ports"] = [
        {"name": "tcp", "port": 4242, "protocol": "TCP", "targetPort": 42}]
    t.start_two_clusters()
    expected = {"tcp": _pods(t, "west"), "udp": _pods(t, "west")}
    for client in t.clients:
        eventually(lambda client=client: _assert_routes(t, client, expected),  # type: ignore[misc]
                   what=f"{client.name} routes tcp/42 to west only")
        si = t.get_service_import(client)
        assert si is not None
        assert mcs_ports(si["spec"]["ports"]) == mcs_ports(t.hello_service["spec"]["ports"])


def test_each_port_routes_only_to_the_clusters_that_expose_it(t: Driver) -> None:
    """Connectivity to exported services with different port name on each cluster should
    route traffic to each port only to the cluster that exposes it. (Upstream: port 42 →
    west's pod, port 4242 → north's.)"""
    tcp2 = {"name": "tcp2", "port": 4242, "protocol": "TCP", "targetPort": 42}
    t.hello_service2["spec"]["ports"] = [tcp2]
    t.start_two_clusters()
    expected = {"tcp": _pods(t, "west"), "udp": _pods(t, "west"), "tcp2": _pods(t, "north")}
    for client in t.clients:
        eventually(lambda client=client: _assert_routes(t, client, expected),  # type: ignore[misc]
                   what=f"{client.name} routes each port to the cluster exposing it")
        si = t.get_service_import(client)
        assert si is not None
        ports = {(p["name"], p["port"]) for p in si["spec"]["ports"]}
        assert ports == {("tcp", 42), ("udp", 42), ("tcp2", 4242)}


def _assert_routes(t: Driver, client: Member, expected: dict[str, set[tuple[str, str]]]
                   ) -> None:
    routes = _routing(t, client)
    assert routes == expected, f"{client.name} routes {routes}, not {expected}"


# -- clusterip_service_dns.go, headless_service_dns.go (Optional, DNS) --------------------
# What the CoreDNS multicluster plugin would answer in each cluster, from the objects mcsync
# wrote there (tests/e2e/mcsdns.py reads them as the plugin does: ServiceImports at
# v1alpha1, the MCS-labelled EndpointSlices, Namespaces) instead of nslookup in a pod.


def _dns(client: Member) -> MulticlusterDns:
    return MulticlusterDns(
        service_imports=client.kube.items(f"/apis/{MCS_GROUP}/v1alpha1/serviceimports"),
        endpoint_slices=client.kube.items(
            f"/apis/discovery.k8s.io/v1/endpointslices?labelSelector={LABEL_MCS_SERVICE_NAME}"),
        namespaces=[n["metadata"]["name"] for n in client.kube.items("/api/v1/namespaces")],
    )


def _hello_domain(t: Driver) -> str:
    return f"{HELLO}.{t.namespace}.svc.{DNS_ZONE}"


def _record_type(family: str) -> str:
    return "A" if family == "IPv4" else "AAAA"


def test_dns_clusterip_resolves_to_the_clusterset_ip(t: Driver) -> None:
    """A DNS lookup of the <service>.<ns>.svc.clusterset.local domain for a ClusterIP service
    should resolve to the clusterset IP. (Upstream: the output contains the IP; here the
    answer is exactly it, per family.)"""
    t.start()
    for client in t.clients:
        def has_ips(si: dict[str, Any], client: Member = client) -> None:
            assert si["spec"].get("ips"), \
                f"ServiceImport on cluster {client.name!r} does not contain an IP"
        si = t.await_service_import(client, has_ips)
        for ip in si["spec"]["ips"]:
            qtype = _record_type(ip_family_of(ip))
            answer = _dns(client).addresses(_hello_domain(t), qtype)
            assert answer == [ip], f"{qtype} {_hello_domain(t)} on {client.name}: {answer}"


def test_dns_clusterip_srv_records(t: Driver) -> None:
    """A DNS SRV query of the <service>.<ns>.svc.clusterset.local domain for a ClusterIP
    service should return valid SRV records: one, port 42, target the service's name."""
    t.start()
    expected = [Srv(t.hello_service["spec"]["ports"][0]["port"], _hello_domain(t))]
    for client in t.clients:
        eventually(lambda client=client: _assert_equal(  # type: ignore[misc]
            _dns(client).srv(_hello_domain(t)), expected),
            what=f"SRV {_hello_domain(t)} on {client.name}")


def test_dns_headless_resolves_to_the_ready_pods(
    t: Driver, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A DNS query of the <service>.<ns>.svc.clusterset.local domain for a headless service
    should return the ready endpoint addresses of all the backing pods (two replicas)."""
    monkeypatch.setattr(conformance, "PODS", 2)
    t.hello_service["spec"]["clusterIP"] = "None"
    t.start()
    for client in t.clients:
        for family in t.await_service_import_ip_families(client):
            pods = sorted(t.pod_ips[t.clients[0].name][family])
            assert len(pods) == 2
            eventually(lambda client=client, family=family, pods=pods: _assert_equal(  # type: ignore[misc]
                _dns(client).addresses(_hello_domain(t), _record_type(family)), pods),
                what=f"{_record_type(family)} {_hello_domain(t)} on {client.name}")


def test_dns_headless_statefulset_pod_by_hostname_and_cluster(
    t: Driver, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A DNS query of the <hostname>.<clusterid>.<service>.<ns>.svc.clusterset.local domain
    for a headless StatefulSet service should return the requested pod's endpoint address.
    (The driver plays the EndpointSlice controller: a StatefulSet's pods get hostnames.)"""
    monkeypatch.setattr(conformance, "PODS", 2)
    t.hello_service["spec"]["clusterIP"] = "None"
    t.start(auto_export=False)
    west = t.clients[0]
    for eps in t.endpoint_slices(west):
        for i, endpoint in enumerate(eps["endpoints"]):
            endpoint["hostname"] = f"{HELLO}-ss-{i}"
        west.kube.replace(f"{t._slices()}/{eps['metadata']['name']}", eps)
    t.create_service_export(west, t.hello_export)
    for client in t.clients:
        for family in t.await_service_import_ip_families(client):
            def complete(eps: dict[str, Any]) -> None:
                assert len(eps["endpoints"]) == 2, eps["metadata"]["name"]
                for endpoint in eps["endpoints"]:
                    assert endpoint.get("conditions", {}).get("ready", True)
                    assert endpoint.get("hostname"), "the hostname field is not set"
            eps = t.await_mcs_endpoint_slice(client, address_type_of(family), complete)
            cluster = eps["metadata"]["labels"][LABEL_MCS_SOURCE_CLUSTER]
            assert cluster == west.name
            model = _dns(client)
            for endpoint in eps["endpoints"]:
                name = f"{endpoint['hostname']}.{cluster}.{_hello_domain(t)}"
                assert model.addresses(name, _record_type(family)) == sorted(
                    endpoint["addresses"]), f"{name} on {client.name}"


def test_dns_headless_srv_records(t: Driver, monkeypatch: pytest.MonkeyPatch) -> None:
    """A DNS SRV query of the <service>.<ns>.svc.clusterset.local domain for a headless
    service should return valid SRV records: one per endpoint of every IP family, named
    after the endpoint's host name, on the service's port."""
    monkeypatch.setattr(conformance, "PODS", 2)
    t.hello_service["spec"]["clusterIP"] = "None"
    t.start()
    west = t.clients[0].name
    hosts = [endpoint_hostname(ip, None) for family in t.hello_service["spec"]["ipFamilies"]
             for ip in t.pod_ips[west][family]]
    port = t.hello_service["spec"]["ports"][0]["port"]
    expected = sorted(Srv(port, f"{h}.{west}.{_hello_domain(t)}") for h in hosts)
    for client in t.clients:
        eventually(lambda client=client: _assert_equal(  # type: ignore[misc]
            _dns(client).srv(_hello_domain(t)), expected),
            what=f"SRV {_hello_domain(t)} on {client.name}")


def _assert_equal(actual: Any, expected: Any) -> None:
    assert actual == expected, f"{actual} != {expected}"
