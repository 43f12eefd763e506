"""End to end: an agent process sends its cluster's EndpointSlices to a real hub
(docs/reference.md#import-path).

A pod-IP change in a slice reaches the hub as one PUT; a relist that changes nothing sends
nothing; a slice of a Service that is not exported, and one that mcsync manages, never
leave the cluster; a deleted slice and an unexported Service are withdrawn; a restarted
agent repairs the hub's set both ways (docs/reference.md#export-path).
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from tests.kube.fixtures import KubeCluster
from tests.member.agent_support import (
    AgentFactory,
    AgentProcess,
    HubProcess,
    service_body,
    service_export_body,
    wait_for,
)

pytestmark = pytest.mark.e2e

CLUSTER = "member-1"


def endpointslice(
    name: str, *, service: str = "web", ips: tuple[str, ...] = ("10.0.0.1",),
    labels: dict[str, str] | None = None,
) -> dict[str, Any]:
    """A slice as kube-controller-manager writes it, pod references included."""
    return {
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": {
            "name": name,
            "namespace": "shop",
            "labels": {
                "kubernetes.io/service-name": service,
                "endpointslice.kubernetes.io/managed-by": "endpointslice-controller.k8s.io",
                **(labels or {}),
            },
        },
        "addressType": "IPv4",
        "ports": [{"name": "http", "protocol": "TCP", "port": 8080}],
        "endpoints": [
            {
                "addresses": [ip],
                "conditions": {"ready": True, "serving": True, "terminating": False},
                "nodeName": "node-1",
                "targetRef": {"kind": "Pod", "namespace": "shop", "name": f"pod-{index}"},
            }
            for index, ip in enumerate(ips)
        ],
    }


def hub_slices(hub: HubProcess) -> dict[str, list[str]]:
    """{slice name: its addresses} of every EndpointSliceExport of CLUSTER on the hub."""
    answer = hub.request("GET", "/api/v1/endpointslices", params={"cluster": CLUSTER})
    assert answer.status_code == 200, answer.text
    return {
        item["metadata"]["name"]: [a for e in item["spec"]["endpoints"] for a in e["addresses"]]
        for item in answer.json()["items"]
    }


def wait_hub(hub: HubProcess, expected: dict[str, list[str]]) -> None:
    wait_for(lambda: hub_slices(hub) == expected, what=f"the hub's slices to be {expected}")


def writes(agent: AgentProcess, operation: str) -> float:
    value = agent.metric("mcsync_agent_endpointslice_writes_total", {"operation": operation})
    assert value is not None  # exists from start
    return value


def slices_settled(agent: AgentProcess) -> bool:
    """Nothing waiting in the slice queue and no key in a worker's hands."""
    queue = {"name": "endpointslice"}
    return (
        agent.metric("workqueue_depth", queue) == 0
        and agent.metric("workqueue_unfinished_work_seconds", queue) == 0
    )


def export_web(kube: KubeCluster) -> None:
    kube.state.create("services", "shop", service_body("web", "shop"))
    kube.state.create("serviceexports", "shop", service_export_body("web", "shop"))


def start_agent(kube: KubeCluster, hub: HubProcess, agents: AgentFactory) -> AgentProcess:
    token = hub.register(CLUSTER)
    return agents("a", kubeconfig=kube.kubeconfig, hub=hub, cluster_id=CLUSTER, token=token)


def test_a_pod_ip_change_reaches_the_hub_as_one_write(
    kube_cluster: KubeCluster, hub_process: HubProcess, agent_factory: AgentFactory
) -> None:
    state = kube_cluster.state
    export_web(kube_cluster)
    state.create("endpointslices", "shop", endpointslice("web-abc"))
    state.create("services", "shop", service_body("api", "shop"))  # not exported
    state.create("endpointslices", "shop", endpointslice("api-xyz", service="api"))
    state.create("endpointslices", "shop", endpointslice(
        "web-imported", ips=("10.9.9.9",),
        labels={"endpointslice.kubernetes.io/managed-by": "mcsync.io"},
    ))
    agent = start_agent(kube_cluster, hub_process, agent_factory)
    assert agent.metric("mcsync_agent_endpointslice_export_errors_total",
                        {"reason": "rejected"}) == 0

    wait_hub(hub_process, {"web-abc": ["10.0.0.1"]})
    wait_for(lambda: slices_settled(agent), what="the slice queue drained")
    puts = writes(agent, "put")

    # A pod is replaced: one slice changes, one PUT carries it.
    changed = copy.deepcopy(state.get("endpointslices", "shop", "web-abc"))
    assert changed is not None
    changed["endpoints"][0]["addresses"] = ["10.0.0.2"]
    changed["endpoints"][0]["targetRef"]["name"] = "pod-new"
    state.update("endpointslices", "shop", changed)
    wait_hub(hub_process, {"web-abc": ["10.0.0.2"]})
    wait_for(lambda: slices_settled(agent), what="the slice queue drained")
    assert writes(agent, "put") == puts + 1

    # A relist that finds nothing changed sends nothing.
    state.compact()
    state.close_watches()
    state.create("endpointslices", "shop", endpointslice("web-def", ips=("10.0.0.3",)))
    wait_hub(hub_process, {"web-abc": ["10.0.0.2"], "web-def": ["10.0.0.3"]})
    wait_for(lambda: slices_settled(agent), what="the slice queue drained")
    assert writes(agent, "put") == puts + 2  # only the new slice

    # A slice that goes is withdrawn; unexporting withdraws the rest.
    state.delete("endpointslices", "shop", "web-abc")
    wait_hub(hub_process, {"web-def": ["10.0.0.3"]})
    state.delete("serviceexports", "shop", "web")
    wait_hub(hub_process, {})
    wait_for(lambda: state.get("serviceexports", "shop", "web") is None,
             what="the ServiceExport gone (finalizer released)")
    assert agent.metric("mcsync_agent_endpointslices_exported") == 0
    assert agent.stop() == 0


def test_a_restarted_agent_repairs_the_hubs_slices_both_ways(
    kube_cluster: KubeCluster, hub_process: HubProcess, agent_factory: AgentFactory
) -> None:
    state = kube_cluster.state
    export_web(kube_cluster)
    for name, ip in (("web-a", "10.0.0.1"), ("web-b", "10.0.0.2"), ("web-c", "10.0.0.3")):
        state.create("endpointslices", "shop", endpointslice(name, ips=(ip,)))
    agent = start_agent(kube_cluster, hub_process, agent_factory)
    wait_hub(hub_process, {"web-a": ["10.0.0.1"], "web-b": ["10.0.0.2"],
                           "web-c": ["10.0.0.3"]})
    assert agent.stop() == 0

    # While the agent is down: one slice changes, one goes, one comes.
    changed = copy.deepcopy(state.get("endpointslices", "shop", "web-a"))
    assert changed is not None
    changed["endpoints"][0]["addresses"] = ["10.0.1.1"]
    state.update("endpointslices", "shop", changed)
    state.delete("endpointslices", "shop", "web-b")
    state.create("endpointslices", "shop", endpointslice("web-d", ips=("10.0.0.4",)))

    agent.start()
    wait_hub(hub_process, {"web-a": ["10.0.1.1"], "web-c": ["10.0.0.3"],
                           "web-d": ["10.0.0.4"]})
    wait_for(lambda: slices_settled(agent), what="the slice queue drained")
    # Exactly the repair's writes: web-c, unchanged, is not sent again.
    assert writes(agent, "put") == 2
    assert writes(agent, "delete") == 1
    assert agent.metric("mcsync_agent_endpointslices_exported") == 3


def test_slices_converge_after_a_hub_outage(
    kube_cluster: KubeCluster, hub_process: HubProcess, agent_factory: AgentFactory
) -> None:
    state = kube_cluster.state
    export_web(kube_cluster)
    state.create("endpointslices", "shop", endpointslice("web-a"))
    state.create("endpointslices", "shop", endpointslice("web-b", ips=("10.0.0.2",)))
    agent = start_agent(kube_cluster, hub_process, agent_factory)
    wait_hub(hub_process, {"web-a": ["10.0.0.1"], "web-b": ["10.0.0.2"]})

    hub_process.stop()
    wait_for(lambda: agent.metric("mcsync_agent_hub_reachable") == 0, what="the hub seen down")
    changed = copy.deepcopy(state.get("endpointslices", "shop", "web-a"))
    assert changed is not None
    changed["endpoints"][0]["addresses"] = ["10.0.1.1"]
    state.update("endpointslices", "shop", changed)
    state.delete("endpointslices", "shop", "web-b")
    wait_for(
        lambda: (agent.metric("mcsync_agent_endpointslice_export_errors_total",
                              {"reason": "unavailable"}) or 0) > 0,
        what="a slice write failing while the hub is down",
    )

    hub_process.start()
    wait_hub(hub_process, {"web-a": ["10.0.1.1"]})
    wait_for(lambda: slices_settled(agent), what="the slice queue drained")
    assert writes(agent, "put") == 3  # web-a, web-b, then web-a once more: nothing doubled
    assert writes(agent, "delete") == 1
    assert agent.stop() == 0


def test_a_new_leader_repairs_and_sends_nothing_twice(
    kube_cluster: KubeCluster, hub_process: HubProcess, agent_factory: AgentFactory
) -> None:
    state = kube_cluster.state
    export_web(kube_cluster)
    state.create("endpointslices", "shop", endpointslice("web-a"))
    token = hub_process.register(CLUSTER)
    election = ["--leader-elect", "--lease-namespace", "mcsync", "--lease-duration", "4"]
    one, two = (
        agent_factory(name, kubeconfig=kube_cluster.kubeconfig, hub=hub_process,
                      cluster_id=CLUSTER, token=token, extra=election)
        for name in ("one", "two")
    )
    leader: AgentProcess = wait_for(
        lambda: next((a for a in (one, two) if a.metric("mcsync_agent_leader") == 1), None),
        what="a leader",
    )
    standby = two if leader is one else one
    wait_hub(hub_process, {"web-a": ["10.0.0.1"]})
    assert writes(standby, "put") == 0  # a standby never writes

    leader.kill()  # no release: the standby takes over when the Lease expires
    wait_for(lambda: standby.metric("mcsync_agent_leader") == 1, what="the standby leading")
    state.create("endpointslices", "shop", endpointslice("web-b", ips=("10.0.0.2",)))
    wait_hub(hub_process, {"web-a": ["10.0.0.1"], "web-b": ["10.0.0.2"]})
    wait_for(lambda: slices_settled(standby), what="the new leader's slice queue drained")
    assert writes(standby, "put") == 1  # web-a, already on the hub, was not sent again
    assert standby.metric("mcsync_agent_endpointslices_exported") == 2
    assert standby.stop() == 0
