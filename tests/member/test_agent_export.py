"""End to end: a `python -m member` process against an emulated cluster and a real hub.

Export, re-export on a spec change, no re-PUT on no-op updates, each validation reason,
ServiceExport deletion, Service deletion, orphans on the hub, start-up errors.
"""

from __future__ import annotations

import copy
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from shared import conditions as c
from shared.constants import (
    ANNOTATION_EXPORTED_SINCE,
    ANNOTATION_LAST_OBSERVED_RESOURCE_VERSION,
    FINALIZER_SERVICEEXPORT_CLEANUP,
)
from shared.metrics import EXPORT_DURATION_METRIC
from shared.timefmt import parse_rfc3339
from tests.kube.fixtures import KubeCluster
from tests.member.agent_support import (
    REPO_ROOT,
    AgentFactory,
    AgentProcess,
    HubProcess,
    condition,
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


def start_agent(
    kube: KubeCluster, hub: HubProcess, agents: AgentFactory, *extra: str
) -> AgentProcess:
    token = hub.register(CLUSTER)
    return agents("a", kubeconfig=kube.kubeconfig, hub=hub, cluster_id=CLUSTER, token=token,
                  extra=list(extra))


def get_se(kube: KubeCluster, name: str, namespace: str = "shop") -> dict[str, Any] | None:
    return kube.state.get("serviceexports", namespace, name)


def wait_conditions(
    kube: KubeCluster, name: str, expected: dict[str, tuple[str, str]], namespace: str = "shop"
) -> dict[str, Any]:
    def check() -> dict[str, Any] | None:
        obj = get_se(kube, name, namespace)
        return obj if obj is not None and conditions_of(obj) == expected else None

    return wait_for(check, what=f"{namespace}/{name} conditions {expected}")


def events(kube: KubeCluster, namespace: str = "shop") -> list[tuple[str, str]]:
    return [(e.get("type", ""), e.get("reason", "")) for e in kube.state.list("events", namespace)]


def hub_put_count(agent: AgentProcess) -> float:
    route = "/api/v1/clusters/{cluster}/serviceexports/{namespace}/{name}"
    value = agent.metric(
        "mcsync_agent_hub_request_duration_seconds_count", {"method": "PUT", "route": route}
    )
    return value or 0.0


def histogram_count(agent: AgentProcess) -> float:
    value = agent.metric(f"{EXPORT_DURATION_METRIC}_count", {"origin_cluster_id": CLUSTER})
    return value or 0.0


def test_export_then_change_then_no_op(
    kube_cluster: KubeCluster, hub_process: HubProcess, agent_factory: AgentFactory
) -> None:
    state = kube_cluster.state
    service = state.create("services", "shop", service_body("web", "shop"))
    state.create("serviceexports", "shop", service_export_body("web", "shop"))
    agent = start_agent(kube_cluster, hub_process, agent_factory)

    se = wait_conditions(kube_cluster, "web", EXPORTED)
    assert FINALIZER_SERVICEEXPORT_CLEANUP in se["metadata"]["finalizers"]
    since = parse_rfc3339(se["metadata"]["annotations"][ANNOTATION_EXPORTED_SINCE])
    assert condition(se, c.VALID)["observedGeneration"] == se["metadata"]["generation"]  # type: ignore[index]

    record = hub_process.export(CLUSTER, "shop", "web")
    assert record is not None
    ref = record["spec"]["serviceReference"]
    assert ref["resourceVersion"] == service["metadata"]["resourceVersion"]
    assert parse_rfc3339(ref["exportedSince"]) == since
    assert record["spec"]["ports"] == [{"name": "http", "protocol": "TCP", "port": 80}]
    wait_for(lambda: (c.EVENT_TYPE_NORMAL, c.EVENT_NO_CONFLICT_FOUND) in events(kube_cluster),
             what="a Normal NoServiceExportConflictFound Event")
    wait_for(lambda: histogram_count(agent) == 1, what="one export-duration data point")
    wait_for(
        lambda: (hub_process.export(CLUSTER, "shop", "web") or {})["metadata"]["annotations"].get(
            ANNOTATION_LAST_OBSERVED_RESOURCE_VERSION) == ref["resourceVersion"],
        what="the last-observed annotation on the hub record",
    )

    # A Service change that changes the exported spec (ports) is sent again, re-stamped.
    changed = copy.deepcopy(state.get("services", "shop", "web"))
    assert changed is not None
    changed["spec"]["ports"] = [{"name": "http", "port": 80}, {"name": "grpc", "port": 9090}]
    new_service = state.update("services", "shop", changed)
    wait_for(
        lambda: len((hub_process.export(CLUSTER, "shop", "web") or {"spec": {}})["spec"]
                    .get("ports", [])) == 2,
        what="the new ports on the hub",
    )
    record = hub_process.export(CLUSTER, "shop", "web")
    assert record is not None
    assert record["spec"]["serviceReference"]["resourceVersion"] == (
        new_service["metadata"]["resourceVersion"]
    )
    se = wait_for(
        lambda: (o := get_se(kube_cluster, "web")) is not None
        and parse_rfc3339(o["metadata"]["annotations"][ANNOTATION_EXPORTED_SINCE]) > since
        and o,
        what="exportedSince re-stamped",
    )
    wait_for(lambda: histogram_count(agent) == 2, what="a second data point for the new spec")
    settled = wait_for(
        lambda: (r := hub_process.export(CLUSTER, "shop", "web")) is not None
        and r["metadata"]["annotations"].get(ANNOTATION_LAST_OBSERVED_RESOURCE_VERSION)
        == new_service["metadata"]["resourceVersion"] and r,
        what="the hub record settled",
    )
    puts = hub_put_count(agent)

    # No-op updates: a Service label, a targetPort, a ServiceExport label. Nothing re-sent.
    svc = copy.deepcopy(state.get("services", "shop", "web"))
    assert svc is not None
    svc["metadata"].setdefault("labels", {})["touched"] = "yes"
    svc["spec"]["ports"][0]["targetPort"] = 8080
    state.update("services", "shop", svc)
    se_now = copy.deepcopy(get_se(kube_cluster, "web"))
    assert se_now is not None
    se_now["metadata"].setdefault("labels", {})["touched"] = "yes"
    state.update("serviceexports", "shop", se_now)
    # A marker export after the no-ops: once it is exported, the no-ops were processed too
    # (the informers deliver in order; the agent reconciles the earlier keys first or alongside).
    state.create("services", "shop", service_body("marker", "shop"))
    state.create("serviceexports", "shop", service_export_body("marker", "shop"))
    wait_conditions(kube_cluster, "marker", EXPORTED)
    wait_for(lambda: histogram_count(agent) == 3, what="the marker's data point")
    after = hub_process.export(CLUSTER, "shop", "web")
    assert after is not None
    assert after["metadata"]["resourceVersion"] == settled["metadata"]["resourceVersion"]
    assert hub_put_count(agent) == puts + 1  # only the marker's PUT
    assert parse_rfc3339(
        get_se(kube_cluster, "web")["metadata"]["annotations"][ANNOTATION_EXPORTED_SINCE]  # type: ignore[index]
    ) == parse_rfc3339(se["metadata"]["annotations"][ANNOTATION_EXPORTED_SINCE])

    assert agent.stop() == 0
    token = (agent.directory / "a.token").read_text().strip()
    assert token not in agent.logs()  # never logged, even at DEBUG


@pytest.mark.parametrize(
    ("namespace", "service", "reason"),
    [
        ("shop", None, c.REASON_NO_SERVICE),
        ("shop", service_body("web", "shop", type="ExternalName", externalName="example.com",
                              ports=[]), c.REASON_INVALID_SERVICE_TYPE),
        ("kube-system", service_body("web", "kube-system"), c.REASON_NAMESPACE_NOT_ALLOWED),
    ],
)
def test_validation_reasons(
    kube_cluster: KubeCluster, hub_process: HubProcess, agent_factory: AgentFactory,
    namespace: str, service: dict[str, Any] | None, reason: str,
) -> None:
    state = kube_cluster.state
    if service is not None:
        if service["spec"].get("type") == "ExternalName":
            service["spec"].pop("ports")
        state.create("services", namespace, service)
    state.create("serviceexports", namespace, service_export_body("web", namespace))
    start_agent(kube_cluster, hub_process, agent_factory)
    se = wait_conditions(
        kube_cluster, "web",
        {c.VALID: (c.FALSE, reason), c.READY: (c.FALSE, c.REASON_PENDING)},
        namespace=namespace,
    )
    message = condition(se, c.VALID)["message"]  # type: ignore[index]
    assert message.endswith(".") and namespace in message
    # The hub hears of it through the agent's heartbeat (`mcsync exports --invalid`).
    reported = wait_for(
        lambda: hub_process.request("GET", "/api/v1/invalidexports").json()["items"] or None,
        what="the invalid ServiceExport reported to the hub",
    )
    assert reported == [{"cluster": CLUSTER, "namespace": namespace, "name": "web",
                         "reason": reason, "message": message}]
    assert hub_process.export(CLUSTER, namespace, "web") is None


def test_deletions_and_orphans(
    kube_cluster: KubeCluster, hub_process: HubProcess, agent_factory: AgentFactory
) -> None:
    state = kube_cluster.state
    for name in ("gone", "nosvc"):
        state.create("services", "shop", service_body(name, "shop"))
        state.create("serviceexports", "shop", service_export_body(name, "shop"))
    token = hub_process.register(CLUSTER)
    # An orphan: a record on the hub for a key with no ServiceExport in the cluster.
    orphan = hub_process.request(
        "PUT", f"/api/v1/clusters/{CLUSTER}/serviceexports/shop/orphan", token=token,
        json={
            "metadata": {"name": "orphan", "namespace": "shop"},
            "spec": {"serviceReference": {
                "clusterId": CLUSTER, "namespace": "shop", "name": "orphan",
                "resourceVersion": "1", "exportedSince": "2026-01-01T00:00:00Z",
                "exportCreationTimestamp": "2026-01-01T00:00:00Z",
            }},
        },
    )
    assert orphan.status_code == 201, orphan.text
    agent_factory("a", kubeconfig=kube_cluster.kubeconfig, hub=hub_process, cluster_id=CLUSTER,
                  token=token)
    wait_for(lambda: hub_process.export(CLUSTER, "shop", "orphan") is None,
             what="the orphan withdrawn")
    for name in ("gone", "nosvc"):
        wait_conditions(kube_cluster, name, EXPORTED)

    # ServiceExport deleted: hub record withdrawn, then the finalizer goes, then the object.
    state.delete("serviceexports", "shop", "gone")
    wait_for(lambda: get_se(kube_cluster, "gone") is None, what="the ServiceExport gone")
    assert hub_process.export(CLUSTER, "shop", "gone") is None

    # Service deleted: Valid=False/NoService, withdrawn, the ServiceExport stays.
    state.delete("services", "shop", "nosvc")
    wait_conditions(
        kube_cluster, "nosvc",
        {c.VALID: (c.FALSE, c.REASON_NO_SERVICE), c.READY: (c.FALSE, c.REASON_PENDING)},
    )
    assert hub_process.export(CLUSTER, "shop", "nosvc") is None
    # The annotation goes in a write of its own (a status write changes no metadata).
    wait_for(lambda: ANNOTATION_EXPORTED_SINCE not in (
        (get_se(kube_cluster, "nosvc") or {}).get("metadata", {}).get("annotations") or {}),
        what="exported-since removed from the ServiceExport")

    # The Service comes back: exported again.
    state.create("services", "shop", service_body("nosvc", "shop"))
    wait_conditions(kube_cluster, "nosvc", EXPORTED)
    assert hub_process.export(CLUSTER, "shop", "nosvc") is not None


def test_odd_service_becomes_failed_not_a_crash(
    kube_cluster: KubeCluster, hub_process: HubProcess, agent_factory: AgentFactory
) -> None:
    state = kube_cluster.state
    # A value newer than the contract (a future Kubernetes trafficDistribution): refused
    # with a sentence naming the field, not a crash and not a silently wrong export.
    state.create("services", "shop",
                 service_body("odd", "shop", trafficDistribution="PreferSomewhereNew"))
    state.create("serviceexports", "shop", service_export_body("odd", "shop"))
    state.create("services", "shop", service_body("fine", "shop"))
    state.create("serviceexports", "shop", service_export_body("fine", "shop"))
    start_agent(kube_cluster, hub_process, agent_factory)
    se = wait_conditions(
        kube_cluster, "odd",
        {c.VALID: (c.TRUE, c.REASON_VALID), c.READY: (c.FALSE, c.REASON_FAILED)},
    )
    assert "trafficDistribution" in condition(se, c.READY)["message"]  # type: ignore[index]
    wait_conditions(kube_cluster, "fine", EXPORTED)


def test_too_old_agent_stops_exporting(
    kube_cluster: KubeCluster, tmp_path: Path, agent_factory: AgentFactory
) -> None:
    hub = HubProcess(directory=tmp_path, extra_args=["--min-agent-version", "99.0.0"])
    hub.start()
    try:
        state = kube_cluster.state
        state.create("services", "shop", service_body("web", "shop"))
        state.create("serviceexports", "shop", service_export_body("web", "shop"))
        agent = agent_factory("old", kubeconfig=kube_cluster.kubeconfig, hub=hub,
                              cluster_id=CLUSTER, token=hub.register(CLUSTER))
        se = wait_conditions(
            kube_cluster, "web",
            {c.VALID: (c.TRUE, c.REASON_VALID), c.READY: (c.FALSE, c.REASON_FAILED)},
        )
        assert "99.0.0" in condition(se, c.READY)["message"]  # type: ignore[index]
        assert agent.metric("mcsync_agent_version_supported") == 0
        assert "older than the hub's minAgentVersion" in agent.logs()
        assert hub.export(CLUSTER, "shop", "web") is None
    finally:
        hub.stop()


@pytest.mark.parametrize(
    ("args", "env", "in_message"),
    [
        (["--cluster-id", "c"], {}, "--hub-url"),
        (["--hub-url", "ftp://x", "--cluster-id", "c"], {"MCSYNC_HUB_TOKEN": "t"}, "--hub-url"),
        (["--hub-url", "http://x", "--cluster-id", "c", "--token-file", "/nonexistent/t"], {},
         "--token-file"),
        (["--hub-url", "http://x", "--cluster-id", "c", "--workers", "zero"],
         {"MCSYNC_HUB_TOKEN": "t"}, "--workers"),
        (["--hub-url", "http://x", "--cluster-id", "c", "--kubeconfig", "/nonexistent/kc"],
         {"MCSYNC_HUB_TOKEN": "t"}, "--kubeconfig"),
        (["--hub-url", "http://x", "--cluster-id", "c"],
         {"MCSYNC_HUB_TOKEN": "t", "MCSYNC_LEASE_DURATION": "soon"}, "MCSYNC_LEASE_DURATION"),
    ],
)
def test_bad_start_is_one_line_and_exit_2(
    args: list[str], env: dict[str, str], in_message: str
) -> None:
    import os

    clean = {k: v for k, v in os.environ.items() if not k.startswith("MCSYNC_")}
    done = subprocess.run(
        [sys.executable, "-m", "member", *args], cwd=REPO_ROOT, env={**clean, **env},
        capture_output=True, text=True, timeout=60,
    )
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert in_message in lines[0]
    assert "t" not in env or env.get("MCSYNC_HUB_TOKEN") != lines[0]


@pytest.mark.slow
def test_live_change_is_not_starved_by_the_startup_repair(
    kube_cluster: KubeCluster, hub_process: HubProcess, agent_factory: AgentFactory
) -> None:
    """docs/reference.md#export-path: the repair of many keys at start goes to the bulk lane; a
    fresh change made while it runs is exported long before the repair finishes."""
    state = kube_cluster.state
    many = 300
    for index in range(many):
        state.create("services", "bulk", service_body(f"svc-{index}", "bulk"))
        state.create("serviceexports", "bulk", service_export_body(f"svc-{index}", "bulk"))
    agent = start_agent(kube_cluster, hub_process, agent_factory, "--workers", "1")

    def hub_count() -> int:
        return len(hub_process.exports(CLUSTER))

    wait_for(lambda: hub_count() >= 10, what="the repair under way")
    state.create("services", "shop", service_body("fresh", "shop"))
    state.create("serviceexports", "shop", service_export_body("fresh", "shop"))
    wait_for(lambda: hub_process.export(CLUSTER, "shop", "fresh") is not None,
             what="the fresh export on the hub", interval=0.05)
    # The fresh key overtook the bulk lane: most of the repair was still waiting.
    assert hub_count() < many // 2
    wait_for(lambda: hub_count() == many + 1, what="the repair finished", timeout=240)
    assert agent.stop() == 0
