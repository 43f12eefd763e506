"""Informers over the Kubernetes API emulator, through `member.kube.listwatch` (real HTTP)."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from member.informer import Informer
from member.kube.listwatch import KubeListWatch, ServiceExportListWatch, ServiceListWatch
from tests.kube.fixtures import KubeCluster, KubeClusterFactory
from tests.kube.support import service, service_export, wait_for
from tests.member.informer_support import Recorder

DEADLINE = 30.0


def start_informer(
    list_watch: KubeListWatch, stop: threading.Event, *, name: str = "services"
) -> tuple[Informer, Recorder, threading.Thread]:
    recorder = Recorder()
    informer = Informer(name=name, list_watch=list_watch, handler=recorder)
    thread = informer.start(stop)
    assert informer.wait_for_sync(DEADLINE)
    return informer, recorder, thread


def rv(obj: dict[str, Any]) -> str:
    return str(obj["metadata"]["resourceVersion"])


def test_initial_list_then_live_changes_in_order(
    kube_cluster: KubeCluster, stop: threading.Event
) -> None:
    state = kube_cluster.state
    a = state.create("services", "default", service("a"))
    b = state.create("services", "default", service("b"))
    api = kube_cluster.api_client()
    informer, recorder, _ = start_informer(ServiceListWatch(api, namespace=None), stop)
    assert sorted(recorder.events) == [
        ("ADDED", "default/a", rv(a), True),
        ("ADDED", "default/b", rv(b), True),
    ]
    cached = informer.get("default/a")
    assert cached is not None and cached["kind"] == "Service" and cached["apiVersion"] == "v1"
    wait_for(lambda: state.open_watches() == 1, what="the watch to open")

    a["metadata"]["labels"] = {"tier": "web"}
    a2 = state.update("services", "default", a)
    state.delete("services", "default", "b")
    c = state.create("services", "default", service("c"))
    wait_for(lambda: len(recorder.events) == 5, what="three live events")
    deleted_rv = recorder.events[3][2]
    assert recorder.events[2:] == [
        ("MODIFIED", "default/a", rv(a2), False),
        ("DELETED", "default/b", deleted_rv, False),
        ("ADDED", "default/c", rv(c), False),
    ]
    assert sorted(informer.keys()) == ["default/a", "default/c"]
    cached = informer.get("default/a")
    assert cached is not None and cached["metadata"]["labels"] == {"tier": "web"}
    assert state.count("list", "services") == 1


def test_the_derived_services_of_imports_are_not_watched_for_export(
    kube_cluster: KubeCluster, stop: threading.Event
) -> None:
    """The agent's own derived Services (docs/reference.md#import-path) are never exported: the
    export side's Service informer neither lists nor watches them."""
    state = kube_cluster.state
    ours = {"app.kubernetes.io/managed-by": "mcsync"}
    state.create("services", "default", service("mcsync-0123456789", labels=ours))
    state.create(
        "services", "default", service("web", labels={"app.kubernetes.io/managed-by": "helm"})
    )
    api = kube_cluster.api_client()
    informer, recorder, _ = start_informer(ServiceListWatch(api, namespace=None), stop)
    wait_for(lambda: state.open_watches() == 1, what="the watch to open")
    state.create("services", "default", service("mcsync-abcdefabcd", labels=ours))
    state.create("services", "default", service("marker"))
    wait_for(lambda: len(recorder.events) == 2, what="the marker")
    assert [e[1] for e in recorder.events] == ["default/web", "default/marker"]
    assert sorted(informer.keys()) == ["default/marker", "default/web"]


def test_update_that_changes_nothing_delivers_nothing(
    kube_cluster: KubeCluster, stop: threading.Event
) -> None:
    state = kube_cluster.state
    a = state.create("services", "default", service("a"))
    api = kube_cluster.api_client()
    _, recorder, _ = start_informer(ServiceListWatch(api, namespace="default"), stop)
    wait_for(lambda: state.open_watches() == 1, what="the watch to open")
    state.update("services", "default", a)  # same content: same resourceVersion
    state.create("services", "default", service("marker"))
    wait_for(lambda: len(recorder.events) == 2, what="the marker")
    assert [e[:2] for e in recorder.events] == [("ADDED", "default/a"), ("ADDED", "default/marker")]


def test_watch_closed_by_server_resumes_without_redelivery(
    kube_cluster: KubeCluster, stop: threading.Event
) -> None:
    state = kube_cluster.state
    state.create("services", "default", service("a"))
    api = kube_cluster.api_client()
    informer, recorder, _ = start_informer(ServiceListWatch(api, namespace=None), stop)
    state.create("services", "default", service("b"))
    wait_for(lambda: len(recorder.events) == 2, what="b")
    for round_ in range(3):
        wait_for(lambda: state.open_watches() == 1, what="the watch to (re)open")
        assert state.close_watches() == 1
        state.create("services", "default", service(f"after-{round_}"))
        wait_for(
            lambda n=3 + round_: len(recorder.events) == n,  # type: ignore[misc]
            what="the change after a reconnect",
        )
    keys = [e[1] for e in recorder.events]
    assert keys == [
        "default/a",
        "default/b",
        "default/after-0",
        "default/after-1",
        "default/after-2",
    ]
    assert all(not e[3] for e in recorder.events[1:])
    assert state.count("list", "services") == 1  # resumed every time, never relisted
    assert state.count("watch", "services") >= 4
    assert informer.relists == 0


def test_relist_after_410_reports_what_changed_meanwhile(
    kube_cluster: KubeCluster, stop: threading.Event
) -> None:
    state = kube_cluster.state
    state.create("services", "default", service("keep"))
    gone = state.create("services", "default", service("gone"))
    changed = state.create("services", "default", service("changed"))
    api = kube_cluster.api_client()
    lists: list[int] = []
    recorder = Recorder()
    informer = Informer(
        name="services",
        list_watch=ServiceListWatch(api, namespace=None),
        handler=recorder,
        on_list=lambda: lists.append(1),
    )
    informer.start(stop)
    assert informer.wait_for_sync(DEADLINE)
    wait_for(lambda: state.open_watches() == 1, what="the watch to open")

    # An outage: the watch breaks, the informer cannot reconnect (503), and meanwhile the
    # objects change and the history the informer would resume from is compacted away.
    state.pause()
    state.delete("services", "default", "gone")
    changed["metadata"]["labels"] = {"v": "2"}
    changed2 = state.update("services", "default", changed)
    added = state.create("services", "default", service("added"))
    state.compact()
    state.unpause()

    wait_for(lambda: informer.relists == 1 and len(recorder.events) == 6, what="the relist")
    assert sorted(recorder.events[3:]) == [
        ("ADDED", "default/added", rv(added), True),
        ("DELETED", "default/gone", rv(gone), True),
        ("MODIFIED", "default/changed", rv(changed2), True),
    ]
    assert sorted(informer.keys()) == ["default/added", "default/changed", "default/keep"]
    assert len(lists) == 2
    assert state.count("list", "services") == 2

    state.create("services", "default", service("live-again"))
    wait_for(lambda: len(recorder.events) == 7, what="a live event after the relist")
    assert recorder.events[6][:2] == ("ADDED", "default/live-again")
    assert recorder.events[6][3] is False


def test_paged_list_and_label_selector(kube_cluster: KubeCluster, stop: threading.Event) -> None:
    state = kube_cluster.state
    for i in range(7):
        state.create(
            "services", "default", service(f"s{i}", labels={"team": "a" if i % 2 else "b"})
        )
    api = kube_cluster.api_client()
    items, _ = ServiceListWatch(api, namespace="default", page_size=2).list()
    assert sorted(i["metadata"]["name"] for i in items) == [f"s{i}" for i in range(7)]
    assert state.count("list", "services") == 4  # 2 + 2 + 2 + 1

    lw = ServiceListWatch(api, namespace="default", label_selector="team=a", page_size=2)
    informer, recorder, _ = start_informer(lw, stop)
    assert sorted(informer.keys()) == ["default/s1", "default/s3", "default/s5"]
    wait_for(lambda: state.open_watches() == 1, what="the watch to open")
    state.create("services", "default", service("other", labels={"team": "b"}))
    state.create("services", "default", service("mine", labels={"team": "a"}))
    wait_for(lambda: len(recorder.events) == 4, what="the selected live event")
    assert recorder.events[3][:2] == ("ADDED", "default/mine")


def test_namespaced_informer_sees_only_its_namespace(
    kube_cluster: KubeCluster, stop: threading.Event
) -> None:
    state = kube_cluster.state
    state.create("services", "default", service("here"))
    state.create("services", "other", service("there"))
    api = kube_cluster.api_client()
    informer, recorder, _ = start_informer(ServiceListWatch(api, namespace="other"), stop)
    assert informer.keys() == ["other/there"]
    wait_for(lambda: state.open_watches() == 1, what="the watch to open")
    state.create("services", "default", service("here-2"))
    state.create("services", "other", service("there-2"))
    wait_for(lambda: len(recorder.events) == 2, what="the namespaced event")
    assert recorder.events[1][:2] == ("ADDED", "other/there-2")


@pytest.mark.parametrize("version", ["v1beta1", "v1alpha1"])
def test_service_export_informer(
    kube_cluster_factory: KubeClusterFactory, stop: threading.Event, version: str
) -> None:
    cluster = kube_cluster_factory("member-1", mcs_versions=[version])
    state = cluster.state
    state.create("serviceexports", "default", service_export("web", version=version))
    api = cluster.api_client()
    lw = ServiceExportListWatch(api, version=version, namespace=None)
    informer, recorder, _ = start_informer(lw, stop, name="serviceexports")
    cached = informer.get("default/web")
    assert cached is not None
    assert cached["kind"] == "ServiceExport"
    assert cached["apiVersion"] == f"multicluster.x-k8s.io/{version}"
    wait_for(lambda: state.open_watches() == 1, what="the watch to open")
    state.delete("serviceexports", "default", "web")
    wait_for(lambda: len(recorder.events) == 2, what="the delete")
    assert recorder.events[1][:2] == ("DELETED", "default/web")


def test_stop_interrupts_a_quiet_watch(kube_cluster: KubeCluster) -> None:
    api = kube_cluster.api_client()
    stop = threading.Event()
    # A 300 s server-side timeout: only interrupting the stream can end run() in time.
    informer = Informer(
        name="quiet",
        list_watch=ServiceListWatch(api, namespace=None),
        handler=Recorder(),
        watch_timeout_seconds=300,
    )
    thread = informer.start(stop)
    assert informer.wait_for_sync(DEADLINE)
    wait_for(lambda: kube_cluster.state.open_watches() == 1, what="the watch to open")
    stop.set()
    thread.join(DEADLINE)
    assert not thread.is_alive()


def test_bookmarks_keep_a_quiet_watch_resumable(
    kube_cluster_factory: KubeClusterFactory, stop: threading.Event
) -> None:
    # A short history and frequent bookmarks: the informer of a quiet namespace must follow
    # the bookmarks, or resuming after the busy namespace's churn would be a 410 and a relist.
    cluster = kube_cluster_factory("member-1", history=5, bookmark_interval=0.1)
    state = cluster.state
    api = cluster.api_client()
    informer, recorder, _ = start_informer(ServiceListWatch(api, namespace="quiet"), stop)
    wait_for(lambda: state.open_watches() == 1, what="the watch to open")
    for i in range(20):
        state.create("services", "busy", service(f"s{i}"))
    latest = state.resource_version
    wait_for(lambda: int(informer.resource_version or 0) >= latest, what="a bookmark")
    assert state.close_watches() == 1
    state.create("services", "quiet", service("news"))
    wait_for(lambda: len(recorder.events) == 1, what="the quiet namespace's change")
    assert recorder.events[0][:2] == ("ADDED", "quiet/news")
    assert recorder.events[0][3] is False
    assert informer.relists == 0
    assert state.count("list", "services") == 1
