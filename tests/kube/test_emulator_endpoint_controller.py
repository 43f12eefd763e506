"""The EndpointSlice stand-in of demo fleets (`sandbox/emulator/endpoints.py`).

Off by default (tests write the slices they need); with a range, every Service with a
selector gets one slice as kube-controller-manager would write it, kept minimal: an
unchanged Service never rewrites its slice.
"""

from __future__ import annotations

from typing import Any

import pytest

from shared.constants import LABEL_ENDPOINTSLICE_MANAGED_BY, LABEL_SERVICE_NAME
from tests.kube.fixtures import KubeCluster, KubeClusterFactory
from tests.kube.support import service, wait_for

NS = "shop"
CIDR = "192.0.2.0/29"  # 6 hosts: enough for three Services of two endpoints


def slices(cluster: KubeCluster, name: str) -> list[dict[str, Any]]:
    return [s for s in cluster.state.list("endpointslices", NS)
            if s["metadata"]["labels"].get(LABEL_SERVICE_NAME) == name]


def one_slice(cluster: KubeCluster, name: str) -> dict[str, Any]:
    found = wait_for(lambda: slices(cluster, name), what=f"the slice of {name}")
    (only,) = found
    return only


@pytest.fixture
def demo(kube_cluster_factory: KubeClusterFactory) -> KubeCluster:
    return kube_cluster_factory("demo", endpoint_cidr=CIDR, namespaces=(NS,))


def test_a_selecting_service_gets_ready_endpoints_from_the_range(demo: KubeCluster) -> None:
    created = demo.state.create("services", NS, service(
        "web", selector={"app": "web"}, ports=[{"name": "http", "port": 80, "targetPort": 8080},
                                               {"name": "admin", "port": 81,
                                                "targetPort": "admin"}]))
    got = one_slice(demo, "web")
    assert got["metadata"]["labels"][LABEL_ENDPOINTSLICE_MANAGED_BY] == \
        "endpointslice-controller.k8s.io"
    (owner,) = got["metadata"]["ownerReferences"]
    assert (owner["kind"], owner["uid"], owner["controller"]) == (
        "Service", created["metadata"]["uid"], True)
    assert got["addressType"] == "IPv4"
    assert [e["addresses"] for e in got["endpoints"]] == [["192.0.2.1"], ["192.0.2.2"]]
    assert all(e["conditions"]["ready"] for e in got["endpoints"])
    # A named target port only a pod could resolve keeps the Service port's number.
    assert [(p["name"], p["port"]) for p in got["ports"]] == [("http", 8080), ("admin", 81)]


def test_the_slice_follows_the_service_and_is_not_rewritten_when_unchanged(
        demo: KubeCluster) -> None:
    demo.state.create("services", NS, service("web", selector={"app": "web"}))
    first = one_slice(demo, "web")
    svc = demo.state.get("services", NS, "web")
    assert svc is not None
    svc["metadata"]["labels"] = {"team": "a"}  # nothing the slice shows
    demo.state.update("services", NS, svc)
    demo.state.create("services", NS, service("db", selector={"app": "db"}))
    one_slice(demo, "db")  # one queue, in order: web's change was handled before db's
    assert one_slice(demo, "web")["metadata"]["resourceVersion"] == \
        first["metadata"]["resourceVersion"]
    svc = demo.state.get("services", NS, "web")
    assert svc is not None
    svc["spec"]["ports"] = [{"name": "http", "port": 90}]
    demo.state.update("services", NS, svc)
    wait_for(lambda: one_slice(demo, "web")["ports"][0]["port"] == 90, what="the new port")
    assert [e["addresses"] for e in one_slice(demo, "web")["endpoints"]] == \
        [e["addresses"] for e in first["endpoints"]]  # the same fake pods


def test_the_slice_goes_with_the_selector_or_the_service(demo: KubeCluster) -> None:
    demo.state.create("services", NS, service("web", selector={"app": "web"}))
    demo.state.create("services", NS, service("db", selector={"app": "db"}))
    one_slice(demo, "web")
    one_slice(demo, "db")
    svc = demo.state.get("services", NS, "web")
    assert svc is not None
    del svc["spec"]["selector"]
    demo.state.update("services", NS, svc)
    wait_for(lambda: not slices(demo, "web"), what="web's slice gone with its selector")
    demo.state.delete("services", NS, "db")
    wait_for(lambda: not slices(demo, "db"), what="db's slice gone with its Service")
    # Freed addresses are handed out again.
    demo.state.create("services", NS, service("a", selector={"app": "a"}))
    demo.state.create("services", NS, service("b", selector={"app": "b"}))
    demo.state.create("services", NS, service("c", selector={"app": "c"}))
    taken = [a for n in "abc" for e in one_slice(demo, n)["endpoints"] for a in e["addresses"]]
    assert len(taken) == len(set(taken)) == 6


def test_a_deleted_slice_is_written_again(demo: KubeCluster) -> None:
    demo.state.create("services", NS, service("web", selector={"app": "web"}))
    first = one_slice(demo, "web")
    demo.state.delete("endpointslices", NS, first["metadata"]["name"])
    wait_for(lambda: any(s["metadata"]["uid"] != first["metadata"]["uid"]
                         for s in slices(demo, "web")), what="the slice written again")


@pytest.mark.parametrize("spec", [
    {},  # no selector: endpoints are someone else's business
    {"selector": {"app": "x"}, "type": "ExternalName", "externalName": "example.com"},
    {"selector": {"app": "x"}, "ipFamilies": ["IPv6"], "ipFamilyPolicy": "SingleStack"},
])
def test_services_that_get_no_slice(demo: KubeCluster, spec: dict[str, Any]) -> None:
    demo.state.create("services", NS, service("none", **spec))
    demo.state.create("services", NS, service("marker", selector={"app": "m"}))
    one_slice(demo, "marker")  # handled after "none"
    assert slices(demo, "none") == []


def test_off_by_default(kube_cluster: KubeCluster) -> None:
    kube_cluster.state.create("services", NS, service("web", selector={"app": "web"}))
    kube_cluster.state.create("services", NS, service("db"))
    assert kube_cluster.state.endpoints is None
    assert kube_cluster.state.list("endpointslices", NS) == []


@pytest.mark.parametrize("cidr", ["2001:db8::/64", "192.0.2.0/31", "nonsense"])
def test_a_bad_range_is_refused(kube_cluster_factory: KubeClusterFactory, cidr: str) -> None:
    with pytest.raises(ValueError):
        kube_cluster_factory("bad", endpoint_cidr=cidr)
