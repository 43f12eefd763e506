"""End to end: while the hub is away, an agent keeps every import object exactly as it is
(docs/reference.md#failover "Hub outage"), and converges once the hub is back.

Real hub process (SQLite and PostgreSQL), a real agent process, the Kubernetes API emulator
over HTTP. Cluster east exports shop/web and, like every cluster, imports it: its
ServiceImport, derived Service and mirrored EndpointSlice exist. The hub stops; the agent's
heartbeats, import feed and export writes fail for two heartbeats or more, and a source endpoint
changes meanwhile. The emulator's request log must show no write of any import object —
not one create, update, patch or delete — and their resourceVersions must not move. When the
hub is back, the endpoint change made during the outage reaches the mirrored slice.
"""

from __future__ import annotations

import copy

import pytest

from member.imports.importspec import derived_service_name, mirrored_slice_name
from sandbox.emulator.state import WRITE_VERBS
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

CLUSTER = "east"
NS = "shop"
IMPORT_OBJECTS = {
    ("serviceimports", "web"),
    ("services", derived_service_name("web")),
    ("endpointslices", mirrored_slice_name("web", CLUSTER, "web-abc")),
}
IMPORT_RESOURCES = ("serviceimports", "serviceimports/status", "services", "endpointslices")


def import_versions(kube: KubeCluster) -> dict[str, str] | None:
    """resourceVersion of each import object, once all exist."""
    versions = {}
    for resource, name in IMPORT_OBJECTS:
        obj = kube.state.get(resource, NS, name)
        if obj is None:
            return None
        versions[f"{resource}/{name}"] = obj["metadata"]["resourceVersion"]
    return versions


def mirrored_addresses(kube: KubeCluster) -> list[str]:
    eps = kube.state.get("endpointslices", NS, mirrored_slice_name("web", CLUSTER, "web-abc"))
    return [a for e in (eps or {}).get("endpoints") or [] for a in e.get("addresses") or []]


def failed_beats(agent: AgentProcess) -> float:
    return agent.metric("mcsync_agent_heartbeats_total", {"result": "error"}) or 0.0


def test_import_objects_are_untouched_while_the_hub_is_away(
    kube_cluster: KubeCluster, backend_hub: HubProcess, agent_factory: AgentFactory
) -> None:
    hub, state = backend_hub, kube_cluster.state
    state.create("services", NS, service_body("web", NS))
    state.create("endpointslices", NS, source_slice_body("10.0.0.1", NS))
    state.create("serviceexports", NS, service_export_body("web", NS))
    token = hub.register(CLUSTER)
    agent = agent_factory(CLUSTER, kubeconfig=kube_cluster.kubeconfig, hub=hub,
                          cluster_id=CLUSTER, token=token)
    wait_for(lambda: mirrored_addresses(kube_cluster) == ["10.0.0.1"], what="the import")
    before = import_versions(kube_cluster)
    assert before is not None

    hub.stop()
    state.reset_request_counts()
    # A source endpoint changes while the hub is away: nothing can carry it yet.
    source = copy.deepcopy(state.get("endpointslices", NS, "web-abc"))
    assert source is not None
    source["endpoints"][0]["addresses"] = ["10.0.0.2"]
    state.update("endpointslices", NS, source)
    start = failed_beats(agent)
    wait_for(lambda: agent.metric("mcsync_agent_hub_reachable") == 0, what="the hub missed")
    wait_for(lambda: failed_beats(agent) >= start + 2, what="two failed heartbeats",
             timeout=120)

    writes = [r for r in state.requests()
              if r.verb in WRITE_VERBS and r.resource in IMPORT_RESOURCES]
    assert writes == []
    assert import_versions(kube_cluster) == before

    hub.start()
    wait_for(lambda: mirrored_addresses(kube_cluster) == ["10.0.0.2"],
             what="the change made during the outage imported", timeout=120)
    after = import_versions(kube_cluster)
    assert after is not None
    # Converged with the fewest writes: the mirrored slice changed, nothing else was rewritten.
    assert {k: v for k, v in after.items() if not k.startswith("endpointslices/")} == {
        k: v for k, v in before.items() if not k.startswith("endpointslices/")
    }
