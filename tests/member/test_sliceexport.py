"""The slice export reconciler against fakes: which hub writes each situation costs.

One row per outcome of docs/reference.md#import-path's source side: a new slice is one PUT, an
unchanged resourceVersion nothing, a changed one one PUT, a deleted slice one DELETE, an unexported
or invalid Service has every slice withdrawn, a 409 is retried through the queue's backoff,
a slice of a Service that is not exported and a slice mcsync manages are left alone. Then
the repair (docs/reference.md#export-path: the hub's set against the cluster's, both ways), the body
that is sent, and the metrics.
"""

from __future__ import annotations

import copy
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from member.export.sentslices import Sent, SentSlices
from member.export.serviceexport import ExportParts
from member.export.sliceexport import (
    OUTCOME_AWAITING_EXPORT,
    OUTCOME_DEFERRED,
    OUTCOME_NOT_EXPORTED,
    OUTCOME_SENT,
    OUTCOME_UNSUPPORTED,
    OUTCOME_UP_TO_DATE,
    OUTCOME_WITHDRAWN,
    SliceExportReconciler,
)
from member.export.sliceindex import SlicesByService
from member.export.slicewire import slice_export
from member.heartbeat import VersionGate
from member.hubclient import HubConflict, HubRejected, HubUnavailable
from member.metrics import AgentMetrics
from member.workqueue import WorkQueue, WorkQueueMetrics, run_workers
from shared.constants import (
    ENDPOINTSLICE_MANAGER,
    LABEL_ENDPOINTSLICE_MANAGED_BY,
    LABEL_SERVICE_NAME,
)
from shared.models import EndpointSliceExport, to_wire

CLUSTER = "member-1"
KEY = "shop/web"


def endpointslice(
    name: str,
    *,
    service: str = "web",
    rv: str = "1",
    ip: str = "10.0.0.1",
    namespace: str = "shop",
    labels: dict[str, str] | None = None,
) -> dict[str, Any]:
    """An EndpointSlice as kube-controller-manager writes it (with what is not sent)."""
    return {
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "resourceVersion": rv,
            "labels": {
                LABEL_SERVICE_NAME: service,
                LABEL_ENDPOINTSLICE_MANAGED_BY: "endpointslice-controller.k8s.io",
                **(labels or {}),
            },
            "ownerReferences": [{"kind": "Service", "name": service, "uid": "u-1"}],
        },
        "addressType": "IPv4",
        "ports": [{"name": "http", "protocol": "TCP", "port": 8080, "appProtocol": "http"}],
        "endpoints": [
            {
                "addresses": [ip],
                "conditions": {"ready": True, "serving": True, "terminating": False},
                "hostname": "web-0",
                "zone": "eu-1a",
                "nodeName": "node-7",
                "targetRef": {"kind": "Pod", "name": "web-0", "namespace": namespace},
            }
        ],
    }


class Lister:
    def __init__(self) -> None:
        self.objects: dict[str, dict[str, Any]] = {}

    def get(self, key: str) -> dict[str, Any] | None:
        return self.objects.get(key)


class FakeHub:
    """The hub's slice routes: records each call; 409 for a Service it does not export."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str, str]] = []
        self.exported: set[str] = {KEY}
        self.stored: dict[str, EndpointSliceExport] = {}
        self.reject_with: int | None = None
        self.unavailable = False

    def put_endpointslice(self, export: EndpointSliceExport) -> EndpointSliceExport:
        key = f"{export.metadata.namespace}/{export.metadata.name}"
        self.calls.append(("PUT", key, export.spec.source_resource_version or ""))
        if self.unavailable:
            raise HubUnavailable("the hub is down")
        if self.reject_with is not None:
            raise HubRejected(code=self.reject_with, reason="Invalid", message="no", route="slice")
        if f"{export.metadata.namespace}/{export.spec.service_name}" not in self.exported:
            raise HubConflict(code=409, reason="Conflict", message="not exported", route="slice")
        self.stored[key] = export
        return export

    def delete_endpointslice(self, namespace: str, name: str) -> EndpointSliceExport | None:
        key = f"{namespace}/{name}"
        self.calls.append(("DELETE", key, ""))
        return self.stored.pop(key, None)

    def list_endpointslices(
        self, each: Callable[[EndpointSliceExport], Any] | None = None
    ) -> tuple[list[Any], str]:
        items = list(self.stored.values())
        return ([each(item) for item in items] if each else items), "42"


@dataclass
class World:
    """One cluster's caches, the hub's view and the hub, around one reconciler."""

    exports: Lister = field(default_factory=Lister)
    services: Lister = field(default_factory=Lister)
    slice_cache: Lister = field(default_factory=Lister)
    hub_records: dict[str, object] = field(default_factory=dict)
    hub: FakeHub = field(default_factory=FakeHub)
    sent: SentSlices = field(default_factory=SentSlices)
    gate: VersionGate = field(default_factory=VersionGate)
    registry: CollectorRegistry = field(default_factory=CollectorRegistry)

    def __post_init__(self) -> None:
        self.index = SlicesByService(self.slice_cache)
        self.metrics = AgentMetrics(registry=self.registry)
        self.reconciler = SliceExportReconciler(
            ExportParts(
                cluster_id=CLUSTER,
                service_exports=self.exports,
                services=self.services,
                gate=self.gate,
                deny_namespaces=frozenset({"kube-system"}),
                metrics=self.metrics,
            ),
            slices=self.index,
            hub_view=self,
            hub=self.hub,
            sent=self.sent,
        )
        self.reconciler.repair()  # the agent has started: the hub holds nothing from it yet

    # the hub view (`HubView.get`)
    def get(self, key: str) -> object | None:
        return self.hub_records.get(key)

    def export(self, name: str = "web", namespace: str = "shop") -> None:
        """A valid ServiceExport with its Service, which the hub holds."""
        key = f"{namespace}/{name}"
        meta = {"name": name, "namespace": namespace, "resourceVersion": "5"}
        self.services.objects[key] = {"metadata": meta, "spec": {"type": "ClusterIP"}}
        self.exports.objects[key] = {"metadata": dict(meta), "spec": {}}
        self.hub_records[key] = object()
        self.hub.exported.add(key)

    def put_slice(self, obj: dict[str, Any]) -> None:
        key = f"{obj['metadata']['namespace']}/{obj['metadata']['name']}"
        old = self.slice_cache.objects.get(key)
        self.slice_cache.objects[key] = obj
        self.index.observe(old, obj)

    def delete_slice(self, name: str, namespace: str = "shop") -> None:
        old = self.slice_cache.objects.pop(f"{namespace}/{name}")
        self.index.observe(old, None)

    def sent_already(self, *slices: dict[str, Any]) -> None:
        """The hub holds these slices from us, and the agent knows it."""
        for obj in slices:
            export = slice_export(cluster_id=CLUSTER, obj=obj)
            self.hub.stored[f"{export.metadata.namespace}/{export.metadata.name}"] = export
        self.reconciler.repair()
        self.hub.calls.clear()

    def metric(self, name: str, labels: dict[str, str] | None = None) -> float | None:
        return self.registry.get_sample_value(name, labels or {})


def unexport(w: World) -> None:
    del w.exports.objects[KEY]
    del w.hub_records[KEY]


def delete_service(w: World) -> None:
    del w.services.objects[KEY]


def start_deleting(w: World) -> None:
    w.exports.objects[KEY]["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"


def export_not_on_hub_yet(w: World) -> None:
    w.export()
    w.hub_records.clear()


def new_slice_but_unsupported(w: World) -> None:
    w.put_slice(endpointslice("web-abc"))
    w.gate.update("99.0.0")


@dataclass
class Row:
    id: str
    before: Callable[[World], None]
    change: Callable[[World], None]
    calls: list[tuple[str, str, str]]
    outcome: str
    remembered: dict[str, str]  # slice -> resourceVersion the agent believes the hub holds


def _sent_one(w: World) -> None:
    w.export()
    w.put_slice(endpointslice("web-abc"))
    w.sent_already(endpointslice("web-abc"))


def _sent_two(w: World) -> None:
    w.export()
    w.put_slice(endpointslice("web-abc"))
    w.put_slice(endpointslice("web-def", rv="3", ip="10.0.0.2"))
    w.sent_already(endpointslice("web-abc"), endpointslice("web-def", rv="3", ip="10.0.0.2"))


ROWS = [
    Row(
        "new slice: one PUT",
        before=lambda w: w.export(),
        change=lambda w: w.put_slice(endpointslice("web-abc")),
        calls=[("PUT", "shop/web-abc", "1")],
        outcome=OUTCOME_SENT,
        remembered={"web-abc": "1"},
    ),
    Row(
        "unchanged resourceVersion: nothing",
        before=_sent_one,
        change=lambda w: None,
        calls=[],
        outcome=OUTCOME_UP_TO_DATE,
        remembered={"web-abc": "1"},
    ),
    Row(
        "changed slice: one PUT",
        before=_sent_one,
        change=lambda w: w.put_slice(endpointslice("web-abc", rv="2", ip="10.0.0.9")),
        calls=[("PUT", "shop/web-abc", "2")],
        outcome=OUTCOME_SENT,
        remembered={"web-abc": "2"},
    ),
    Row(
        "one of two slices changed: one PUT, of that one",
        before=_sent_two,
        change=lambda w: w.put_slice(endpointslice("web-def", rv="4", ip="10.0.0.3")),
        calls=[("PUT", "shop/web-def", "4")],
        outcome=OUTCOME_SENT,
        remembered={"web-abc": "1", "web-def": "4"},
    ),
    Row(
        "deleted slice: one DELETE",
        before=_sent_two,
        change=lambda w: w.delete_slice("web-abc"),
        calls=[("DELETE", "shop/web-abc", "")],
        outcome=OUTCOME_SENT,
        remembered={"web-def": "3"},
    ),
    Row(
        "unexported: every slice withdrawn",
        before=_sent_two,
        change=unexport,
        calls=[("DELETE", "shop/web-abc", ""), ("DELETE", "shop/web-def", "")],
        outcome=OUTCOME_WITHDRAWN,
        remembered={},
    ),
    Row(
        "Service deleted (Valid=False): every slice withdrawn",
        before=_sent_two,
        change=delete_service,
        calls=[("DELETE", "shop/web-abc", ""), ("DELETE", "shop/web-def", "")],
        outcome=OUTCOME_WITHDRAWN,
        remembered={},
    ),
    Row(
        "ServiceExport being deleted: every slice withdrawn",
        before=_sent_one,
        change=start_deleting,
        calls=[("DELETE", "shop/web-abc", "")],
        outcome=OUTCOME_WITHDRAWN,
        remembered={},
    ),
    Row(
        "export not on the hub yet: nothing sent (its arrival queues the key)",
        before=export_not_on_hub_yet,
        change=lambda w: w.put_slice(endpointslice("web-abc")),
        calls=[],
        outcome=OUTCOME_AWAITING_EXPORT,
        remembered={},
    ),
    Row(
        "slice of a Service that is not exported: nothing",
        before=lambda w: w.export(),
        change=lambda w: w.put_slice(endpointslice("api-xyz", service="api")),
        calls=[],
        outcome=OUTCOME_NOT_EXPORTED,
        remembered={},
    ),
    Row(
        "slice managed by mcsync (an import): ignored",
        before=lambda w: w.export(),
        change=lambda w: w.put_slice(
            endpointslice(
                "web-imported", labels={LABEL_ENDPOINTSLICE_MANAGED_BY: ENDPOINTSLICE_MANAGER}
            )
        ),
        calls=[],
        outcome=OUTCOME_UP_TO_DATE,
        remembered={},
    ),
    Row(
        "agent older than the hub's minimum: nothing",
        before=lambda w: w.export(),
        change=new_slice_but_unsupported,
        calls=[],
        outcome=OUTCOME_UNSUPPORTED,
        remembered={},
    ),
]


@pytest.mark.parametrize("row", ROWS, ids=[r.id for r in ROWS])
def test_reconcile(row: Row) -> None:
    world = World()
    row.before(world)
    row.change(world)
    key = "shop/api" if row.id.startswith("slice of a Service") else KEY

    world.reconciler.reconcile(key)

    assert world.hub.calls == row.calls
    outcome_count = world.metric(
        "mcsync_agent_reconciles_total", {"controller": "endpointslice", "outcome": row.outcome}
    )
    assert outcome_count == 1
    record = world.sent.peek(key) or {}
    assert {name: sent.resource_version for name, sent in record.items()} == row.remembered
    # A second pass over the same state writes nothing: each change costs one write.
    world.hub.calls.clear()
    world.reconciler.reconcile(key)
    assert world.hub.calls == []


def test_a_409_is_retried_with_the_queues_backoff_until_the_hub_exports_the_service() -> None:
    world = World()
    world.export()
    world.put_slice(endpointslice("web-abc"))
    world.hub.exported.clear()  # the hub has not taken the export yet: 409

    registry = CollectorRegistry()
    queue = WorkQueue(name="endpointslice", metrics=WorkQueueMetrics(registry=registry))
    stop = threading.Event()

    def process(key: str) -> None:
        world.reconciler.reconcile(key)

    workers = run_workers(queue, process=process, workers=1, stop=stop)
    try:
        queue.add(KEY)
        deadline = time.monotonic() + 10
        while len(world.hub.calls) < 3 and time.monotonic() < deadline:
            time.sleep(0.005)
        world.hub.exported.add(KEY)  # the export lands
        while "shop/web-abc" not in world.hub.stored:
            assert time.monotonic() < deadline, world.hub.calls
            time.sleep(0.005)
    finally:
        stop.set()
        queue.shutdown()
        for thread in workers:
            thread.join(5)

    puts = [call for call in world.hub.calls if call[0] == "PUT"]
    conflicts = world.metric(
        "mcsync_agent_endpointslice_export_errors_total", {"reason": "conflict"}
    )
    assert conflicts is not None and conflicts >= 3
    # Each failed PUT was one retry through the queue's per-key backoff (5 ms doubling),
    # never a tight loop: one request per retry, and the last PUT succeeded.
    retries = registry.get_sample_value("workqueue_retries_total", {"name": "endpointslice"})
    assert retries == len(puts) - 1
    assert world.sent.peek(KEY) == {"web-abc": ("1", True)}


def test_a_slice_the_hub_refuses_is_not_sent_again_until_it_changes() -> None:
    world = World()
    world.export()
    world.put_slice(endpointslice("web-abc"))
    world.hub.reject_with = 422

    world.reconciler.reconcile(KEY)
    world.reconciler.reconcile(KEY)
    assert world.hub.calls == [("PUT", "shop/web-abc", "1")]
    assert (
        world.metric("mcsync_agent_endpointslice_export_errors_total", {"reason": "rejected"}) == 1
    )

    world.hub.reject_with = None
    world.put_slice(endpointslice("web-abc", rv="2"))
    world.reconciler.reconcile(KEY)
    assert world.hub.calls[-1] == ("PUT", "shop/web-abc", "2")


def test_an_unreachable_hub_raises_and_nothing_is_remembered() -> None:
    world = World()
    world.export()
    world.put_slice(endpointslice("web-abc"))
    world.hub.unavailable = True

    with pytest.raises(HubUnavailable):
        world.reconciler.reconcile(KEY)
    assert world.sent.peek(KEY) is None
    assert (
        world.metric("mcsync_agent_endpointslice_export_errors_total", {"reason": "unavailable"})
        == 1
    )

    world.hub.unavailable = False
    world.reconciler.reconcile(KEY)
    assert world.hub.calls[-1] == ("PUT", "shop/web-abc", "1")


def test_repair_compares_the_hubs_set_with_the_clusters_both_ways() -> None:
    world = World()
    world.export()
    world.export("api")
    unchanged = endpointslice("web-abc")
    world.put_slice(unchanged)
    world.put_slice(endpointslice("web-new", rv="7", ip="10.0.0.7"))  # not on the hub
    world.put_slice(endpointslice("api-xyz", service="api", rv="9"))  # on the hub at rv 8
    # On the hub from an earlier run: two current, one whose slice went while we were down,
    # one of a Service no longer exported here.
    for obj in (
        unchanged,
        endpointslice("api-xyz", service="api", rv="8"),
        endpointslice("web-gone", rv="2"),
        endpointslice("old-1", service="old", rv="3"),
    ):
        export = slice_export(cluster_id=CLUSTER, obj=obj)
        world.hub.stored[f"shop/{export.metadata.name}"] = export

    repaired = world.reconciler.repair()
    assert repaired.live == set()
    assert repaired.bulk == {"shop/web", "shop/api", "shop/old"}
    for key in sorted(repaired.bulk):
        world.reconciler.reconcile(key)

    assert sorted(world.hub.calls) == [
        ("DELETE", "shop/old-1", ""),
        ("DELETE", "shop/web-gone", ""),
        ("PUT", "shop/api-xyz", "9"),
        ("PUT", "shop/web-new", "7"),
    ]
    assert sorted(world.hub.stored) == ["shop/api-xyz", "shop/web-abc", "shop/web-new"]
    assert world.metric("mcsync_agent_endpointslices_exported") == 3


def test_a_slice_sent_while_the_repair_lists_is_not_sent_again() -> None:
    world = World()
    world.export()
    world.put_slice(endpointslice("web-abc"))
    listing = world.hub.list_endpointslices

    def slow_list(
        each: Callable[[EndpointSliceExport], Any] | None = None,
    ) -> tuple[list[Any], str]:
        answer = listing(each)  # the hub's set, read before the live change lands
        world.reconciler.reconcile(KEY)  # a live change handled while the list is read
        return answer

    world.hub.list_endpointslices = slow_list  # type: ignore[method-assign]
    world.reconciler.repair()
    world.hub.list_endpointslices = listing  # type: ignore[method-assign]

    world.reconciler.reconcile(KEY)  # the repair queued the key: nothing left to send
    assert world.hub.calls == [("PUT", "shop/web-abc", "1")]


def test_the_hubs_record_is_live_work_only_when_a_live_change_waits_for_it() -> None:
    world = World()
    export_not_on_hub_yet(world)
    world.put_slice(endpointslice("web-abc"))
    reconciler = world.reconciler

    # A live change waits for the export: its arrival on the feed is live work, once.
    reconciler.note_live_change(KEY)
    assert reconciler.reconcile(KEY) == OUTCOME_AWAITING_EXPORT
    assert reconciler.export_arrived(KEY) is True
    assert reconciler.export_arrived(KEY) is False

    # The echo of bulk work (no live change waiting) is bulk work.
    assert reconciler.reconcile(KEY) == OUTCOME_AWAITING_EXPORT
    assert reconciler.export_arrived(KEY) is False

    # A live change that needed no record leaves no mark behind.
    world.export()
    reconciler.note_live_change(KEY)
    assert reconciler.reconcile(KEY) == OUTCOME_SENT
    assert reconciler.export_arrived(KEY) is False


def test_a_write_that_spans_the_repairs_reset_lands_in_the_memory() -> None:
    sent = SentSlices()
    record = sent.acquire(KEY, create=True)  # a worker starts reconciling shop/web
    assert record is not None
    sent.begin_repair()
    sent.reset(
        {
            KEY: {"web-old": Sent("1", True)},
            "shop/api": {"api-1": Sent("2", True)},
        }
    )
    sent.record(KEY, record, "web-abc", Sent("5", True))  # its PUT answers after the reset
    sent.drop(KEY, record, "web-old")  # and its DELETE
    sent.release(KEY, record)
    assert sent.peek(KEY) == {"web-abc": ("5", True)}
    assert sent.peek("shop/api") == {"api-1": ("2", True)}
    assert sent.on_hub() == 2


def test_a_service_the_hub_withdrew_while_the_repair_listed_stays_forgotten() -> None:
    sent = SentSlices()
    sent.begin_repair()
    sent.forget_service(KEY)  # the feed says the export went, after the list was read
    sent.reset({KEY: {"web-abc": Sent("1", True)}})
    assert sent.peek(KEY) is None


def test_a_key_before_the_first_repair_waits_for_it_then_goes_first() -> None:
    world = World()
    world.export()
    world.put_slice(endpointslice("web-abc"))
    world.sent_already(endpointslice("web-abc"))  # the old leader sent it
    world.sent.clear()  # a replica takes the lead: it knows nothing until its repair
    world.put_slice(endpointslice("web-def", rv="4"))  # a live change

    assert world.reconciler.reconcile(KEY) == OUTCOME_DEFERRED
    assert world.hub.calls == []  # web-abc is not sent again blindly

    repaired = world.reconciler.repair()
    assert repaired.live == {KEY}  # the live change, queued ahead of the bulk
    assert KEY not in repaired.bulk
    world.reconciler.reconcile(KEY)
    assert world.hub.calls == [("PUT", "shop/web-def", "4")]


def test_a_failed_repair_leaves_the_memory_as_it_was() -> None:
    world = World()
    _sent_one(world)
    world.hub.unavailable = True
    world.hub.list_endpointslices = _raise_unavailable  # type: ignore[method-assign]
    with pytest.raises(HubUnavailable):
        world.reconciler.repair()
    assert world.sent.peek(KEY) == {"web-abc": ("1", True)}


def _raise_unavailable(each: object = None) -> tuple[list[Any], str]:
    raise HubUnavailable("the hub is down")


def test_an_export_the_hub_withdrew_has_its_slices_sent_again_when_it_returns() -> None:
    world = World()
    _sent_one(world)
    # The hub withdrew the export and its slices (the feed said DELETED), then took it back.
    world.hub.stored.clear()
    world.sent.forget_service(KEY)

    world.reconciler.reconcile(KEY)
    assert world.hub.calls == [("PUT", "shop/web-abc", "1")]


def test_what_is_sent_is_the_slice_without_what_is_local_to_the_cluster() -> None:
    obj = endpointslice("web-abc", rv="11")
    obj["endpoints"].append(
        {"addresses": ["10.0.0.2"], "conditions": {"ready": False, "terminating": True}}
    )
    obj["endpoints"][0]["hints"] = {"forZones": [{"name": "eu-1a"}]}

    sent = to_wire(slice_export(cluster_id=CLUSTER, obj=copy.deepcopy(obj)))

    assert sent == {
        "apiVersion": "mcsync.io/v1alpha1",
        "kind": "EndpointSliceExport",
        "metadata": {"name": "web-abc", "namespace": "shop"},
        "spec": {
            "serviceName": "web",
            "clusterId": CLUSTER,
            "addressType": "IPv4",
            "ports": [{"name": "http", "protocol": "TCP", "port": 8080, "appProtocol": "http"}],
            "endpoints": [
                {
                    "addresses": ["10.0.0.1"],
                    "conditions": {"ready": True, "serving": True, "terminating": False},
                    "hostname": "web-0",
                    "zone": "eu-1a",
                },
                {"addresses": ["10.0.0.2"], "conditions": {"ready": False, "terminating": True}},
            ],
            "sourceResourceVersion": "11",
        },
    }


def test_a_slice_that_cannot_be_sent_is_counted_and_skipped_until_it_changes() -> None:
    world = World()
    world.export()
    bad = endpointslice("web-abc")
    bad["endpoints"][0]["addresses"] = ["10.0.0.01"]  # not canonical: the hub would refuse it
    world.put_slice(bad)

    world.reconciler.reconcile(KEY)
    world.reconciler.reconcile(KEY)

    assert world.hub.calls == []
    assert (
        world.metric("mcsync_agent_endpointslice_export_errors_total", {"reason": "invalid"}) == 1
    )


def test_the_index_follows_a_slice_to_its_service() -> None:
    cache = Lister()
    index = SlicesByService(cache)
    first = endpointslice("s-1")
    cache.objects["shop/s-1"] = first
    assert index.observe(None, first) == {"shop/web"}
    moved = endpointslice("s-1", service="api", rv="2")
    cache.objects["shop/s-1"] = moved
    assert index.observe(first, moved) == {"shop/web", "shop/api"}
    assert index.slices_of("shop/web") == []
    assert index.slices_of("shop/api") == [moved]
    del cache.objects["shop/s-1"]
    assert index.observe(moved, None) == {"shop/api"}
    assert index.keys() == set()


def test_every_slice_series_exists_from_start_at_zero() -> None:
    world = World()
    for operation in ("put", "delete"):
        assert (
            world.metric("mcsync_agent_endpointslice_writes_total", {"operation": operation}) == 0
        )
    for reason in ("conflict", "rejected", "invalid", "unavailable"):
        assert (
            world.metric("mcsync_agent_endpointslice_export_errors_total", {"reason": reason}) == 0
        )
    assert world.metric("mcsync_agent_endpointslices_exported") == 0
    assert world.metric("mcsync_agent_reconcile_errors_total", {"controller": "endpointslice"}) == 0
