"""The export reconciler's writes, counted with fakes: which requests a reconcile makes.

A new valid ServiceExport costs exactly one Kubernetes metadata patch (finalizer and
exportedSince together), one hub PUT, one status write and one hub dedupe PATCH, in that
order; the verdict Event is queued, not waited for; a reconcile that finds everything up to
date writes nothing. The export-duration data point is taken when the verdict is reported
back, so a slow dedupe PATCH does not lengthen it (docs/reference.md#export-path).

The fakes advance one shared clock by each request's latency, so durations are exact.
"""

from __future__ import annotations

import copy
from datetime import UTC, datetime, timedelta
from typing import Any, cast

import pytest
from prometheus_client import CollectorRegistry

from member.duration import DurationRecorder
from member.export.serviceexport import (
    OUTCOME_EXPORTED,
    OUTCOME_UP_TO_DATE,
    ExportParts,
    ExportReconciler,
)
from member.heartbeat import VersionGate
from member.hubclient import HubClient
from member.hubfeed import HubView
from member.kube.events import EventRecorder
from member.kube.resources import ServiceExportClient
from member.metrics import AgentMetrics
from shared import conditions as c
from shared.constants import (
    ANNOTATION_EXPORTED_SINCE,
    ANNOTATION_EXPORTED_SPEC_HASH,
    ANNOTATION_LAST_OBSERVED_RESOURCE_VERSION,
    FINALIZER_SERVICEEXPORT_CLEANUP,
)
from shared.metrics import EXPORT_DURATION_METRIC
from shared.models import Condition, InternalServiceExport
from shared.timefmt import format_millis

CLUSTER = "member-1"
KEY = "shop/web"
T0 = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)
# Latency each fake request takes on the shared clock.
PATCH_LATENCY = timedelta(milliseconds=10)
PUT_LATENCY = timedelta(milliseconds=100)
STATUS_LATENCY = timedelta(milliseconds=10)
DEDUPE_LATENCY = timedelta(seconds=5)  # a hub that is very slow to answer the PATCH


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> datetime:
        return self.now

    def advance(self, delta: timedelta) -> None:
        self.now += delta


class Lister:
    def __init__(self) -> None:
        self.objects: dict[str, dict[str, Any]] = {}

    def get(self, key: str) -> dict[str, Any] | None:
        return self.objects.get(key)


class FakeHubView:
    def __init__(self) -> None:
        self.records: dict[str, InternalServiceExport] = {}

    def get(self, key: str) -> InternalServiceExport | None:
        return self.records.get(key)

    def remember(self, record: InternalServiceExport) -> None:
        ref = record.spec.service_reference
        self.records[f"{ref.namespace}/{ref.name}"] = record

    def forget(self, key: str, last: InternalServiceExport | None) -> None:
        self.records.pop(key, None)


class FakeHub:
    """The hub: every PUT is judged NoConflicts; the dedupe PATCH is slow."""

    def __init__(self, clock: Clock, calls: list[str]) -> None:
        self._clock = clock
        self._calls = calls
        self._revision = 0

    def put_export(self, export: InternalServiceExport) -> InternalServiceExport:
        self._calls.append("hub PUT")
        self._clock.advance(PUT_LATENCY)
        self._revision += 1
        verdict = Condition(
            type=c.CONFLICT, status=c.FALSE, reason=c.NO_CONFLICTS, message="No conflicts."
        )
        return export.model_copy(
            update={
                "metadata": export.metadata.model_copy(
                    update={"resource_version": str(self._revision), "annotations": {}}
                ),
                "status": export.status.model_copy(update={"conditions": [verdict]}),
            }
        )

    def patch_annotations(
        self,
        namespace: str,
        name: str,
        *,
        resource_version: str,
        annotations: dict[str, str | None],
    ) -> InternalServiceExport:
        raise AssertionError("the reconciler patches through the DurationRecorder")

    def get_export(self, namespace: str, name: str) -> InternalServiceExport | None:
        self._calls.append("hub GET")
        return None

    def delete_export(self, namespace: str, name: str) -> InternalServiceExport | None:
        self._calls.append("hub DELETE")
        return None


class FakeDedupe:
    """What `DurationRecorder` calls: the hub's annotation PATCH."""

    def __init__(self, clock: Clock, calls: list[str], view: FakeHubView) -> None:
        self._clock = clock
        self._calls = calls
        self._view = view

    def patch_annotations(
        self,
        namespace: str,
        name: str,
        *,
        resource_version: str,
        annotations: dict[str, str | None],
    ) -> InternalServiceExport:
        self._calls.append("hub PATCH")
        self._clock.advance(DEDUPE_LATENCY)
        record = self._view.records[f"{namespace}/{name}"]
        assert record.metadata.resource_version == resource_version
        merged = {**(record.metadata.annotations or {}), **annotations}
        return record.model_copy(
            update={
                "metadata": record.metadata.model_copy(
                    update={
                        "annotations": {k: v for k, v in merged.items() if v is not None},
                        "resource_version": str(int(resource_version) + 1),
                    }
                )
            }
        )


class FakeWriter:
    """ServiceExport writes, applied to the stored copy with a resourceVersion precondition."""

    def __init__(self, clock: Clock, calls: list[str], exports: Lister) -> None:
        self._clock = clock
        self._calls = calls
        self._exports = exports

    def _store(self, obj: dict[str, Any]) -> dict[str, Any]:
        """Store `obj` at the next resourceVersion, where the informer cache would see it."""
        obj["metadata"]["resourceVersion"] = str(int(obj["metadata"]["resourceVersion"]) + 1)
        self._exports.objects[f"{obj['metadata']['namespace']}/{obj['metadata']['name']}"] = obj
        return copy.deepcopy(obj)

    def patch_metadata(
        self,
        namespace: str,
        name: str,
        *,
        resource_version: str,
        finalizers: list[str] | None = None,
        annotations: dict[str, str | None] | None = None,
    ) -> dict[str, Any]:
        self._calls.append("kube patch metadata")
        self._clock.advance(PATCH_LATENCY)
        stored = copy.deepcopy(self._exports.objects[f"{namespace}/{name}"])
        assert stored["metadata"]["resourceVersion"] == resource_version
        if finalizers is not None:
            stored["metadata"]["finalizers"] = finalizers
        for k, v in (annotations or {}).items():
            notes = stored["metadata"].setdefault("annotations", {})
            if v is None:
                notes.pop(k, None)
            else:
                notes[k] = v
        return self._store(stored)

    def replace_status(self, obj: dict[str, Any]) -> dict[str, Any]:
        self._calls.append("kube write status")
        self._clock.advance(STATUS_LATENCY)
        stored = self._exports.objects[f"{obj['metadata']['namespace']}/{obj['metadata']['name']}"]
        assert stored["metadata"]["resourceVersion"] == obj["metadata"]["resourceVersion"]
        return self._store({**copy.deepcopy(stored), "status": copy.deepcopy(obj["status"])})


class FakeEvents:
    def __init__(self, calls: list[str]) -> None:
        self._calls = calls
        self.recorded: list[tuple[str, str]] = []

    def record(self, obj: dict[str, Any], *, type: str, reason: str, message: str) -> None:
        self._calls.append("event queued")
        self.recorded.append((type, reason))


class World:
    def __init__(self) -> None:
        self.clock = Clock()
        self.calls: list[str] = []
        self.exports = Lister()
        self.services = Lister()
        self.view = FakeHubView()
        self.events = FakeEvents(self.calls)
        self.metrics = AgentMetrics(registry=CollectorRegistry())
        self.reconciler = ExportReconciler(
            ExportParts(
                cluster_id=CLUSTER,
                service_exports=self.exports,
                services=self.services,
                gate=VersionGate(),
                deny_namespaces=frozenset({"kube-system"}),
                metrics=self.metrics,
            ),
            hub_view=cast(HubView, self.view),
            hub=cast(HubClient, FakeHub(self.clock, self.calls)),
            writer=cast(ServiceExportClient, FakeWriter(self.clock, self.calls, self.exports)),
            events=cast(EventRecorder, self.events),
            durations=DurationRecorder(
                hub=FakeDedupe(self.clock, self.calls, self.view),
                histogram=self.metrics.export_duration,
                cluster_id=CLUSTER,
                clock=self.clock,
            ),
            clock=self.clock,
        )

    def histogram(self) -> tuple[float | None, float | None]:
        labels = {"origin_cluster_id": CLUSTER}
        registry = self.metrics.registry
        return (
            registry.get_sample_value(f"{EXPORT_DURATION_METRIC}_count", labels),
            registry.get_sample_value(f"{EXPORT_DURATION_METRIC}_sum", labels),
        )


@pytest.fixture
def world() -> World:
    w = World()
    w.services.objects[KEY] = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {
            "name": "web",
            "namespace": "shop",
            "uid": "svc-uid",
            "resourceVersion": "41",
        },
        "spec": {
            "type": "ClusterIP",
            "ports": [{"name": "http", "protocol": "TCP", "port": 80}],
        },
    }
    w.exports.objects[KEY] = {
        "apiVersion": "multicluster.x-k8s.io/v1beta1",
        "kind": "ServiceExport",
        "metadata": {
            "name": "web",
            "namespace": "shop",
            "uid": "se-uid",
            "resourceVersion": "42",
            "generation": 1,
            "creationTimestamp": "2026-01-01T11:00:00Z",
        },
        "spec": {},
    }
    return w


def test_a_new_export_makes_four_writes_and_queues_one_event(world: World) -> None:
    assert world.reconciler._reconcile(KEY) == OUTCOME_EXPORTED
    assert world.calls == [
        "kube patch metadata",  # finalizer and exportedSince in one patch, before the PUT
        "hub PUT",
        "kube write status",  # from the PUT's answer: no wait for the hub's feed
        "event queued",  # not a request: the recorder's thread sends it
        "hub PATCH",  # the duration dedupe
    ]
    assert world.events.recorded == [(c.EVENT_TYPE_NORMAL, c.EVENT_NO_CONFLICT_FOUND)]
    stored = world.exports.objects[KEY]
    assert stored["metadata"]["finalizers"] == [FINALIZER_SERVICEEXPORT_CLEANUP]
    assert stored["metadata"]["annotations"][ANNOTATION_EXPORTED_SINCE] == format_millis(T0)
    conflict = [x for x in stored["status"]["conditions"] if x["type"] == c.CONFLICT]
    assert [(x["status"], x["reason"]) for x in conflict] == [(c.FALSE, c.NO_CONFLICTS)]


def test_the_duration_is_taken_when_the_verdict_is_reported(world: World) -> None:
    world.reconciler._reconcile(KEY)
    # exportedSince is stamped at T0; the verdict is stored after the patch, the PUT and the
    # status write. The 5 s dedupe PATCH that follows is not export time.
    count, total = world.histogram()
    assert count == 1
    expected = PATCH_LATENCY + PUT_LATENCY + STATUS_LATENCY
    assert total == pytest.approx(expected.total_seconds() * 1000)
    record = world.view.get(KEY)
    assert record is not None
    assert record.metadata.annotations == {ANNOTATION_LAST_OBSERVED_RESOURCE_VERSION: "41"}


def test_an_up_to_date_export_writes_nothing(world: World) -> None:
    world.reconciler._reconcile(KEY)
    # The fake writer stored each write where the informer cache would show it, and the
    # hub view holds the dedupe PATCH's answer: the next reconcile (a resync, or the watch
    # event of our own write) finds everything as it should be.
    world.calls.clear()
    assert world.reconciler._reconcile(KEY) == OUTCOME_UP_TO_DATE
    assert world.calls == []
    assert world.histogram()[0] == 1  # counted once, not again


def test_a_replace_that_wipes_our_annotations_keeps_the_stopwatch_and_puts_nothing(
    world: World,
) -> None:
    """`kubectl replace` of the ServiceExport drops the agent's annotations. The exported
    spec did not change, so the export did not restart: exportedSince is restored from the
    hub's record, not re-stamped, and the hub is not written again."""
    world.reconciler._reconcile(KEY)
    stored = world.exports.objects[KEY]
    before = dict(stored["metadata"]["annotations"])
    stored["metadata"]["annotations"] = {}  # what the replace left
    world.clock.advance(timedelta(minutes=5))
    world.calls.clear()

    world.reconciler._reconcile(KEY)

    assert "hub PUT" not in world.calls
    assert world.calls == ["kube patch metadata"]  # the annotations put back, that is all
    restored = world.exports.objects[KEY]["metadata"]["annotations"]
    assert restored[ANNOTATION_EXPORTED_SINCE] == before[ANNOTATION_EXPORTED_SINCE]
    assert restored[ANNOTATION_EXPORTED_SPEC_HASH] == before[ANNOTATION_EXPORTED_SPEC_HASH]
