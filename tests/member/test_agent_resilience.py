"""End to end: exactly-once histogram across restarts and resyncs, hub outages, failover."""

from __future__ import annotations

import copy

import pytest

from shared import conditions as c
from shared.constants import ANNOTATION_LAST_OBSERVED_RESOURCE_VERSION
from shared.metrics import EXPORT_DURATION_METRIC
from tests.kube.fixtures import KubeCluster
from tests.member.agent_support import (
    AgentFactory,
    AgentProcess,
    HubProcess,
    conditions_of,
    service_body,
    service_export_body,
    wait_for,
)

pytestmark = pytest.mark.e2e

CLUSTER = "member-1"
EXPORTED = {
    c.VALID: (c.TRUE, c.REASON_VALID),
    c.CONFLICT: (c.FALSE, c.NO_CONFLICTS),
    c.READY: (c.TRUE, c.REASON_EXPORTED),
}


def histogram_count(agent: AgentProcess) -> float:
    value = agent.metric(f"{EXPORT_DURATION_METRIC}_count", {"origin_cluster_id": CLUSTER})
    return value or 0.0


def exported(kube: KubeCluster, name: str) -> bool:
    return conditions_of(kube.state.get("serviceexports", "shop", name)) == EXPORTED


def observed_rv(hub: HubProcess, name: str) -> str | None:
    record = hub.export(CLUSTER, "shop", name)
    return (record or {}).get("metadata", {}).get("annotations", {}).get(
        ANNOTATION_LAST_OBSERVED_RESOURCE_VERSION
    )


def change_port(kube: KubeCluster, name: str, port: int) -> str:
    service = copy.deepcopy(kube.state.get("services", "shop", name))
    assert service is not None
    service["spec"]["ports"][0]["port"] = port
    return str(kube.state.update("services", "shop", service)["metadata"]["resourceVersion"])


def test_histogram_counted_once_across_restart_and_resync(
    kube_cluster: KubeCluster, hub_process: HubProcess, agent_factory: AgentFactory
) -> None:
    state = kube_cluster.state
    service = state.create("services", "shop", service_body("web", "shop"))
    state.create("serviceexports", "shop", service_export_body("web", "shop"))
    token = hub_process.register(CLUSTER)
    first = agent_factory("first", kubeconfig=kube_cluster.kubeconfig, hub=hub_process,
                          cluster_id=CLUSTER, token=token)
    wait_for(lambda: exported(kube_cluster, "web"), what="the export")
    wait_for(lambda: histogram_count(first) == 1, what="one data point")
    assert observed_rv(hub_process, "web") == service["metadata"]["resourceVersion"]

    # Forced resync: compact the emulator's history and cut its watches (410 → relist).
    state.compact()
    state.close_watches()
    wait_for(
        lambda: (first.metric("mcsync_agent_informer_relists_total",
                              {"informer": "serviceexports[*]"}) or 0) >= 1,
        what="the ServiceExport informer relisted",
    )
    wait_for(lambda: first.settled(), what="the agent settled after the resync")
    assert histogram_count(first) == 1

    # Restart (kill -9: no goodbye): the new process reconciles every key again, counts 0.
    first.kill()
    second = agent_factory("second", kubeconfig=kube_cluster.kubeconfig, hub=hub_process,
                           cluster_id=CLUSTER, token=token)
    wait_for(lambda: second.settled(), what="the restarted agent reconciled its keys")
    assert histogram_count(second) == 0
    assert exported(kube_cluster, "web")

    # A new Service resourceVersion that changes the export: exactly one new data point.
    new_rv = change_port(kube_cluster, "web", 8080)
    wait_for(lambda: observed_rv(hub_process, "web") == new_rv, what="the new version observed")
    wait_for(lambda: histogram_count(second) == 1, what="one data point for the new version")
    assert second.stop() == 0


def test_hub_outage_then_convergence(
    kube_cluster: KubeCluster, hub_process: HubProcess, agent_factory: AgentFactory
) -> None:
    state = kube_cluster.state
    state.create("services", "shop", service_body("a", "shop"))
    state.create("serviceexports", "shop", service_export_body("a", "shop"))
    agent = agent_factory("a", kubeconfig=kube_cluster.kubeconfig, hub=hub_process,
                          cluster_id=CLUSTER, token=hub_process.register(CLUSTER))
    wait_for(lambda: exported(kube_cluster, "a"), what="a exported")

    hub_process.stop()
    wait_for(lambda: agent.metric("mcsync_agent_hub_reachable") == 0, what="the hub seen down")
    # Changes during the outage: a new export, and a spec change to an existing one.
    state.create("services", "shop", service_body("b", "shop"))
    state.create("serviceexports", "shop", service_export_body("b", "shop"))
    new_rv = change_port(kube_cluster, "a", 8080)
    wait_for(
        lambda: conditions_of(state.get("serviceexports", "shop", "b")).get(c.READY)
        == (c.FALSE, c.REASON_PENDING),
        what="b waiting for the hub (Ready=False/Pending)",
    )
    assert not agent.ready()  # /readyz says the hub is unreachable

    hub_process.start()
    wait_for(lambda: exported(kube_cluster, "b"), what="b exported after the outage")
    wait_for(
        lambda: (hub_process.export(CLUSTER, "shop", "a") or {}).get("spec", {})
        .get("ports", [{}])[0].get("port") == 8080,
        what="a's new port on the hub",
    )
    wait_for(lambda: observed_rv(hub_process, "a") == new_rv, what="a's new version observed")
    # a v1, a v2, b: three data points, none doubled by the retries.
    wait_for(lambda: histogram_count(agent) == 3, what="three data points")
    wait_for(agent.ready, what="ready again")
    wait_for(lambda: agent.settled(), what="settled")
    assert histogram_count(agent) == 3


def test_leader_failover(
    kube_cluster: KubeCluster, hub_process: HubProcess, agent_factory: AgentFactory
) -> None:
    state = kube_cluster.state
    state.create("services", "shop", service_body("a", "shop"))
    state.create("serviceexports", "shop", service_export_body("a", "shop"))
    token = hub_process.register(CLUSTER)
    election = ["--leader-elect", "--lease-namespace", "mcsync", "--lease-duration", "4"]
    one = agent_factory("one", kubeconfig=kube_cluster.kubeconfig, hub=hub_process,
                        cluster_id=CLUSTER, token=token, extra=election)
    two = agent_factory("two", kubeconfig=kube_cluster.kubeconfig, hub=hub_process,
                        cluster_id=CLUSTER, token=token, extra=election)
    leader: AgentProcess = wait_for(
        lambda: next((a for a in (one, two) if a.metric("mcsync_agent_leader") == 1), None),
        what="a leader",
    )
    standby = two if leader is one else one
    wait_for(lambda: exported(kube_cluster, "a"), what="a exported by the leader")
    assert standby.metric("mcsync_agent_leader") == 0
    wait_for(lambda: histogram_count(leader) == 1, what="the leader's data point")

    # kill -9: no release; the standby takes over when the Lease expires.
    leader.kill()
    wait_for(lambda: standby.metric("mcsync_agent_leader") == 1, what="the standby leading")
    state.create("services", "shop", service_body("b", "shop"))
    state.create("serviceexports", "shop", service_export_body("b", "shop"))
    wait_for(lambda: exported(kube_cluster, "b"), what="b exported by the new leader")
    # The new term re-reconciled "a" too, without counting it again.
    wait_for(lambda: standby.settled(reconciles=2), what="the new leader settled")
    assert histogram_count(standby) == 1
    lease = state.get("leases", "mcsync", "mcsync-agent")
    assert lease is not None and lease["spec"]["holderIdentity"] == standby.name
    assert standby.stop() == 0
    lease = state.get("leases", "mcsync", "mcsync-agent")
    assert lease is not None and not lease["spec"].get("holderIdentity")  # released on SIGTERM
