"""`member.hubclient`, `member.hubfeed` and `member.duration` against a real hub process."""

from __future__ import annotations

import threading
from datetime import UTC, datetime
from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider
from prometheus_client import CollectorRegistry

from member.duration import DurationRecorder
from member.hubclient import (
    HubClient,
    HubClientConfig,
    HubConflict,
    HubNotFound,
    HubRejected,
    HubUnavailable,
)
from member.hubfeed import HubExportListWatch, HubView, record_key
from member.informer import Informer
from member.metrics import AgentMetrics
from shared.constants import ANNOTATION_LAST_OBSERVED_RESOURCE_VERSION
from shared.metrics import EXPORT_DURATION_METRIC
from shared.models import InternalServiceExport
from shared.version import __version__
from tests.member.agent_support import HubProcess, free_port, wait_for

pytestmark = pytest.mark.e2e

SINCE = datetime(2026, 1, 1, tzinfo=UTC)


def export(
    cluster: str, name: str = "web", *, port: int = 80, rv: str = "1"
) -> InternalServiceExport:
    return InternalServiceExport.model_validate(
        {
            "metadata": {"name": name, "namespace": "shop"},
            "spec": {
                "ports": [{"name": "http", "protocol": "TCP", "port": port}],
                "serviceReference": {
                    "clusterId": cluster, "namespace": "shop", "name": name,
                    "resourceVersion": rv, "exportedSince": SINCE.isoformat(),
                    "exportCreationTimestamp": SINCE.isoformat(),
                },
            },
        }
    )


def client(hub: HubProcess, cluster: str, token: str, **config: Any) -> HubClient:
    metrics = AgentMetrics(registry=CollectorRegistry())
    return HubClient(
        HubClientConfig(base_url=hub.url, cluster_id=cluster, token=token, **config),
        metrics=metrics.hub,
    )


def test_put_get_list_delete(hub_process: HubProcess) -> None:
    hub = client(hub_process, "east", hub_process.register("east"))
    with hub:
        stored = hub.put_export(export("east"))
        assert stored.metadata.resource_version
        verdict = stored.condition("Conflict")
        assert verdict is not None and verdict.status == "False"

        again = hub.put_export(export("east"))  # idempotent: no new revision
        assert again.metadata.resource_version == stored.metadata.resource_version

        read = hub.get_export("shop", "web")
        assert read is not None and read.spec.ports[0].port == 80
        assert hub.get_export("shop", "absent") is None

        hub.put_export(export("east", "api"))
        items, revision = hub.list_exports()
        assert sorted(i.metadata.name for i in items) == ["api", "web"]
        assert int(revision) >= int(stored.metadata.resource_version or 0)

        last = hub.delete_export("shop", "web")
        assert last is not None and last.metadata.name == "web"
        assert hub.delete_export("shop", "web") is None  # 404: already gone
        assert hub.get_export("shop", "web") is None


def test_list_follows_pages(hub_process: HubProcess) -> None:
    hub = client(hub_process, "east", hub_process.register("east"), page_size=2)
    with hub:
        for index in range(5):
            hub.put_export(export("east", f"svc-{index}"))
        items, _ = hub.list_exports()
        assert sorted(i.metadata.name for i in items) == [f"svc-{i}" for i in range(5)]


def test_patch_annotations_precondition(hub_process: HubProcess) -> None:
    hub = client(hub_process, "east", hub_process.register("east"))
    with hub:
        stored = hub.put_export(export("east"))
        rv = stored.metadata.resource_version
        assert rv is not None
        patched = hub.patch_annotations(
            "shop", "web", resource_version=rv, annotations={"example.com/a": "1"}
        )
        assert (patched.metadata.annotations or {}).get("example.com/a") == "1"
        with pytest.raises(HubConflict) as info:
            hub.patch_annotations("shop", "web", resource_version=rv, annotations={"x": "2"})
        assert info.value.code == 409 and info.value.message
        with pytest.raises(HubNotFound):
            hub.patch_annotations("shop", "nope", resource_version=rv, annotations={"x": "2"})


def test_rejections_carry_the_hubs_message(hub_process: HubProcess) -> None:
    hub_process.register("east")
    with client(hub_process, "east", "not-a-token") as bad:
        with pytest.raises(HubRejected) as info:
            bad.get_export("shop", "web")
        assert info.value.code == 401
    west = client(hub_process, "west", hub_process.register("west"))
    with west:
        # West's token under east's path: 403 (the client names the cluster in the path).
        foreign = HubClient(
            HubClientConfig(base_url=hub_process.url, cluster_id="east",
                            token=west.config.token)
        )
        with foreign, pytest.raises(HubRejected) as info:
            foreign.put_export(export("east"))
        assert info.value.code == 403
        # A body the contract refuses: 422 with the field named.
        wrong = export("east")  # clusterId east, sent under west's path
        with pytest.raises(HubRejected) as info:
            west.put_export(wrong.model_copy(update={}))  # path is west's, body says east
        assert info.value.code == 422
        assert "clusterId" in info.value.message


def test_token_never_in_repr() -> None:
    config = HubClientConfig(base_url="http://127.0.0.1:1", cluster_id="east", token="s3cr3t")
    assert "s3cr3t" not in repr(config)


def test_heartbeat_and_version(hub_process: HubProcess) -> None:
    with client(hub_process, "east", hub_process.register("east")) as hub:
        answer = hub.heartbeat(agent_version=__version__)
        assert answer.min_agent_version and answer.hub_version
        assert hub.version().hub_version == answer.hub_version
        hub.heartbeat(agent_version=__version__, imports=(3, 30))
    record = hub_process.request("GET", "/api/v1/clusters/east").json()
    assert (record["status"]["importedServices"], record["status"]["importedEndpoints"]) == (
        3,
        30,
    )


def test_unreachable_hub_is_unavailable_after_retries() -> None:
    port = free_port()  # nothing listens here
    config = HubClientConfig(
        base_url=f"http://127.0.0.1:{port}", cluster_id="east", token="t",
        max_attempts=3, backoff_initial=0.01, backoff_max=0.05,
    )
    with HubClient(config) as hub:
        with pytest.raises(HubUnavailable) as info:
            hub.get_export("shop", "web")
        assert "after 3 attempts" in str(info.value)


def test_calls_survive_a_hub_restart(hub_process: HubProcess) -> None:
    hub = client(hub_process, "east", hub_process.register("east"), max_attempts=2,
                 backoff_initial=0.01)
    with hub:
        hub.put_export(export("east"))
        hub_process.stop()
        with pytest.raises(HubUnavailable):
            hub.get_export("shop", "web")
        hub_process.start()
        read = hub.get_export("shop", "web")  # the same client reconnects
        assert read is not None


def test_traceparent_sent_when_a_span_is_active() -> None:
    provider = TracerProvider()
    tracer = provider.get_tracer("test")
    config = HubClientConfig(base_url="http://127.0.0.1:1", cluster_id="east", token="t")
    with HubClient(config) as hub:
        assert "traceparent" not in hub._headers()
        with tracer.start_as_current_span("reconcile"):
            header = hub._headers().get("traceparent")
    assert header is not None and header.startswith("00-")


# -- the change feed -------------------------------------------------------------------------


def test_watch_streams_changes_and_interrupts(hub_process: HubProcess) -> None:
    hub = client(hub_process, "east", hub_process.register("east"))
    with hub:
        _, revision = hub.list_exports()
        stream = hub.watch_exports(resource_version=revision, timeout_seconds=60)
        seen: list[tuple[str, str]] = []
        done = threading.Event()

        def read() -> None:
            for event in stream:
                if isinstance(event.object, InternalServiceExport):
                    seen.append((event.type, event.object.metadata.name))
            done.set()

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        hub.put_export(export("east"))
        hub.put_export(export("east", port=81, rv="2"))
        hub.delete_export("shop", "web")
        wait_for(lambda: len(seen) >= 3, what="three watch events")
        assert [t for t, _ in seen[:3]] == ["ADDED", "MODIFIED", "DELETED"]
        stream.interrupt()
        assert done.wait(10), "interrupt() did not end the stream"


def test_informer_over_the_hub_feed_and_hub_view(hub_process: HubProcess) -> None:
    hub = client(hub_process, "east", hub_process.register("east"))
    events: list[tuple[str, str, bool]] = []
    informer = Informer(
        name="hub",
        list_watch=HubExportListWatch(hub),
        handler=lambda t, old, new, relist: events.append(
            (t, record_key(new or old or {}), relist)
        ),
        key_func=record_key,
        watch_timeout_seconds=30,
    )
    view = HubView(informer)
    stop = threading.Event()
    with hub:
        first = hub.put_export(export("east", "before"))
        thread = informer.start(stop)
        try:
            assert informer.wait_for_sync(30)
            assert ("ADDED", "shop/before", True) in events
            stored = hub.put_export(export("east", "after"))
            view.remember(stored)  # our write's answer is visible at once
            assert view.get("shop/after") is not None
            wait_for(lambda: ("ADDED", "shop/after", False) in events, what="live ADDED")
            last = hub.delete_export("shop", "before")
            view.forget("shop/before", last)
            assert view.get("shop/before") is None  # even if the feed has not caught up
            wait_for(lambda: informer.get("shop/before") is None, what="DELETED from the feed")
            assert view.get("shop/before") is None
            assert first.metadata.resource_version
        finally:
            stop.set()
            thread.join(10)


# -- duration dedupe through the hub ---------------------------------------------------------


def _count(registry: CollectorRegistry) -> float:
    value = registry.get_sample_value(
        f"{EXPORT_DURATION_METRIC}_count", {"origin_cluster_id": "east"}
    )
    return value or 0.0


def test_duration_observed_once_per_service_resource_version(hub_process: HubProcess) -> None:
    metrics = AgentMetrics(registry=CollectorRegistry())
    hub = HubClient(
        HubClientConfig(base_url=hub_process.url, cluster_id="east",
                        token=hub_process.register("east")),
    )
    recorder = DurationRecorder(hub=hub, histogram=metrics.export_duration, cluster_id="east")
    with hub:
        stored = hub.put_export(export("east", rv="10"))
        after = recorder.observe_once(stored)
        assert _count(metrics.registry) == 1
        annotations = after.metadata.annotations or {}
        assert annotations[ANNOTATION_LAST_OBSERVED_RESOURCE_VERSION] == "10"

        # A retry with the stale record (an earlier answer): 409, nothing counted.
        with pytest.raises(HubConflict):
            recorder.observe_once(stored)
        assert _count(metrics.registry) == 1
        # A resync with the current record: already counted.
        assert recorder.observe_once(after) is after
        # Another recorder (a new leader, a restarted agent): still counted once.
        other = DurationRecorder(hub=hub, histogram=metrics.export_duration, cluster_id="east")
        current = hub.get_export("shop", "web")
        assert current is not None
        other.observe_once(current)
        assert _count(metrics.registry) == 1

        # A new Service resourceVersion is a new data point; the re-PUT keeps annotations.
        changed = hub.put_export(export("east", port=81, rv="11"))
        assert (changed.metadata.annotations or {}).get(
            ANNOTATION_LAST_OBSERVED_RESOURCE_VERSION
        ) == "10"
        recorder.observe_once(changed)
        assert _count(metrics.registry) == 2
        # SINCE is long ago: clamped to the right bound, which lands in +Inf only.
        assert metrics.registry.get_sample_value(
            f"{EXPORT_DURATION_METRIC}_sum", {"origin_cluster_id": "east"}
        ) == pytest.approx(200000.0)


def test_watch_from_a_compacted_revision_is_resource_expired(tmp_path: Any) -> None:
    from member.informer import ResourceExpired

    hub_process = HubProcess(directory=tmp_path, extra_args=["--history-limit", "3"])
    hub_process.start()
    try:
        hub = client(hub_process, "east", hub_process.register("east"))
        with hub:
            for port in range(80, 90):
                hub.put_export(export("east", port=port, rv=str(port)))
            with pytest.raises(ResourceExpired):
                HubExportListWatch(hub).watch(resource_version="1", timeout_seconds=5)
    finally:
        hub_process.stop()
