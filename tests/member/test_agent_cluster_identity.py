"""The cluster's id and clusterset in KEP-2149's About API (docs/reference.md#export-path).

`resolve_cluster_id` is driven row by row against emulated clusters with and without the
About API (one row per outcome); the agent process is then run against a real hub started
with `--clusterset-name`: it takes its id from the property, creates both properties where
they are absent, and stops with one line, exit 2, when `clusterset.k8s.io` names another
clusterset or the id disagrees with `--cluster-id`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from member.clusteridentity import (
    AboutApi,
    ClusterIdentityError,
    ClustersetProperty,
    resolve_cluster_id,
)
from shared.aboutapi import ABOUT_GROUP, CLUSTER_ID_PROPERTY, CLUSTERSET_PROPERTY
from tests.kube.fixtures import KubeCluster
from tests.member.agent_support import (
    AgentProcess,
    HubProcess,
    _env,
    forget_logs,
    free_port,
    wait_for,
)

CLUSTERSET = "prod.example.com"


def seed(cluster: KubeCluster, name: str, value: str) -> None:
    cluster.state.create("clusterproperties", None, {"metadata": {"name": name},
                                                     "spec": {"value": value}})


def value_of(cluster: KubeCluster, name: str) -> str | None:
    found = cluster.state.get("clusterproperties", None, name)
    return None if found is None else str(found["spec"]["value"])


# (about API installed, stored cluster.clusterset.k8s.io, --cluster-id) → id, or the error.
RESOLVE_CASES: list[tuple[str, bool, str | None, str | None, str]] = [
    ("no About API, flag", False, None, "east", "east"),
    ("no About API, no flag", False, None, None,
     "argument --cluster-id: required: this cluster has no About API"),
    ("property only", True, "east", None, "east"),
    ("both agree", True, "east", "east", "east"),
    ("both disagree", True, "west", "east",
     "argument --cluster-id: 'east' disagrees with ClusterProperty cluster.clusterset.k8s.io, "
     "which says 'west'"),
    ("flag only: property created", True, None, "east", "east"),
    ("neither", True, None, None,
     "argument --cluster-id: required: ClusterProperty cluster.clusterset.k8s.io does not "
     "exist yet"),
    ("property not a subdomain", True, "East_1", None,
     "ClusterProperty cluster.clusterset.k8s.io: 'East_1' is not an RFC 1123 DNS subdomain"),
    ("property too long", True, "a" * 128, None,
     "is 128 characters long (at most 127)"),
    ("property a subdomain, not a cluster name", True, "east.example.com", None,
     "'east.example.com' is a KEP-2149 id but not an mcsync cluster name"),
]


@pytest.mark.parametrize(("about", "stored", "given", "outcome"),
                         [row[1:] for row in RESOLVE_CASES],
                         ids=[row[0] for row in RESOLVE_CASES])
def test_resolve_cluster_id(kube_cluster_factory: Callable[..., KubeCluster], about: bool,
                            stored: str | None, given: str | None, outcome: str) -> None:
    cluster = kube_cluster_factory("c", about_api=about)
    if stored is not None:
        seed(cluster, CLUSTER_ID_PROPERTY, stored)
    api = AboutApi(cluster.api_client())
    assert api.installed is about
    before = cluster.state.writes("clusterproperties")
    if " " in outcome:  # an error line
        with pytest.raises(ClusterIdentityError) as info:
            resolve_cluster_id(api, given=given)
        assert outcome in str(info.value)
        assert "\n" not in str(info.value)
        assert cluster.state.writes("clusterproperties") == before
        return
    assert resolve_cluster_id(api, given=given) == outcome
    if about:
        assert value_of(cluster, CLUSTER_ID_PROPERTY) == outcome
        # Created only when absent; an existing property is never rewritten.
        assert cluster.state.writes("clusterproperties") == before + (stored is None)
    else:
        assert cluster.state.count(resource="clusterproperties") == 0


def test_the_about_api_is_found_at_v1alpha1_only(
    kube_cluster_factory: Callable[..., KubeCluster],
) -> None:
    # Clusters with an older About API install serve v1alpha1 alone; the emulator serves
    # both, so discovery's answer decides: v1beta1 is preferred when listed.
    cluster = kube_cluster_factory("c", about_api=True)
    assert AboutApi(cluster.api_client()).version == "v1beta1"
    group = cluster.state.catalog.groups()[ABOUT_GROUP]
    assert group == ("v1beta1", "v1alpha1")


# (About API installed, stored clusterset.k8s.io, the hub's name) → the value after, or the
# fatal line's start.
CLUSTERSET_CASES: list[tuple[str, bool, str | None, str | None, str | None, str | None]] = [
    ("absent: created", True, None, CLUSTERSET, CLUSTERSET, None),
    ("equal: left as it is", True, CLUSTERSET, CLUSTERSET, CLUSTERSET, None),
    ("another clusterset: stop", True, "staging", CLUSTERSET, "staging",
     "ClusterProperty clusterset.k8s.io says this cluster belongs to clusterset 'staging', "
     f"but the hub at http://hub serves clusterset '{CLUSTERSET}'"),
    ("not an id: stop", True, "Bad_Set", CLUSTERSET, "Bad_Set",
     "ClusterProperty clusterset.k8s.io: 'Bad_Set' is not an RFC 1123 DNS subdomain"),
    ("the hub names none: nothing", True, None, None, None, None),
    ("no About API: nothing", False, None, CLUSTERSET, None, None),
]


@pytest.mark.parametrize(("about", "stored", "hub_name", "after", "fatal"),
                         [row[1:] for row in CLUSTERSET_CASES],
                         ids=[row[0] for row in CLUSTERSET_CASES])
def test_clusterset_property(kube_cluster_factory: Callable[..., KubeCluster], about: bool,
                             stored: str | None, hub_name: str | None, after: str | None,
                             fatal: str | None) -> None:
    cluster = kube_cluster_factory("c", about_api=about)
    if stored is not None:
        seed(cluster, CLUSTERSET_PROPERTY, stored)
    stops: list[bool] = []
    keeper = ClustersetProperty(AboutApi(cluster.api_client()), hub_url="http://hub",
                                on_fatal=lambda: stops.append(True))
    for _ in range(3):  # every heartbeat answer; settled after the first
        keeper.observe(hub_name)
    if about:
        assert value_of(cluster, CLUSTERSET_PROPERTY) == after
        assert cluster.state.writes("clusterproperties") == (stored is None and after is not None)
        assert cluster.state.count("get", "clusterproperties") == (hub_name is not None)
    else:
        assert cluster.state.count(resource="clusterproperties") == 0
    assert stops == ([True] if fatal else [])
    assert (keeper.fatal or "").startswith(fatal or "")
    assert (keeper.fatal is None) is (fatal is None)


def test_clusterset_property_retries_after_an_outage(
    kube_cluster_factory: Callable[..., KubeCluster],
) -> None:
    cluster = kube_cluster_factory("c", about_api=True)
    keeper = ClustersetProperty(AboutApi(cluster.api_client()), hub_url="http://hub")
    cluster.state.pause()
    keeper.observe(CLUSTERSET)  # 503: logged, not fatal, tried again at the next answer
    assert keeper.fatal is None
    cluster.state.unpause()
    keeper.observe(CLUSTERSET)
    assert value_of(cluster, CLUSTERSET_PROPERTY) == CLUSTERSET


# -- the agent process against a real hub ---------------------------------------------------


@pytest.fixture(scope="module")
def hub(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HubProcess]:
    process = HubProcess(directory=tmp_path_factory.mktemp("hub"),
                         extra_args=["--clusterset-name", CLUSTERSET])
    process.start()
    try:
        yield process
    finally:
        process.stop()
        forget_logs()


@pytest.fixture
def run_agent(tmp_path: Path, hub: HubProcess) -> Iterator[Callable[..., AgentProcess]]:
    """`run_agent(cluster, cluster_name, *, cluster_id=None)`: an agent process for
    `cluster`, registered on the hub as `cluster_name`, `--cluster-id` only when given."""
    agents: list[AgentProcess] = []
    tokens: dict[str, str] = {}

    def start(cluster: KubeCluster, cluster_name: str, *, cluster_id: str | None = None,
              wait_ready: bool = True) -> AgentProcess:
        if cluster_name not in tokens:
            tokens[cluster_name] = hub.register(cluster_name)
        token_file = tmp_path / f"{cluster_name}.token"
        token_file.write_text(tokens[cluster_name] + "\n")
        port = free_port()
        args = ["--hub-url", hub.url, "--token-file", str(token_file),
                "--kubeconfig", str(cluster.kubeconfig), "--metrics-port", str(port),
                "--metrics-host", "127.0.0.1", "--heartbeat-interval", "1", "--workers", "1",
                *(["--cluster-id", cluster_id] if cluster_id else [])]
        agent = AgentProcess(name=f"{cluster_name}-{len(agents)}", args=args, env=_env(),
                             directory=tmp_path, metrics_port=port)
        agents.append(agent)
        agent.start(wait_ready=wait_ready)
        return agent

    try:
        yield start
    finally:
        for agent in agents:
            agent.kill()


def exit_line(agent: AgentProcess) -> tuple[int, str]:
    """The exit code and the last line of an agent that stops by itself."""
    assert agent.process is not None
    agent.process.wait(60)
    lines = agent.logs().strip().splitlines()
    return agent.process.returncode, lines[-1]


def heartbeat_seen(hub: HubProcess, cluster: str) -> bool:
    answer = hub.request("GET", f"/api/v1/clusters/{cluster}")
    body: dict[str, Any] = answer.json()
    return answer.status_code == 200 and body["status"].get("state") == "Ready"


def test_agent_takes_its_id_from_the_property_and_creates_the_clusterset(
    kube_cluster_factory: Callable[..., KubeCluster], hub: HubProcess,
    run_agent: Callable[..., AgentProcess],
) -> None:
    cluster = kube_cluster_factory("idp", about_api=True)
    seed(cluster, CLUSTER_ID_PROPERTY, "idp")
    agent = run_agent(cluster, "idp")  # no --cluster-id
    wait_for(lambda: heartbeat_seen(hub, "idp"), what="the hub hears from cluster idp")
    wait_for(lambda: value_of(cluster, CLUSTERSET_PROPERTY) == CLUSTERSET,
             what="clusterset.k8s.io created with the hub's clusterset name")
    assert agent.metric("mcsync_agent_info", {"cluster_id": "idp"}) == 1
    # Settled once: later heartbeats neither read nor write the properties again.
    reads = cluster.state.count(resource="clusterproperties")
    beats = agent.metric("mcsync_agent_heartbeats_total", {"result": "ok"}) or 0
    wait_for(lambda: (agent.metric("mcsync_agent_heartbeats_total", {"result": "ok"}) or 0)
             >= beats + 3, what="three more heartbeats")
    assert cluster.state.count(resource="clusterproperties") == reads
    assert agent.stop() == 0


def test_agent_creates_both_properties_from_its_flag_and_the_hub(
    kube_cluster_factory: Callable[..., KubeCluster], hub: HubProcess,
    run_agent: Callable[..., AgentProcess],
) -> None:
    cluster = kube_cluster_factory("fresh", about_api=True)
    agent = run_agent(cluster, "fresh", cluster_id="fresh")
    assert value_of(cluster, CLUSTER_ID_PROPERTY) == "fresh"
    wait_for(lambda: value_of(cluster, CLUSTERSET_PROPERTY) == CLUSTERSET,
             what="clusterset.k8s.io created")
    assert cluster.state.writes("clusterproperties") == 2
    assert agent.stop() == 0


def test_agent_stops_when_the_cluster_belongs_to_another_clusterset(
    kube_cluster_factory: Callable[..., KubeCluster], hub: HubProcess,
    run_agent: Callable[..., AgentProcess],
) -> None:
    cluster = kube_cluster_factory("elsewhere", about_api=True)
    seed(cluster, CLUSTERSET_PROPERTY, "staging")
    agent = run_agent(cluster, "elsewhere", cluster_id="elsewhere", wait_ready=False)
    code, line = exit_line(agent)
    assert code == 2
    assert line.startswith("mcsync-agent: error: ClusterProperty clusterset.k8s.io says this "
                           "cluster belongs to clusterset 'staging'"), line
    assert f"serves clusterset {CLUSTERSET!r}" in line
    assert value_of(cluster, CLUSTERSET_PROPERTY) == "staging"  # left as it was


def test_agent_refuses_an_id_that_disagrees_with_the_property(
    kube_cluster_factory: Callable[..., KubeCluster], hub: HubProcess,
    run_agent: Callable[..., AgentProcess],
) -> None:
    cluster = kube_cluster_factory("twoids", about_api=True)
    seed(cluster, CLUSTER_ID_PROPERTY, "west")
    agent = run_agent(cluster, "twoids", cluster_id="twoids", wait_ready=False)
    code, line = exit_line(agent)
    assert code == 2
    assert agent.logs().strip() == line  # one line, no traceback
    assert line == (
        "mcsync-agent: error: argument --cluster-id: 'twoids' disagrees with ClusterProperty "
        "cluster.clusterset.k8s.io, which says 'west'; give the same id (or leave "
        "--cluster-id out)"
    )
