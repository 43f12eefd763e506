"""The agent under faults (docs/reference.md#export-path, #failover): a network partition from the
hub, and a kill between the dedupe write and the observation it guards.

Real processes: the agent (`python -m member`) against an emulated Kubernetes API
(tests/kube) and a hub process, with a loopback TCP proxy (`ThreadedProxy`) between agent
and hub so the test can partition them while the hub keeps running.

Partition: the hub is unreachable for the full minute the issue names (marked `slow`;
CI runs it: a minute is long enough for every retry backoff of the hub client to reach
its cap, which a short cut would not show). Meanwhile Kubernetes keeps changing — new exports, spec
changes, a ServiceExport deletion — and the agent must keep watching it (new exports say
`Ready=False/Pending` during the partition). After the partition heals the fleet must
converge within seconds, with exactly one histogram data point per exported Service
resourceVersion, and the agent process must never have restarted.

Dedupe kill: the proxy lets the hub commit the agent's PATCH of
`mcsync.io/last-observed-resource-version`, then kills the agent with SIGKILL before the
agent hears the answer — the worst moment. The restarted agent must skip that data point
(the hub says it was counted), never count it twice; the next Service version counts once.
"""

from __future__ import annotations

import dataclasses
import os
import signal
import time
from collections.abc import Iterator

import pytest
from prometheus_client.parser import text_string_to_metric_families

from shared import conditions as c
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
from tests.member.test_agent_resilience import (
    CLUSTER,
    change_port,
    exported,
    histogram_count,
    observed_rv,
)
from tests.reliability.support import Figures, RecordProperty, ThreadedProxy

pytestmark = [pytest.mark.e2e, pytest.mark.reliability]

PENDING = (c.FALSE, c.REASON_PENDING)


@pytest.fixture
def proxy(hub_process: HubProcess) -> Iterator[ThreadedProxy]:
    proxied = ThreadedProxy(hub_process.port)
    try:
        yield proxied
    finally:
        proxied.close()


def via(hub: HubProcess, proxy: ThreadedProxy) -> HubProcess:
    """The hub as the agent sees it: the same process, reached through the proxy."""
    return dataclasses.replace(hub, port=proxy.port)


def hub_names(hub: HubProcess) -> set[str]:
    return {e["metadata"]["name"] for e in hub.exports(CLUSTER)}


def metric_sum(agent: AgentProcess, name: str) -> float:
    """The sum of every sample called `name` on the agent's /metrics, whatever its labels."""
    text = agent._get("/metrics").text
    return sum(
        sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name == name
    )


def agent_pid(agent: AgentProcess) -> int:
    assert agent.process is not None
    assert agent.process.poll() is None, f"agent {agent.name} exited"
    return agent.process.pid


def _partition(
    seconds: float, kube: KubeCluster, hub: HubProcess, proxy: ThreadedProxy,
    agents: AgentFactory, figures: Figures,
) -> None:
    state = kube.state
    for name in ("a", "b", "c", "d"):
        state.create("services", "shop", service_body(name, "shop"))
        state.create("serviceexports", "shop", service_export_body(name, "shop"))
    agent = agents("p", kubeconfig=kube.kubeconfig, hub=via(hub, proxy), cluster_id=CLUSTER,
                   token=hub.register(CLUSTER))
    pid = agent_pid(agent)
    wait_for(lambda: all(exported(kube, n) for n in "abcd"), what="a-d exported")
    wait_for(lambda: histogram_count(agent) == 4, what="four data points")

    proxy.cut()
    cut_at = time.monotonic()
    wait_for(lambda: agent.metric("mcsync_agent_hub_reachable") == 0, what="the hub seen down")
    # Kubernetes keeps changing during the partition; the agent keeps watching it.
    new = [f"n{i}" for i in range(5)]
    for name in new:
        state.create("services", "shop", service_body(name, "shop"))
        state.create("serviceexports", "shop", service_export_body(name, "shop"))
    new_rvs = {"a": change_port(kube, "a", 8080), "b": change_port(kube, "b", 8081)}
    state.delete("serviceexports", "shop", "c")  # the finalizer waits for the hub
    wait_for(
        lambda: all(
            conditions_of(state.get("serviceexports", "shop", n)).get(c.READY) == PENDING
            for n in new
        ),
        what="the new exports seen during the partition (Ready=False/Pending)",
    )
    assert state.get("serviceexports", "shop", "c") is not None  # held by the finalizer
    figures["kubernetes_changes_during_partition"] = len(new) * 2 + 3
    remaining = seconds - (time.monotonic() - cut_at)
    if remaining > 0:
        time.sleep(remaining)  # the partition lasts what the scenario says, no longer
    assert agent_pid(agent) == pid, "the agent restarted during the partition"
    figures["partition_seconds"] = round(time.monotonic() - cut_at, 1)

    proxy.heal()
    healed_at = time.monotonic()
    expected = {"a", "b", "d", *new}

    def converged() -> bool:
        return (
            hub_names(hub) == expected
            and all(exported(kube, n) for n in expected)
            and state.get("serviceexports", "shop", "c") is None
            and all(observed_rv(hub, n) == rv for n, rv in new_rvs.items())
        )

    wait_for(converged, what="convergence after the partition", interval=0.1)
    figures["convergence_seconds"] = round(time.monotonic() - healed_at, 1)
    # a, b, d, c before; a and b again (new versions); five new: eleven, none doubled.
    wait_for(lambda: agent.settled(), what="the agent settled")
    figures["histogram_count"] = histogram_count(agent)
    assert figures["histogram_count"] == 4 + 2 + len(new), figures.line()
    assert agent_pid(agent) == pid, "the agent restarted"
    assert "Traceback" not in agent.logs()
    figures["agent_restarts"] = 0
    figures["hub_request_errors_during_partition"] = metric_sum(
        agent, "mcsync_agent_hub_request_errors_total"
    )
    assert agent.stop() == 0


@pytest.mark.slow
def test_partition_of_a_full_minute_then_convergence(
    kube_cluster: KubeCluster, hub_process: HubProcess, proxy: ThreadedProxy,
    agent_factory: AgentFactory, record_property: RecordProperty,
) -> None:
    """The hub is unreachable for the minute docs/reference.md#failover / the issue name; CI runs it
    too."""
    figures = Figures("agent-hub partition 60s", record_property)
    _partition(60.0, kube_cluster, hub_process, proxy, agent_factory, figures)
    figures.report()


def test_kill_between_dedupe_write_and_observation_skips_the_point(
    kube_cluster: KubeCluster, hub_process: HubProcess, proxy: ThreadedProxy,
    agent_factory: AgentFactory, record_property: RecordProperty,
) -> None:
    figures = Figures("agent killed between dedupe write and observation", record_property)
    state = kube_cluster.state
    service = state.create("services", "shop", service_body("web", "shop"))
    rv = service["metadata"]["resourceVersion"]
    token = hub_process.register(CLUSTER)
    first = agent_factory("first", kubeconfig=kube_cluster.kubeconfig,
                          hub=via(hub_process, proxy), cluster_id=CLUSTER, token=token)
    assert first.process is not None
    victim = first.process.pid
    # The hub commits the annotation, then the agent dies before it hears so.
    proxy.on_answer_to(b"PATCH /api/v1/clusters/", lambda: os.kill(victim, signal.SIGKILL))
    state.create("serviceexports", "shop", service_export_body("web", "shop"))
    wait_for(lambda: first.process is not None and first.process.poll() is not None,
             what="the agent killed at the dedupe write")
    figures["intercepted_answers"] = proxy.intercepted
    assert observed_rv(hub_process, "web") == rv  # the write was committed …

    second = agent_factory("second", kubeconfig=kube_cluster.kubeconfig,
                           hub=via(hub_process, proxy), cluster_id=CLUSTER, token=token)
    wait_for(lambda: exported(kube_cluster, "web"), what="web exported by the new agent")
    wait_for(lambda: second.settled(), what="the new agent settled")
    figures["points_for_the_killed_version"] = histogram_count(second)
    assert figures["points_for_the_killed_version"] == 0  # … so it is skipped, not doubled

    new_rv = change_port(kube_cluster, "web", 8080)
    wait_for(lambda: observed_rv(hub_process, "web") == new_rv, what="the next version observed")
    wait_for(lambda: histogram_count(second) == 1, what="one point for the next version")
    wait_for(lambda: second.settled(), what="settled again")
    figures["points_for_the_next_version"] = histogram_count(second)
    assert figures["points_for_the_next_version"] == 1
    figures.report()
    assert second.stop() == 0
