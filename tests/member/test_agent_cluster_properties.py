"""Cluster properties from the agent's side (docs/reference.md#cluster-properties).

Agent processes against a real hub and emulated clusters with the About API: the agent
reports every ClusterProperty of its cluster, again after each change and never when
nothing changed; a set the hub would refuse (65 objects) is a logged error, not a crash,
and the hub keeps the last good set. In process, `PropertiesFeed` follows the hub's
fleet-properties feed into a `FleetPropertiesView`, whose subscribers hear which clusters
changed.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from member.clusterproperties import FleetProperties, FleetPropertiesView
from member.hubclient import ROUTE_PROPERTIES, HubClient, HubClientConfig
from member.imports.propertiesfeed import PropertiesFeed
from shared.aboutapi import CLUSTER_ID_PROPERTY
from tests.kube.fixtures import KubeCluster
from tests.member.agent_support import (
    AgentProcess,
    HubProcess,
    _env,
    forget_logs,
    free_port,
    wait_for,
)

REGION = "region.topology.mcsync.io"
ZONE = "zone.topology.mcsync.io"


def seed(cluster: KubeCluster, name: str, value: str) -> None:
    cluster.state.create("clusterproperties", None, {"metadata": {"name": name},
                                                     "spec": {"value": value}})


def set_value(cluster: KubeCluster, name: str, value: str) -> None:
    obj = cluster.state.get("clusterproperties", None, name)
    assert obj is not None
    cluster.state.update("clusterproperties", None, {**obj, "spec": {"value": value}})


@pytest.fixture(scope="module")
def hub(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HubProcess]:
    process = HubProcess(directory=tmp_path_factory.mktemp("hub"))
    process.start()
    try:
        yield process
    finally:
        process.stop()
        forget_logs()


@pytest.fixture
def run_agent(tmp_path: Path, hub: HubProcess) -> Iterator[Callable[..., AgentProcess]]:
    agents: list[AgentProcess] = []

    def start(cluster: KubeCluster, name: str) -> AgentProcess:
        token_file = tmp_path / f"{name}.token"
        token_file.write_text(hub.register(name) + "\n")
        port = free_port()
        args = ["--hub-url", hub.url, "--token-file", str(token_file),
                "--kubeconfig", str(cluster.kubeconfig), "--metrics-port", str(port),
                "--metrics-host", "127.0.0.1", "--heartbeat-interval", "1", "--workers", "1",
                "--cluster-id", name]
        agent = AgentProcess(name=name, args=args, env=_env(), directory=tmp_path,
                             metrics_port=port)
        agents.append(agent)
        agent.start()
        return agent

    try:
        yield start
    finally:
        for agent in agents:
            agent.kill()


def hub_properties(hub: HubProcess, cluster: str) -> dict[str, str] | None:
    answer = hub.request("GET", f"/api/v1/clusters/{cluster}")
    props: dict[str, str] | None = answer.json()["status"].get("properties")
    return props


def puts(agent: AgentProcess) -> float:
    return agent.metric("mcsync_agent_hub_request_duration_seconds_count",
                        {"method": "PUT", "route": ROUTE_PROPERTIES}) or 0


def test_agent_reports_its_properties_when_they_change_and_only_then(
    kube_cluster_factory: Callable[..., KubeCluster], hub: HubProcess,
    run_agent: Callable[..., AgentProcess],
) -> None:
    cluster = kube_cluster_factory("east", about_api=True)
    seed(cluster, REGION, "eu")
    seed(cluster, ZONE, "eu-1")
    agent = run_agent(cluster, "east")
    wanted = {REGION: "eu", ZONE: "eu-1", CLUSTER_ID_PROPERTY: "east"}
    wait_for(lambda: hub_properties(hub, "east") == wanted, what="the properties reported")
    assert puts(agent) == 1

    set_value(cluster, ZONE, "eu-2")
    wanted[ZONE] = "eu-2"
    wait_for(lambda: hub_properties(hub, "east") == wanted, what="the change reported")
    assert puts(agent) == 2
    # Unchanged: heartbeats go on, nothing more is sent, nothing is read per beat.
    reads = cluster.state.count(resource="clusterproperties")
    beats = agent.metric("mcsync_agent_heartbeats_total", {"result": "ok"}) or 0
    wait_for(lambda: (agent.metric("mcsync_agent_heartbeats_total", {"result": "ok"}) or 0)
             >= beats + 3, what="three more heartbeats")
    assert puts(agent) == 2
    assert cluster.state.count(resource="clusterproperties") == reads

    # 65 objects: refused by the agent itself, said in one line; the hub keeps the last
    # good set (the objects arrive one by one, so some sets on the way were good).
    for i in range(62):
        seed(cluster, f"p{i}.example.com", "x")
    wait_for(lambda: "ClusterProperty objects not reported to the hub: 65 ClusterProperty "
             "objects, at most 64" in agent.logs(), what="the error line")
    assert len(hub_properties(hub, "east") or {}) <= 64
    assert agent.ready()
    cluster.state.delete("clusterproperties", None, "p0.example.com")
    wait_for(lambda: len(hub_properties(hub, "east") or {}) == 64,
             what="the 64 properties reported once one went")
    assert agent.stop() == 0


def test_the_fleet_properties_feed_keeps_the_view_current(
    kube_cluster_factory: Callable[..., KubeCluster], hub: HubProcess,
    run_agent: Callable[..., AgentProcess], tmp_path: Path,
) -> None:
    north = kube_cluster_factory("north", about_api=True)
    seed(north, REGION, "us")
    agent = run_agent(north, "north")
    token = hub.register("reader-south")
    client = HubClient(HubClientConfig(base_url=hub.url, cluster_id="reader-south",
                                       token=token))
    view = FleetPropertiesView("reader-south", {REGION: "eu"})
    assert isinstance(view, FleetProperties)
    heard: list[frozenset[str]] = []
    view.subscribe(heard.append)
    feed = PropertiesFeed(client, view, watch_timeout=5)
    stop = threading.Event()
    thread = feed.informer.start(stop)
    try:
        wait_for(lambda: (view.of("north") or {}).get(REGION) == "us",
                 what="north's properties in the view")
        assert view.of("nowhere") is None
        assert view.own() == {REGION: "eu"}
        heard.clear()
        set_value(north, REGION, "ca")
        wait_for(lambda: (view.of("north") or {}).get(REGION) == "ca",
                 what="north's change in the view")
        assert heard == [frozenset({"north"})]
        assert agent.stop() == 0
        assert hub.request("DELETE", "/api/v1/clusters/north").status_code == 200
        wait_for(lambda: view.of("north") is None, what="north forgotten")
        assert heard[-1] == frozenset({"north"})
    finally:
        stop.set()
        thread.join(10)
        client.close()
