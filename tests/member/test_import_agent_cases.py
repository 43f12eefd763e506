"""End to end, one case each: what an importing agent does beyond the happy path
(docs/reference.md#export-path, #import-path). Each test exports `shop/web` from east first, then
starts west's agent(s), so west's first list of the hub's import feed brings everything.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.member.agent_support import (
    AgentFactory,
    AgentProcess,
    HubProcess,
    service_body,
    service_export_body,
    wait_for,
)
from tests.member.test_import_agent import (
    DERIVED,
    MIRRORED,
    NS,
    agent,
    export_from_east,
    import_settled,
    import_writes,
    imported,
    source_slice,
)

pytestmark = pytest.mark.e2e


def test_a_foreign_service_import_is_left_alone_with_a_warning_event(
    kube_cluster_factory: Any, hub_process: HubProcess, agent_factory: AgentFactory
) -> None:
    west = export_from_east(kube_cluster_factory, hub_process, agent_factory)
    theirs = west.state.create("serviceimports", NS, {
        "apiVersion": "multicluster.x-k8s.io/v1beta1", "kind": "ServiceImport",
        "metadata": {"name": "web", "namespace": NS, "labels": {"owner": "someone-else"}},
        "spec": {"type": "Headless", "ports": []},
    })
    west_agent = agent("west", west, hub_process, agent_factory)
    wait_for(
        lambda: west_agent.metric("mcsync_agent_serviceimports_unmanaged") == 1,
        what="the foreign ServiceImport counted",
    )
    events = wait_for(
        lambda: [e for e in west.state.list("events", NS)
                 if e.get("reason") == "ServiceImportNotManaged"],
        what="a Warning Event on the foreign ServiceImport",
    )
    assert events[0]["type"] == "Warning"
    assert events[0]["involvedObject"]["name"] == "web"
    wait_for(lambda: import_settled(west_agent), what="west's import queues drained")
    assert west.state.get("serviceimports", NS, "web") == theirs  # untouched
    assert west.state.get("services", NS, DERIVED) is None  # nothing for the key
    assert west.state.get("endpointslices", NS, MIRRORED) is None
    assert import_writes(west_agent) == 0

    # Its owner deletes it: the key is mcsync's to import now.
    west.state.delete("serviceimports", NS, "web")
    wait_for(lambda: imported(west), what="the import once the foreign one is gone")
    assert west_agent.metric("mcsync_agent_serviceimports_unmanaged") == 0


def test_a_users_deletion_or_edit_of_a_managed_object_is_repaired(
    kube_cluster_factory: Any, hub_process: HubProcess, agent_factory: AgentFactory
) -> None:
    west = export_from_east(kube_cluster_factory, hub_process, agent_factory)
    agent("west", west, hub_process, agent_factory)
    before = wait_for(lambda: imported(west), what="the import in west")

    west.state.delete("services", NS, DERIVED)  # its slices go with it (garbage collector)
    after = wait_for(
        lambda: (found := imported(west)) and found["svc"]["metadata"]["uid"]
        != before["svc"]["metadata"]["uid"] and found,
        what="the derived Service recreated",
    )
    assert after["si"]["spec"]["ips"] == after["svc"]["spec"]["clusterIPs"]

    edited = dict(after["si"])
    edited["spec"] = {**edited["spec"], "type": "Headless"}
    west.state.update("serviceimports", NS, edited)
    wait_for(
        lambda: (west.state.get("serviceimports", NS, "web") or {}).get("spec", {}).get("type")
        == "ClusterSetIP",
        what="the ServiceImport's type repaired",
    )


def test_v1alpha1_where_v1beta1_is_not_served(
    kube_cluster_factory: Any, hub_process: HubProcess, agent_factory: AgentFactory
) -> None:
    west = export_from_east(
        kube_cluster_factory, hub_process, agent_factory, mcs_versions=("v1alpha1",)
    )
    agent("west", west, hub_process, agent_factory)
    found = wait_for(lambda: imported(west), what="the import in west")
    owner = found["svc"]["metadata"]["ownerReferences"][0]
    assert owner["apiVersion"] == "multicluster.x-k8s.io/v1alpha1"
    assert owner["uid"] == found["si"]["metadata"]["uid"]


def test_only_the_leader_writes_imports(
    kube_cluster_factory: Any, hub_process: HubProcess, agent_factory: AgentFactory
) -> None:
    west = export_from_east(kube_cluster_factory, hub_process, agent_factory)
    token = hub_process.register("west")
    replicas: list[AgentProcess] = [
        agent_factory(
            name, kubeconfig=west.kubeconfig, hub=hub_process, cluster_id="west", token=token,
            extra=["--leader-elect", "--lease-namespace", "mcsync", "--lease-duration", "3"],
        )
        for name in ("west-1", "west-2")
    ]
    wait_for(lambda: imported(west), what="the import in west")
    leaders = [r for r in replicas if r.metric("mcsync_agent_leader") == 1]
    assert len(leaders) == 1
    (standby,) = [r for r in replicas if r is not leaders[0]]
    wait_for(lambda: import_settled(leaders[0]), what="the leader's import queues drained")
    assert import_writes(leaders[0]) > 0
    assert import_writes(standby) == 0  # a standby writes nothing but its Lease

    # The leader dies: the standby takes over, repairs, and finds nothing to rewrite; a
    # later deletion is its to repair.
    leaders[0].kill()
    wait_for(lambda: standby.metric("mcsync_agent_leader") == 1, what="the standby leading")
    wait_for(lambda: import_settled(standby), what="the new leader's import queues drained")
    assert import_writes(standby) == 0
    west.state.delete("endpointslices", NS, MIRRORED)
    wait_for(lambda: imported(west), what="the mirrored slice recreated by the new leader")


@pytest.mark.parametrize(
    ("spec", "families", "headless"),
    [
        ({"clusterIP": "None"}, None, True),
        ({"ipFamilies": ["IPv6", "IPv4"], "ipFamilyPolicy": "RequireDualStack"},
         ["IPv6", "IPv4"], False),
    ],
    ids=["headless", "dual stack"],
)
def test_headless_and_dual_stack_imports(
    kube_cluster_factory: Any, hub_process: HubProcess, agent_factory: AgentFactory,
    spec: dict[str, Any], families: list[str] | None, headless: bool,
) -> None:
    east, west = kube_cluster_factory("east"), kube_cluster_factory("west")
    west.state.create_namespace(NS)
    east.state.create("services", NS, service_body("web", NS, **spec))
    east.state.create("serviceexports", NS, service_export_body("web", NS))
    agent("east", east, hub_process, agent_factory)
    wait_for(
        lambda: hub_process.request("GET", "/api/v1/serviceimports").json()["items"],
        what="the import on the hub",
    )
    west_agent = agent("west", west, hub_process, agent_factory)
    svc = wait_for(lambda: west.state.get("services", NS, DERIVED), what="the derived Service")
    wait_for(lambda: import_settled(west_agent), what="west's import queues drained")
    si = west.state.get("serviceimports", NS, "web")
    assert si is not None
    if headless:
        assert si["spec"]["type"] == "Headless" and not si["spec"].get("ips")
        assert svc["spec"]["clusterIP"] == "None"
    else:
        assert svc["spec"]["ipFamilyPolicy"] == "RequireDualStack"
        assert svc["spec"]["ipFamilies"] == families
        assert si["spec"]["ipFamilies"] == families
        wait_for(
            lambda: (west.state.get("serviceimports", NS, "web") or {})["spec"].get("ips")
            == svc["spec"]["clusterIPs"],
            what="spec.ips = the derived Service's clusterIPs",
        )
        ips = (west.state.get("serviceimports", NS, "web") or {})["spec"]["ips"]
        assert ":" in ips[0] and ":" not in ips[1]  # IPv6 first, as ipFamilies says


def test_a_restarted_agent_deletes_what_the_hub_no_longer_has(
    kube_cluster_factory: Any, hub_process: HubProcess, agent_factory: AgentFactory
) -> None:
    east, west = kube_cluster_factory("east"), kube_cluster_factory("west")
    west.state.create_namespace(NS)
    east.state.create("services", NS, service_body("web", NS))
    east.state.create("endpointslices", NS, source_slice("10.0.0.1"))
    east.state.create("serviceexports", NS, service_export_body("web", NS))
    agent("east", east, hub_process, agent_factory)
    west_agent = agent("west", west, hub_process, agent_factory)
    wait_for(lambda: imported(west), what="the import in west")
    assert west_agent.stop() == 0
    # Unexported while west's agent is down: no watch event will ever tell it.
    east.state.delete("serviceexports", NS, "web")
    wait_for(
        lambda: not hub_process.request("GET", "/api/v1/serviceimports").json()["items"],
        what="the import gone from the hub",
    )
    west_agent.start()
    wait_for(
        lambda: west.state.get("serviceimports", NS, "web") is None
        and west.state.get("services", NS, DERIVED) is None
        and west.state.get("endpointslices", NS, MIRRORED) is None,
        what="the restarted agent's repair deleting the stale import",
    )
