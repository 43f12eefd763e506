"""Watch through the official client: replay, live events, resume, 410, bookmarks."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from kubernetes import watch
from kubernetes.client.exceptions import ApiException

from shared.constants import MCS_GROUP
from tests.kube.fixtures import KubeCluster
from tests.kube.support import (
    BackgroundWatch,
    core_api,
    custom_api,
    service,
    service_export,
    wait_for,
)

NS = "team-a"
SE = (MCS_GROUP, "v1beta1", NS, "serviceexports")


def _summary(event: dict[str, Any]) -> tuple[str, str, int]:
    raw = event["raw_object"]
    return event["type"], raw["metadata"].get("name", ""), int(
        raw["metadata"]["resourceVersion"])


def test_watch_from_list_rv_sees_exactly_later_events_in_order(
    kube_cluster: KubeCluster, watches: list[BackgroundWatch],
) -> None:
    core = core_api(kube_cluster)
    core.create_namespaced_service(NS, service("before"))
    listed = core.list_namespaced_service(NS)
    # Changes made after the list but before the watch starts must still be seen.
    a = core.create_namespaced_service(NS, service("a"))
    core.patch_namespaced_service("a", NS, {"metadata": {"labels": {"x": "1"}}})
    w = BackgroundWatch(core.list_namespaced_service, NS,
                        resource_version=listed.metadata.resource_version)
    watches.append(w)
    core.delete_namespaced_service("a", NS)
    core.create_namespaced_service("elsewhere", service("b"))  # other namespace: unseen
    core.create_namespaced_service(NS, service("c"))
    got = [_summary(e) for e in w.take(4)]
    assert [(t, n) for t, n, _ in got] == [
        ("ADDED", "a"), ("MODIFIED", "a"), ("DELETED", "a"), ("ADDED", "c")]
    rvs = [rv for _, _, rv in got]
    assert rvs == sorted(rvs) and rvs[0] == int(a.metadata.resource_version)
    assert w.events.empty()


def test_watch_without_rv_starts_with_synthetic_added(
    kube_cluster: KubeCluster, watches: list[BackgroundWatch],
) -> None:
    custom = custom_api(kube_cluster)
    custom.create_namespaced_custom_object(*SE, service_export("one"))
    custom.create_namespaced_custom_object(*SE, service_export("two"))
    w = BackgroundWatch(custom.list_namespaced_custom_object, *SE)
    watches.append(w)
    first = w.take(2)
    assert sorted((e["type"], e["object"]["metadata"]["name"]) for e in first) == [
        ("ADDED", "one"), ("ADDED", "two")]
    custom.patch_namespaced_custom_object_status(*SE, "one", {"status": {"conditions": []}})
    event = w.next()
    assert event["type"] == "MODIFIED"
    assert event["object"]["apiVersion"] == f"{MCS_GROUP}/v1beta1"


def test_finalizer_deletion_events(
    kube_cluster: KubeCluster, watches: list[BackgroundWatch],
) -> None:
    custom = custom_api(kube_cluster)
    created = custom.create_namespaced_custom_object(
        *SE, service_export("web", finalizers=["a.io/x"]))
    w = BackgroundWatch(custom.list_namespaced_custom_object, *SE,
                        resource_version=created["metadata"]["resourceVersion"])
    watches.append(w)
    custom.delete_namespaced_custom_object(*SE, "web")
    marked = w.next()
    assert marked["type"] == "MODIFIED"
    assert marked["object"]["metadata"]["deletionTimestamp"]
    custom.patch_namespaced_custom_object(*SE, "web", {"metadata": {"finalizers": []}})
    gone = w.next()
    assert gone["type"] == "DELETED" and gone["object"]["metadata"]["name"] == "web"


def test_watch_resumes_after_server_closes_streams(
    kube_cluster: KubeCluster, watches: list[BackgroundWatch],
) -> None:
    core = core_api(kube_cluster)
    start = core.list_namespaced_service(NS).metadata.resource_version
    # No timeout_seconds: the client's Watch resumes from the last rv when the stream ends.
    w = BackgroundWatch(core.list_namespaced_service, NS, resource_version=start)
    watches.append(w)
    core.create_namespaced_service(NS, service("a"))
    assert _summary(w.next())[:2] == ("ADDED", "a")
    wait_for(lambda: kube_cluster.state.open_watches() == 1, what="one open watch")
    assert kube_cluster.state.close_watches() == 1
    core.create_namespaced_service(NS, service("b"))  # while no stream is open, maybe
    assert _summary(w.next())[:2] == ("ADDED", "b")
    core.create_namespaced_service(NS, service("c"))
    assert _summary(w.next())[:2] == ("ADDED", "c")
    assert kube_cluster.state.count("watch", "services") >= 2


def test_watch_from_compacted_rv_raises_410(kube_cluster: KubeCluster) -> None:
    core = core_api(kube_cluster)
    old = core.create_namespaced_service(NS, service("a")).metadata.resource_version
    core.create_namespaced_service(NS, service("b"))
    kube_cluster.state.compact()
    with pytest.raises(ApiException) as info:
        # timeout_seconds disables the client's one automatic retry after a 410.
        for _ in watch.Watch().stream(core.list_namespaced_service, NS,
                                      resource_version=old, timeout_seconds=5):
            pass
    assert info.value.status == 410
    assert "too old resource version" in str(info.value.reason)
    # A fresh list gives a resourceVersion that can be watched again.
    fresh = core.list_namespaced_service(NS).metadata.resource_version
    events = list(watch.Watch().stream(core.list_namespaced_service, NS,
                                       resource_version=fresh, timeout_seconds=1))
    assert events == []


def test_bounded_history_expires_old_resource_versions(
    kube_cluster_factory: Callable[..., KubeCluster],
) -> None:
    cluster = kube_cluster_factory("small", history=3)
    core = core_api(cluster)
    first = core.create_namespaced_service(NS, service("s0")).metadata.resource_version
    for i in range(1, 5):
        core.create_namespaced_service(NS, service(f"s{i}"))
    with pytest.raises(ApiException) as info:
        for _ in watch.Watch().stream(core.list_namespaced_service, NS,
                                      resource_version=first, timeout_seconds=5):
            pass
    assert info.value.status == 410
    recent = int(first) + 2  # still within the last three events
    events = [e["raw_object"]["metadata"]["name"] for e in watch.Watch().stream(
        core.list_namespaced_service, NS, resource_version=str(recent), timeout_seconds=1)]
    assert events == ["s3", "s4"]


def test_watch_selectors_and_transitions(
    kube_cluster: KubeCluster, watches: list[BackgroundWatch],
) -> None:
    core = core_api(kube_cluster)
    start = core.list_service_for_all_namespaces().metadata.resource_version
    w = BackgroundWatch(core.list_service_for_all_namespaces, resource_version=start,
                        label_selector="app in (web,api),tier!=db")
    watches.append(w)
    n = BackgroundWatch(core.list_service_for_all_namespaces, resource_version=start,
                        field_selector="metadata.name=named")
    watches.append(n)
    core.create_namespaced_service(NS, service("no-label"))
    core.create_namespaced_service("other", service("web", labels={"app": "web"}))
    core.create_namespaced_service(NS, service("db", labels={"app": "web", "tier": "db"}))
    core.create_namespaced_service(NS, service("named"))
    # Label change moves an object out of the selection: the watcher sees DELETED.
    core.patch_namespaced_service("web", "other", {"metadata": {"labels": {"app": "x"}}})
    # ...and into it: ADDED.
    core.patch_namespaced_service("db", NS, {"metadata": {"labels": {"tier": None}}})
    got = [(e["type"], e["raw_object"]["metadata"]["name"]) for e in w.take(3)]
    assert got == [("ADDED", "web"), ("DELETED", "web"), ("ADDED", "db")]
    assert [(e["type"], e["raw_object"]["metadata"]["name"]) for e in n.take(1)] == [
        ("ADDED", "named")]


def test_watch_timeout_and_bookmarks(kube_cluster_factory: Callable[..., KubeCluster]) -> None:
    cluster = kube_cluster_factory("bookmarks", bookmark_interval=0.2)
    core = core_api(cluster)
    created = core.create_namespaced_service(NS, service("a"))
    events = list(watch.Watch().stream(
        core.list_namespaced_service, NS, resource_version=created.metadata.resource_version,
        allow_watch_bookmarks=True, timeout_seconds=1))
    assert events, "expected at least one bookmark within the timeout"
    assert {e["type"] for e in events} == {"BOOKMARK"}
    raw = events[0]["raw_object"]
    assert raw["kind"] == "Service" and raw["apiVersion"] == "v1"
    assert raw["metadata"] == {"resourceVersion": created.metadata.resource_version}


def test_cluster_wide_custom_watch_and_list(kube_cluster: KubeCluster) -> None:
    custom = custom_api(kube_cluster)
    custom.create_namespaced_custom_object(*SE, service_export("a"))
    custom.create_namespaced_custom_object(MCS_GROUP, "v1beta1", "team-b", "serviceexports",
                                           service_export("b"))
    listed = custom.list_cluster_custom_object(MCS_GROUP, "v1alpha1", "serviceexports")
    assert [(i["metadata"]["namespace"], i["apiVersion"]) for i in listed["items"]] == [
        ("team-a", f"{MCS_GROUP}/v1alpha1"), ("team-b", f"{MCS_GROUP}/v1alpha1")]
    events = list(watch.Watch().stream(custom.list_cluster_custom_object, MCS_GROUP, "v1beta1",
                                       "serviceexports", timeout_seconds=1))
    assert sorted(e["object"]["metadata"]["name"] for e in events) == ["a", "b"]


def test_client_stopping_a_watch_releases_it(
    kube_cluster: KubeCluster, watches: list[BackgroundWatch],
) -> None:
    core = core_api(kube_cluster)
    w = BackgroundWatch(core.list_namespaced_service, NS, field_selector="metadata.name=a")
    watches.append(w)
    core.create_namespaced_service(NS, service("b"))
    core.create_namespaced_service(NS, service("a"))
    assert _summary(w.next())[:2] == ("ADDED", "a")
    w.stop()
    wait_for(lambda: kube_cluster.state.open_watches() == 0, what="the watch to be released")


def test_in_process_writes_reach_open_watches(
    kube_cluster: KubeCluster, watches: list[BackgroundWatch],
) -> None:
    state = kube_cluster.state
    core = core_api(kube_cluster)
    w = BackgroundWatch(core.list_namespaced_service, NS,
                        resource_version=str(state.resource_version))
    watches.append(w)
    wait_for(lambda: state.open_watches() == 1, what="the watch to open")
    created = state.create("services", NS, service("seeded"))  # from the test thread
    assert _summary(w.next()) == ("ADDED", "seeded", int(created["metadata"]["resourceVersion"]))
    created["metadata"]["labels"] = {"a": "b"}
    state.update("services", NS, created)
    state.delete("services", NS, "seeded")
    assert [e["type"] for e in w.take(2)] == ["MODIFIED", "DELETED"]
