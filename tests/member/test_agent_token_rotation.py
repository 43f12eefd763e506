"""End to end: a member token rotated under load (docs/reference.md#credentials) — a real
hub, a real agent process, an emulated cluster. The admin rotates, the token file changes
as a Secret update changes it, the agent takes the new token without a restart, and no
request is refused and no export lost on the way."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

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
BEFORE = 20
DURING = 40
# How a reconcile that failed on an unaccepted token logs its cause.
REFUSALS = ("401", "403", "Unauthorized", "Forbidden", "token")


def total(agent: AgentProcess, name: str, **labels: str) -> float:
    """The sum of every sample of `name` whose labels include `labels`."""
    text = httpx.get(f"http://127.0.0.1:{agent.metrics_port}/metrics", timeout=5).text
    return sum(
        sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name == name and all(sample.labels.get(k) == v for k, v in labels.items())
    )


def heartbeat_status(hub: HubProcess, token: str) -> int:
    return hub.request("POST", f"/api/v1/clusters/{CLUSTER}/heartbeat", token=token,
                       json={"agentVersion": "0.1.0"}).status_code


def test_rotation_under_load_refuses_nothing_and_loses_no_export(
    kube_cluster: KubeCluster, hub_process: HubProcess, agent_factory: AgentFactory,
    tmp_path: Path,
) -> None:
    state = kube_cluster.state
    old = hub_process.register(CLUSTER)
    agent = agent_factory("a", kubeconfig=kube_cluster.kubeconfig, hub=hub_process,
                          cluster_id=CLUSTER, token=old)
    token_file = tmp_path / "a.token"  # where agent_factory wrote it

    def export(index: int) -> None:
        name = f"svc-{index}"
        state.create("services", "shop", service_body(name, "shop"))
        state.create("serviceexports", "shop", service_export_body(name, "shop"))

    for index in range(BEFORE):
        export(index)
    wait_for(lambda: len(hub_process.exports(CLUSTER)) == BEFORE, what="the first exports")

    # Load: new exports keep coming while the token changes under the agent.
    loader = threading.Thread(target=lambda: [export(i) for i in range(BEFORE, BEFORE + DURING)])
    loader.start()
    answer = hub_process.request("POST", f"/api/v1/clusters/{CLUSTER}/token")
    assert answer.status_code == 200, answer.text
    new = answer.json()["token"]
    fresh = tmp_path / "a.token.new"
    fresh.write_text(new + "\n")
    os.replace(fresh, token_file)  # a new inode, as a Secret update makes
    loader.join(60)

    # The agent takes the new token by itself; its first use retires the old one.
    wait_for(lambda: heartbeat_status(hub_process, old) == 401, what="the old token retired",
             timeout=60)
    assert heartbeat_status(hub_process, new) == 200
    wait_for(lambda: len(hub_process.exports(CLUSTER)) == BEFORE + DURING,
             what="every export on the hub", timeout=120)
    names = {e["metadata"]["name"] for e in hub_process.exports(CLUSTER)}
    assert names == {f"svc-{i}" for i in range(BEFORE + DURING)}
    # Nothing refused: no hub request of the agent was refused, and no reconcile failed
    # for want of a valid token. (A pass that timed out on a starved machine and was
    # retried is not a refusal; its log line says which it was.)
    assert total(agent, "mcsync_agent_hub_request_errors_total", code="401") == 0
    assert total(agent, "mcsync_agent_hub_request_errors_total", code="403") == 0
    failed = [line for line in agent.logs().splitlines() if "failed (" in line]
    refused = [line for line in failed if any(word in line for word in REFUSALS)]
    assert not refused, refused
    assert agent.process is not None and agent.process.poll() is None  # never restarted
