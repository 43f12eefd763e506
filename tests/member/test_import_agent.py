"""End to end: a ServiceExport in cluster east is imported in west and east
(docs/reference.md#import-path).

Real hub process, real agent processes, two emulated clusters; the test plays
kube-controller-manager's EndpointSlice controller in east. West has the namespace, so it
receives the ServiceImport, the derived Service (with a ClusterIP the emulator allocated,
copied into `ServiceImport.spec.ips`) and the mirrored EndpointSlice; a namespace west
creates later receives its imports then; unexporting takes all three away everywhere.
"""

from __future__ import annotations

import time
from typing import Any

import pytest

from member.imports.importspec import derived_service_name, mirrored_slice_name
from tests.kube.fixtures import KubeCluster
from tests.member.agent_support import (
    AgentFactory,
    AgentProcess,
    HubProcess,
    service_body,
    service_export_body,
    source_slice_body,
    wait_for,
)

pytestmark = pytest.mark.e2e

NS = "shop"
DERIVED = derived_service_name("web")
MIRRORED = mirrored_slice_name("web", "east", "web-abc")


def source_slice(ip: str) -> dict[str, Any]:
    return source_slice_body(ip, NS)


def imported(kube: KubeCluster) -> dict[str, Any] | None:
    """{ServiceImport, derived Service, mirrored slice} of `kube`, once all three exist."""
    state = kube.state
    si = state.get("serviceimports", NS, "web")
    svc = state.get("services", NS, DERIVED)
    eps = state.get("endpointslices", NS, MIRRORED)
    if si is None or svc is None or eps is None or not si["spec"].get("ips"):
        return None
    return {"si": si, "svc": svc, "eps": eps}


def gone(kube: KubeCluster) -> bool:
    state = kube.state
    return (
        state.get("serviceimports", NS, "web") is None
        and state.get("services", NS, DERIVED) is None
        and state.get("endpointslices", NS, MIRRORED) is None
    )


def import_settled(agent: AgentProcess) -> bool:
    queues = ("serviceimport", "derivedservice", "mirroredslices")
    return all(agent.metric("workqueue_depth", {"name": q}) == 0 for q in queues)


def import_writes(agent: AgentProcess) -> float:
    total = 0.0
    for kind in ("ServiceImport", "Service", "EndpointSlice"):
        for operation in ("create", "update", "status", "delete"):
            value = agent.metric(
                "mcsync_agent_import_writes_total", {"kind": kind, "operation": operation}
            )
            total += value or 0.0
    return total


def sync_latency(agent: AgentProcess) -> tuple[float, float]:
    """(count, sum) of west's mcs_endpointslice_sync_latency_seconds for source east."""
    labels = {"source_cluster": "east"}
    count = agent.metric("mcs_endpointslice_sync_latency_seconds_count", labels)
    total = agent.metric("mcs_endpointslice_sync_latency_seconds_sum", labels)
    return count or 0.0, total or 0.0


def agent(
    name: str,
    kube: KubeCluster,
    hub: HubProcess,
    agents: AgentFactory,
    extra: list[str] | None = None,
) -> AgentProcess:
    token = hub.register(name)
    return agents(
        name, kubeconfig=kube.kubeconfig, hub=hub, cluster_id=name, token=token, extra=extra
    )


def export_from_east(
    kube_cluster_factory: Any, hub: HubProcess, agents: AgentFactory, **west: Any
) -> KubeCluster:
    """East exports shop/web (its agent running); answers west, which has the namespace."""
    east = kube_cluster_factory("east")
    west_cluster: KubeCluster = kube_cluster_factory("west", **west)
    west_cluster.state.create_namespace(NS)
    east.state.create("services", NS, service_body("web", NS))
    east.state.create("endpointslices", NS, source_slice("10.0.0.1"))
    east.state.create("serviceexports", NS, service_export_body("web", NS))
    agent("east", east, hub, agents)
    wait_for(
        lambda: hub.request("GET", "/api/v1/endpointslices").json()["items"],
        what="east's slice on the hub",
    )
    return west_cluster


def test_an_export_is_imported_everywhere_and_unexported_everywhere(
    kube_cluster_factory: Any, hub_process: HubProcess, agent_factory: AgentFactory
) -> None:
    east, west = kube_cluster_factory("east"), kube_cluster_factory("west")
    west.state.create_namespace(NS)
    east.state.create("services", NS, service_body("web", NS, ipFamilies=["IPv4"]))
    east.state.create("endpointslices", NS, source_slice("10.0.0.1"))
    agent("east", east, hub_process, agent_factory)
    west_agent = agent("west", west, hub_process, agent_factory)
    east.state.create("serviceexports", NS, service_export_body("web", NS))

    for kube in (west, east):
        found = wait_for(lambda k=kube: imported(k), what=f"the import in {kube.name}")
        si, svc, eps = found["si"], found["svc"], found["eps"]
        assert si["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "mcsync"
        assert si["spec"]["type"] == "ClusterSetIP"
        assert [(p["name"], p["port"]) for p in si["spec"]["ports"]] == [("http", 80)]
        assert si["spec"]["ips"] == svc["spec"]["clusterIPs"]
        assert si["status"]["clusters"] == [{"cluster": "east"}]
        assert "selector" not in svc["spec"]
        assert svc["metadata"]["ownerReferences"][0]["uid"] == si["metadata"]["uid"]
        assert eps["metadata"]["labels"]["multicluster.kubernetes.io/source-cluster"] == "east"
        assert eps["metadata"]["labels"]["kubernetes.io/service-name"] == DERIVED
        assert eps["endpoints"][0]["addresses"] == ["10.0.0.1"]

    # One endpoint change in east: the mirrored slice follows in west, one write.
    wait_for(lambda: import_settled(west_agent), what="west's import queues drained")
    written = import_writes(west_agent)
    synced_before = sync_latency(west_agent)
    changed_at = time.time()
    changed = dict(east.state.get("endpointslices", NS, "web-abc") or {})
    changed["endpoints"] = [{"addresses": ["10.0.0.2"], "conditions": {"ready": True}}]
    east.state.update("endpointslices", NS, changed)
    wait_for(
        lambda: (
            (west.state.get("endpointslices", NS, MIRRORED) or {})
            .get("endpoints", [{}])[0]
            .get("addresses")
            == ["10.0.0.2"]
        ),
        what="the endpoint change mirrored in west",
    )
    wait_for(lambda: import_settled(west_agent), what="west's import queues drained")
    assert import_writes(west_agent) == written + 1
    # The end-to-end sync latency of that change, labelled by its source cluster only: from
    # east's agent seeing the slice change to west's mirror written
    # (docs/reference.md#observability).
    count, total = sync_latency(west_agent)
    assert count == synced_before[0] + 1
    assert 0 < total - synced_before[1] < time.time() - changed_at

    # Unexport: all three go in both clusters.
    east.state.delete("serviceexports", NS, "web")
    for kube in (west, east):
        wait_for(lambda k=kube: gone(k), what=f"the import gone from {kube.name}")


def test_a_namespace_created_later_receives_its_imports(
    kube_cluster_factory: Any, hub_process: HubProcess, agent_factory: AgentFactory
) -> None:
    east, west = kube_cluster_factory("east"), kube_cluster_factory("west")
    east.state.create("services", NS, service_body("web", NS))
    east.state.create("endpointslices", NS, source_slice("10.0.0.1"))
    east.state.create("serviceexports", NS, service_export_body("web", NS))
    agent("east", east, hub_process, agent_factory)
    west_agent = agent("west", west, hub_process, agent_factory)
    wait_for(lambda: imported(east), what="the import in east")
    assert west.state.get("serviceimports", NS, "web") is None  # no namespace, no import
    assert west_agent.metric("mcsync_agent_serviceimports_imported") == 0
    west.state.create_namespace(NS)
    wait_for(lambda: imported(west), what="the import in west once its namespace exists")


@pytest.mark.parametrize("scope", [[], ["--namespace", NS]], ids=["all namespaces", "--namespace"])
def test_an_agent_started_later_imports_what_the_hub_lists(
    kube_cluster_factory: Any,
    hub_process: HubProcess,
    agent_factory: AgentFactory,
    scope: list[str],
) -> None:
    west = export_from_east(kube_cluster_factory, hub_process, agent_factory)
    west_agent = agent("west", west, hub_process, agent_factory, extra=scope)
    for kind in ("ServiceImport", "Service", "EndpointSlice"):
        for operation in ("create", "update", "status", "delete"):
            assert (
                west_agent.metric(
                    "mcsync_agent_import_writes_total", {"kind": kind, "operation": operation}
                )
                is not None
            ), (kind, operation)  # every series exists from start
    found = wait_for(lambda: imported(west), what="the import in west")
    assert found["si"]["spec"]["ips"] == found["svc"]["spec"]["clusterIPs"]
    assert found["eps"]["endpoints"][0]["addresses"] == ["10.0.0.1"]
    wait_for(lambda: import_settled(west_agent), what="west's import queues drained")
    written = import_writes(west_agent)
    # Six writes for the key, the fewest docs/reference.md#import-path allows (the derived Service
    # names the ServiceImport's uid, the ServiceImport its clusterIPs, status is a subresource, and
    # its Ready condition turns True once, after the slice is written), and none refused:
    # no 409 retried, no object written twice.
    assert written == 6
    assert {
        (verb, resource): n
        for (verb, resource), n in west.state.request_counts().items()
        if verb in ("create", "update", "patch", "delete")
    } == {
        ("create", "serviceimports"): 1,
        ("update", "serviceimports"): 1,
        ("update", "serviceimports/status"): 2,  # Pending, then Ready
        ("create", "services"): 1,
        ("create", "endpointslices"): 1,
    }
    assert west_agent.metric("mcsync_agent_serviceimports_imported") == 1
    assert west_agent.metric("mcsync_agent_endpoints_imported") == 1
    ready = next(c for c in west.state.get("serviceimports", NS, "web")["status"]["conditions"]
                 if c["type"] == "Ready")
    assert (ready["status"], ready["reason"]) == ("True", "Ready")

    # A restarted agent's startup repair finds everything as it should be and rewrites
    # nothing, although the API server defaulted fields the agent never set.
    assert west_agent.stop() == 0
    west_agent.start()
    wait_for(
        lambda: (
            (
                west_agent.metric(
                    "mcsync_agent_reconcile_duration_seconds_count",
                    {"controller": "mirroredslices"},
                )
                or 0
            )
            >= 1
            and import_settled(west_agent)
        ),
        what="west's restarted agent reconciled the key",
    )
    assert import_writes(west_agent) == 0
    assert written > 0
