"""Event recording (docs/reference.md#export-path): create, fold repeats into a count, never
raise."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from member.kube import events as events_module
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
    assert recorder.flush(timeout=10)
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
    assert recorder.flush(timeout=10)
    events = state.list("events", "team")
    assert len(events) == 1
    assert events[0]["count"] == 3
    assert state.count("create", "events") == 1
    assert state.count("patch", "events") == 2

    recorder.record(obj, type="Normal", reason="NoServiceExportConflictFound", message="fine.")
    assert recorder.flush(timeout=10)
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
    assert recorder.flush(timeout=10)
    [event] = state.list("events", "team")
    state.delete("events", "team", event["metadata"]["name"])  # the API server's event TTL
    recorder.record(obj, type="Normal", reason="Exported", message="ok.")
    assert recorder.flush(timeout=10)
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
        assert recorder.flush(timeout=10)
    finally:
        state.unpause()
    assert state.list("events", "team") == []
    assert "could not record event Exported on team/web" in caplog.text
    # Nothing remembered from the failed attempt: the next record creates the Event.
    recorder.record(obj, type="Normal", reason="Exported", message="ok.")
    assert recorder.flush(timeout=10)
    assert [e["count"] for e in state.list("events", "team")] == [1]


def test_record_does_not_wait_for_the_api_server(
    kube_cluster: KubeCluster, recorder: EventRecorder, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The caller (a reconcile) goes on while the Event is written; order is kept."""
    state = kube_cluster.state
    obj = state.create("serviceexports", "team", service_export("web"))
    release = threading.Event()
    real = events_module.request_json

    def slow_request_json(*args: Any, **kwargs: Any) -> Any:
        assert release.wait(10), "the test never released the API server"
        return real(*args, **kwargs)

    monkeypatch.setattr(events_module, "request_json", slow_request_json)
    recorder.record(obj, type="Warning", reason="ServiceExportConflictFound", message="a.")
    recorder.record(obj, type="Normal", reason="NoServiceExportConflictFound", message="b.")
    # record() answered while the API server had not answered anything yet.
    assert not recorder.flush(timeout=0.05)
    assert state.count("create", "events") == 0
    release.set()
    assert recorder.flush(timeout=10)
    written = sorted(
        state.list("events", "team"), key=lambda e: int(e["metadata"]["resourceVersion"])
    )
    assert [e["message"] for e in written] == ["a.", "b."]


def test_a_full_queue_drops_instead_of_blocking(
    kube_cluster: KubeCluster, caplog: pytest.LogCaptureFixture
) -> None:
    state = kube_cluster.state
    obj = state.create("serviceexports", "team", service_export("web"))
    recorder = EventRecorder(api=kube_cluster.api_client(), host="agent-0", queue_size=1)
    state.pause()
    try:
        for i in range(20):  # the sender holds at most one, the queue one: the rest drop
            recorder.record(obj, type="Normal", reason="Exported", message=f"{i}.")
    finally:
        state.unpause()
    assert recorder.flush(timeout=10)
    assert "dropped event Exported on team/web" in caplog.text
