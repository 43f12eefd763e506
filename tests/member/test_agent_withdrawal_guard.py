"""End to end: one broken cluster cannot empty the fleet (docs/reference.md#failover mass-withdrawal
guard).

Real parts: a hub process on SQLite and on PostgreSQL, `python -m member` processes, and the
Kubernetes API emulator over HTTP.

* The issue's scenario: stop an agent, remove most of its cluster's ServiceExports behind
  its back, start it again: its start-up repair withdraws none of them (their slices stay
  too), logs and counts it; when most ServiceExports are back the repair goes through and
  the few orphans left are withdrawn.
* Ordinary unexports — ServiceExports deleted while the agent watches — are never held,
  however many.
* A ServiceExport API that errors (the version the agent uses no longer served, or the
  apiserver answering 5xx) is "cannot see": not even one orphan is withdrawn until the agent
  can list ServiceExports again.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from sandbox.emulator.resources import ResourceCatalog
from tests.kube.fixtures import KubeCluster
from tests.member.agent_support import (
    AgentFactory,
    AgentProcess,
    HubProcess,
    service_body,
    service_export_body,
    wait_for,
)
from tests.member.test_hubclient import client, export

pytestmark = pytest.mark.e2e

CLUSTER = "member-1"
NAMESPACE = "shop"
EXPORTS = 14
HELD = "mcsync_agent_withdrawals_held_total"
HELD_NOW = "mcsync_agent_withdrawal_held_exports"


def name(i: int) -> str:
    return f"svc-{i}"


def slice_body(service: str) -> dict[str, Any]:
    return {
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": {
            "name": f"{service}-abc",
            "namespace": NAMESPACE,
            "labels": {
                "kubernetes.io/service-name": service,
                "endpointslice.kubernetes.io/managed-by": "endpointslice-controller.k8s.io",
            },
        },
        "addressType": "IPv4",
        "ports": [{"name": "http", "protocol": "TCP", "port": 8080}],
        "endpoints": [{"addresses": ["10.1.0.7"], "conditions": {"ready": True}}],
    }


def seed(kube: KubeCluster, count: int = EXPORTS) -> None:
    for i in range(count):
        kube.state.create("services", NAMESPACE, service_body(name(i), NAMESPACE))
        kube.state.create("serviceexports", NAMESPACE, service_export_body(name(i), NAMESPACE))


def remove_behind_its_back(kube: KubeCluster, indexes: range) -> None:
    """Gone without the agent's finalizer running (a CRD migration gone wrong)."""
    for i in indexes:
        obj = copy.deepcopy(kube.state.get("serviceexports", NAMESPACE, name(i)))
        assert obj is not None
        obj["metadata"]["finalizers"] = []
        kube.state.update("serviceexports", NAMESPACE, obj)
        if kube.state.get("serviceexports", NAMESPACE, name(i)) is not None:
            kube.state.delete("serviceexports", NAMESPACE, name(i))


def on_hub(hub: HubProcess) -> set[str]:
    return {item["metadata"]["name"] for item in hub.exports(CLUSTER)}


def slices_on_hub(hub: HubProcess) -> set[str]:
    answer = hub.request("GET", f"/api/v1/clusters/{CLUSTER}/endpointslices")
    assert answer.status_code == 200, answer.text
    return {item["metadata"]["name"] for item in answer.json()["items"]}


def held_condition(hub: HubProcess) -> dict[str, Any] | None:
    """The cluster's `WithdrawalHeld` condition on the hub, or None."""
    answer = hub.request("GET", f"/api/v1/clusters/{CLUSTER}")
    assert answer.status_code == 200, answer.text
    for condition in answer.json()["status"].get("conditions") or []:
        if condition["type"] == "WithdrawalHeld":
            return dict(condition)
    return None


def metric(agent: AgentProcess, sample: str, **labels: str) -> float:
    return agent.metric(sample, labels) or 0.0


def heartbeats(agent: AgentProcess) -> float:
    return metric(agent, "mcsync_agent_heartbeats_total", result="ok")


def after_beats(agent: AgentProcess, beats: int = 2) -> None:
    """Wait until `beats` more heartbeats were answered: the agent retried any held repair."""
    start = heartbeats(agent)
    wait_for(lambda: heartbeats(agent) >= start + beats, what=f"{beats} more heartbeats")


def start_agent(agents: AgentFactory, kube: KubeCluster, hub: HubProcess, token: str,
                label: str) -> AgentProcess:
    return agents(label, kubeconfig=kube.kubeconfig, hub=hub, cluster_id=CLUSTER, token=token,
                  extra=["--no-import"])


def test_a_start_up_repair_that_would_withdraw_most_exports_withdraws_none(
    kube_cluster: KubeCluster, backend_hub: HubProcess, agent_factory: AgentFactory
) -> None:
    """The issue's scenario, then both ways out of a hold: the ServiceExports come back, and
    (after a second loss) an admin's `allow-withdrawal`."""
    hub = backend_hub
    seed(kube_cluster)
    kube_cluster.state.create("endpointslices", NAMESPACE, slice_body(name(11)))
    token = hub.register(CLUSTER)
    first = start_agent(agent_factory, kube_cluster, hub, token, "first")
    everything = {name(i) for i in range(EXPORTS)}
    wait_for(lambda: on_hub(hub) == everything, what="every export on the hub")
    wait_for(lambda: slices_on_hub(hub) == {"svc-11-abc"}, what="svc-11's slice on the hub")
    assert metric(first, HELD) == 0  # the series exists from the start
    assert held_condition(hub) is None
    assert first.stop() == 0

    remove_behind_its_back(kube_cluster, range(6, EXPORTS))  # 8 of 14: more than half
    second = start_agent(agent_factory, kube_cluster, hub, token, "second")
    wait_for(lambda: metric(second, HELD) == 1, what="the held repair counted")
    assert metric(second, HELD_NOW) == 8
    wait_for(lambda: second.settled(reconciles=EXPORTS), what="the repair's reconciles")
    condition = wait_for(lambda: held_condition(hub), what="WithdrawalHeld on the cluster")
    assert (condition["status"], condition["reason"]) == ("True", "MassWithdrawal")
    assert "8 of the cluster's 14 exports" in condition["message"]
    after_beats(second)
    assert on_hub(hub) == everything
    assert slices_on_hub(hub) == {"svc-11-abc"}  # the slices of a held export stay with it
    assert metric(second, "mcsync_agent_reconciles_total", controller="serviceexport",
                  outcome="held") >= 8
    assert "withdrawal held: this repair would withdraw 8 of cluster member-1's 14" in (
        second.logs())

    # Five come back: three orphans of fourteen is an ordinary repair, retried at a beat.
    for i in range(6, 11):
        kube_cluster.state.create("serviceexports", NAMESPACE,
                                  service_export_body(name(i), NAMESPACE))
    kept = {name(i) for i in range(11)}
    wait_for(lambda: on_hub(hub) == kept, what="the three orphans withdrawn")
    wait_for(lambda: slices_on_hub(hub) == set(), what="svc-11's slice withdrawn with it")
    wait_for(lambda: held_condition(hub) is None, what="WithdrawalHeld cleared")
    assert (metric(second, HELD_NOW), metric(second, HELD)) == (0, 1)
    assert second.stop() == 0

    # Lost again (7 of 11), and this time an admin lets the withdrawal through, once.
    remove_behind_its_back(kube_cluster, range(4, 11))
    third = start_agent(agent_factory, kube_cluster, hub, token, "third")
    wait_for(lambda: held_condition(hub) is not None, what="WithdrawalHeld again")
    assert on_hub(hub) == kept
    allowed = hub.request("POST", f"/api/v1/clusters/{CLUSTER}/allow-withdrawal")
    assert allowed.status_code == 200, allowed.text
    wait_for(lambda: on_hub(hub) == {name(i) for i in range(4)}, what="the seven withdrawn")
    wait_for(lambda: held_condition(hub) is None, what="WithdrawalHeld cleared")
    assert (metric(third, HELD_NOW), metric(third, HELD)) == (0, 1)
    assert "an admin allowed the held withdrawal" in third.logs()


def test_ordinary_unexports_are_never_held(
    kube_cluster: KubeCluster, backend_hub: HubProcess, agent_factory: AgentFactory
) -> None:
    hub = backend_hub
    seed(kube_cluster)
    token = hub.register(CLUSTER)
    agent = start_agent(agent_factory, kube_cluster, hub, token, "agent")
    wait_for(lambda: len(on_hub(hub)) == EXPORTS, what="every export on the hub")
    # Twelve of fourteen deleted while the agent watches: six through the finalizer as usual,
    # six with the finalizer stripped first (they reach the agent as live DELETE events).
    for i in range(6):
        kube_cluster.state.delete("serviceexports", NAMESPACE, name(i))
    remove_behind_its_back(kube_cluster, range(6, 12))
    wait_for(lambda: on_hub(hub) == {name(12), name(13)}, what="twelve unexports withdrawn")
    assert metric(agent, HELD) == 0


# The hub only stores here (one PUT, one DELETE), so one back end is enough for the
# agent's side; the other tests run on both.
@pytest.mark.parametrize("backend", ["sqlite"])
@pytest.mark.parametrize("failure", ["version-no-longer-served", "apiserver-5xx"])
def test_a_service_export_api_that_errors_is_cannot_see(
    kube_cluster: KubeCluster,
    backend_hub: HubProcess,
    agent_factory: AgentFactory,
    monkeypatch: pytest.MonkeyPatch,
    failure: str,
) -> None:
    hub = backend_hub
    seed(kube_cluster, count=2)
    token = hub.register(CLUSTER)
    agent = start_agent(agent_factory, kube_cluster, hub, token, "agent")
    wait_for(lambda: len(on_hub(hub)) == 2, what="both exports on the hub")
    assert "ServiceExport v1beta1" in agent.logs()

    state = kube_cluster.state
    served = state.catalog
    if failure == "version-no-longer-served":
        # The CRD now serves v1alpha1 only: the agent's v1beta1 list and watch get 404.
        monkeypatch.setattr(state, "catalog", ResourceCatalog(mcs_versions=("v1alpha1",)))
        state.close_watches()
    else:
        state.pause()
    wait_for(lambda: "serviceexports[*]: watch failed" in agent.logs()
             or "serviceexports[*]: list failed" in agent.logs(),
             what="the ServiceExport watch failing")

    # A record of this cluster with no ServiceExport behind it: an orphan, normally withdrawn
    # at once. While the agent cannot list ServiceExports, it stays.
    with client(hub, CLUSTER, token) as writer:
        writer.put_export(export(CLUSTER, "ghost"))
    wait_for(lambda: metric(agent, "mcsync_agent_reconciles_total", controller="serviceexport",
                            outcome="held") >= 1, what="the orphan held")
    after_beats(agent)
    assert "ghost" in on_hub(hub)
    assert "cannot see is not nothing exported" in agent.logs()

    if failure == "version-no-longer-served":
        monkeypatch.setattr(state, "catalog", served)
    else:
        state.unpause()
    wait_for(lambda: on_hub(hub) == {name(0), name(1)}, what="the orphan withdrawn")
    assert metric(agent, HELD) == 0
