"""Test controls (pause, request counts, HTTP `/emulator/…`) and the process mode."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from kubernetes import client, config, watch
from kubernetes.client.exceptions import ApiException

from sandbox.emulator import EmulatorServer
from shared.constants import MCS_GROUP
from tests.kube.fixtures import EmulatorProcess, KubeCluster, start_emulator_process
from tests.kube.support import core_api, custom_api, failure, service, service_export

NS = "team-a"


def test_pause_answers_503_until_unpaused(kube_cluster: KubeCluster) -> None:
    core = core_api(kube_cluster)
    core.create_namespaced_service(NS, service("web"))
    kube_cluster.state.pause()
    with pytest.raises(ApiException) as info:
        core.read_namespaced_service("web", NS)
    assert info.value.status == 503
    assert failure(info.value)["reason"] == "ServiceUnavailable"
    with pytest.raises(ApiException) as discovery:
        client.ApisApi(kube_cluster.api_client()).get_api_versions()
    assert discovery.value.status == 503
    kube_cluster.state.unpause()
    assert core.read_namespaced_service("web", NS).metadata.name == "web"


def test_request_counts_per_verb_and_resource(kube_cluster: KubeCluster) -> None:
    core = core_api(kube_cluster)
    custom = custom_api(kube_cluster)
    state = kube_cluster.state
    core.create_namespaced_service(NS, service("web"))
    core.read_namespaced_service("web", NS)
    core.list_namespaced_service(NS)
    custom.create_namespaced_custom_object(MCS_GROUP, "v1beta1", NS, "serviceexports",
                                           service_export("web"))
    custom.patch_namespaced_custom_object_status(MCS_GROUP, "v1beta1", NS, "serviceexports",
                                                 "web", {"status": {"conditions": []}})
    with pytest.raises(ApiException):
        core.read_namespaced_service("missing", NS)
    assert state.request_counts() == {
        ("create", "services"): 1, ("get", "services"): 2, ("list", "services"): 1,
        ("create", "serviceexports"): 1, ("patch", "serviceexports/status"): 1,
    }
    assert state.writes("services") == 1
    assert state.count("get") == 2
    assert [r.code for r in state.requests() if r.verb == "get"] == [200, 404]
    state.reset_request_counts()
    assert state.request_counts() == {}


def test_http_controls(kube_cluster: KubeCluster) -> None:
    core = core_api(kube_cluster)
    old = core.create_namespaced_service(NS, service("a")).metadata.resource_version
    core.create_namespaced_service(NS, service("b"))
    base = f"{kube_cluster.url}/emulator"
    summary = httpx.get(f"{base}/state").json()
    assert summary["mcsVersions"] == ["v1beta1", "v1alpha1"] and summary["paused"] is False
    assert httpx.post(f"{base}/compact").json()["compactedResourceVersion"] == \
        summary["resourceVersion"]
    with pytest.raises(ApiException) as expired:
        for _ in watch.Watch().stream(core.list_namespaced_service, NS, resource_version=old,
                                      timeout_seconds=5):
            pass
    assert expired.value.status == 410
    counts = httpx.get(f"{base}/requests").json()["counts"]
    assert {"verb": "create", "resource": "services", "count": 2} in counts
    assert httpx.delete(f"{base}/requests").status_code == 200
    assert httpx.get(f"{base}/requests").json()["counts"] == []
    assert httpx.post(f"{base}/inject-conflict", json={
        "resource": "services", "namespace": NS, "name": "a"}).status_code == 200
    with pytest.raises(ApiException) as conflict:
        core.patch_namespaced_service("a", NS, {"metadata": {"labels": {"x": "y"}}})
    assert conflict.value.status == 409
    assert httpx.post(f"{base}/pause").json()["paused"] is True
    assert httpx.get(f"{kube_cluster.url}/api/v1/namespaces/{NS}/services").status_code == 503
    assert httpx.post(f"{base}/unpause").json()["paused"] is False
    assert httpx.post(f"{base}/close-watches").json() == {"closed": 0}


def test_several_clusters_are_independent(
    kube_cluster_factory: Callable[..., KubeCluster],
) -> None:
    east = kube_cluster_factory("east")
    west = kube_cluster_factory("west", mcs_versions=("v1alpha1",))
    assert east.url != west.url
    core_api(east).create_namespaced_service(NS, service("web"))
    assert core_api(west).list_namespaced_service(NS).items == []
    assert west.kubeconfig.name == "west.kubeconfig"
    _contexts, active = config.list_kube_config_contexts(config_file=str(west.kubeconfig))
    assert active["name"] == "west" and active["context"]["cluster"] == "west"


@pytest.fixture
def emulator_process(tmp_path: Path) -> Iterator[EmulatorProcess]:
    process = start_emulator_process(tmp_path, "proc", mcs_versions=("v1alpha1",), history=5,
                                     namespaces=(NS,))
    try:
        yield process
    finally:
        process.stop()


def test_process_mode_starts_and_answers(emulator_process: EmulatorProcess) -> None:
    assert emulator_process.url.startswith("http://127.0.0.1:")
    api = config.new_client_from_config(config_file=str(emulator_process.kubeconfig))
    try:
        groups = {g.name: g for g in client.ApisApi(api).get_api_versions().groups}
        assert [v.version for v in groups[MCS_GROUP].versions] == ["v1alpha1"]
        custom: Any = client.CustomObjectsApi(api)
        custom.create_namespaced_custom_object(MCS_GROUP, "v1alpha1", NS, "serviceexports",
                                               service_export("web", version="v1alpha1"))
        listed = custom.list_namespaced_custom_object(MCS_GROUP, "v1alpha1", NS,
                                                      "serviceexports")
        assert [i["metadata"]["name"] for i in listed["items"]] == ["web"]
        assert emulator_process.control("GET", "requests")["counts"] == [
            {"verb": "create", "resource": "serviceexports", "count": 1},
            {"verb": "list", "resource": "serviceexports", "count": 1},
        ]
        emulator_process.control("POST", "pause")
        with pytest.raises(ApiException) as info:
            custom.list_namespaced_custom_object(MCS_GROUP, "v1alpha1", NS, "serviceexports")
        assert info.value.status == 503
    finally:
        api.close()
    emulator_process.stop()
    assert emulator_process.process.returncode is not None


CONTROLS = [("GET", "state"), ("POST", "pause"), ("POST", "compact"), ("GET", "requests"),
            ("DELETE", "requests"), ("POST", "close-watches"), ("POST", "inject-conflict")]


def test_a_process_serves_no_test_controls_unless_asked(tmp_path: Path) -> None:
    """`python -m sandbox.emulator` as `mcsync sandbox` starts it (no `--test-controls`):
    every `/emulator/…` control is a 404 Status like any unknown path, nothing is paused,
    and the Kubernetes API itself answers on."""
    process = start_emulator_process(tmp_path, "plain", namespaces=(NS,), test_controls=False)
    try:
        for method, action in CONTROLS:
            answer = httpx.request(method, f"{process.url}/emulator/{action}",
                                   content=b'{"resource": "services", "name": "x"}',
                                   timeout=10)
            assert answer.status_code == 404, (method, action, answer.text)
            assert answer.json()["reason"] == "NotFound"
        assert httpx.get(f"{process.url}/api/v1/namespaces/{NS}", timeout=10).status_code == 200
    finally:
        process.stop()


def test_the_in_process_server_can_leave_the_controls_off() -> None:
    """`EmulatorServer` keeps them on for tests and benchmarks; `test_controls=False` is
    what every cluster of `mcsync sandbox` serves."""
    with EmulatorServer(test_controls=False) as off, EmulatorServer() as on:
        assert httpx.get(f"{off.url}/emulator/state", timeout=10).status_code == 404
        assert httpx.post(f"{off.url}/emulator/pause", timeout=10).status_code == 404
        assert not off.state.paused
        assert httpx.get(f"{on.url}/emulator/state", timeout=10).status_code == 200
