"""Event recording (SPEC §2.5): create, fold repeats into a count, never raise."""

from __future__ import annotations

import pytest

from member.kube.events import EventRecorder
from member.kube.resources import ServiceExportClient
from tests.kube.fixtures import KubeCluster
from tests.kube.support import service_export


@pytest.fixture
def recorder(kube_cluster: KubeCluster) -> EventRecorder:
    return EventRecorder(api=kube_cluster.api_client(), host="agent-0")


def test_create_then_count_bump_on_repeat(
    kube_cluster: KubeCluster, recorder: EventRecorder
) -> None:
    state = kube_cluster.state
    state.create("serviceexports", "team", service_export("web"))
    exports = ServiceExportClient(kube_cluster.api_client(), version="v1beta1")
    obj = exports.get("team", "web")
    assert obj is not None

    recorder.record(obj, type="Warning", reason="ServiceExportConflictFound", message="clash.")
    events = state.list("events", "team")
    assert len(events) == 1
    event = events[0]
    assert event["type"] == "Warning"
    assert event["reason"] == "ServiceExportConflictFound"
    assert event["message"] == "clash."
    assert event["count"] == 1
    assert event["source"] == {"component": "mcsync-agent", "host": "agent-0"}
    assert event["involvedObject"] == {
        "apiVersion": "multicluster.x-k8s.io/v1beta1",
        "kind": "ServiceExport",
        "name": "web",
        "namespace": "team",
        "uid": obj["metadata"]["uid"],
        "resourceVersion": obj["metadata"]["resourceVersion"],
    }

    recorder.record(obj, type="Warning", reason="ServiceExportConflictFound", message="clash.")
    recorder.record(obj, type="Warning", reason="ServiceExportConflictFound", message="clash.")
    events = state.list("events", "team")
    assert len(events) == 1
    assert events[0]["count"] == 3
    assert state.count("create", "events") == 1
    assert state.count("patch", "events") == 2

    recorder.record(obj, type="Normal", reason="NoServiceExportConflictFound", message="fine.")
    events = state.list("events", "team")
    assert sorted((e["reason"], e["count"]) for e in events) == [
        ("NoServiceExportConflictFound", 1),
        ("ServiceExportConflictFound", 3),
    ]


def test_repeat_after_the_event_expired_creates_a_new_one(
    kube_cluster: KubeCluster, recorder: EventRecorder
) -> None:
    state = kube_cluster.state
    obj = state.create("serviceexports", "team", service_export("web"))
    recorder.record(obj, type="Normal", reason="Exported", message="ok.")
    [event] = state.list("events", "team")
    state.delete("events", "team", event["metadata"]["name"])  # the API server's event TTL
    recorder.record(obj, type="Normal", reason="Exported", message="ok.")
    [fresh] = state.list("events", "team")
    assert fresh["count"] == 1
    assert fresh["metadata"]["name"] != event["metadata"]["name"]


def test_failures_are_logged_not_raised(
    kube_cluster: KubeCluster, recorder: EventRecorder, caplog: pytest.LogCaptureFixture
) -> None:
    state = kube_cluster.state
    obj = state.create("serviceexports", "team", service_export("web"))
    state.pause()
    try:
        recorder.record(obj, type="Normal", reason="Exported", message="ok.")
    finally:
        state.unpause()
    assert state.list("events", "team") == []
    assert "could not record event Exported on team/web" in caplog.text
    # Nothing remembered from the failed attempt: the next record creates the Event.
    recorder.record(obj, type="Normal", reason="Exported", message="ok.")
    assert [e["count"] for e in state.list("events", "team")] == [1]
