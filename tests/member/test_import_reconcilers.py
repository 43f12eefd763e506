"""The three import reconcilers against fakes: one table row per decision
(docs/reference.md#import-path).

The fake cluster applies each write at once and the listers read it back, as informers
that have caught up would: so a second reconcile shows what the first left behind, and
"never rewrite an unchanged object" is a count of writes.
"""

from __future__ import annotations

import itertools
from datetime import datetime, timedelta
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from member.export.serviceexport import NotLeading
from member.imports.base import ImportScope, ManagedIndex
from member.imports.derivedservice import DerivedServiceReconciler
from member.imports.importfeed import ImportView, feed_entry, import_item_key, slice_ref
from member.imports.importmetrics import ImportMetrics
from member.imports.importowners import DerivedServices, InTheWay
from member.imports.importready import FamilyRefusals
from member.imports.importspec import derived_service_name, mirrored_slice_name
from member.imports.mirroredslices import ChangedSlices, MirroredSliceReconciler
from member.imports.serviceimport import ForeignImports, ServiceImportReconciler
from member.kube.importobjects import AlreadyExists
from member.kube.resources import NotFoundError
from member.metrics import AgentMetrics
from member.transform import transform_import_object, unpacked
from shared.constants import ANNOTATION_CHANGED_AT
from shared.models import EndpointSliceExport, ServiceImport
from shared.timefmt import format_millis, utcnow
from tests.member.informer_support import Cache

KEY = "demo/hello"
DERIVED = derived_service_name("hello")
MANAGED = {"app.kubernetes.io/managed-by": "mcsync"}


class Writer:
    """A kind's writes, applied to `cache` at once; every call logged in `calls`."""

    _rv = itertools.count(100)

    def __init__(
        self,
        cache: Cache,
        calls: list[tuple[str, str]],
        kind: str,
        index: ManagedIndex | None = None,
    ) -> None:
        self.cache, self.calls, self.kind, self.index = cache, calls, kind, index
        self.version = "v1beta1"
        self._ips = itertools.count(7)  # each Service its own ClusterIP: 10.96.0.7, .8, …
        # name -> what the API server answers a write of it with (a refusal)
        self.refuse: dict[str, Exception] = {}

    def _store(self, body: dict[str, Any], uid: str | None = None) -> dict[str, Any]:
        meta = body["metadata"]
        if meta["name"] in self.refuse:
            raise self.refuse[meta["name"]]
        key = f"{meta['namespace']}/{meta['name']}"
        old = self.cache.items.get(key)
        stored = {
            **body,
            "metadata": {
                **meta,
                "uid": uid or f"uid-{meta['name']}",
                "resourceVersion": str(next(self._rv)),
            },
        }
        if self.kind == "Service" and "clusterIP" not in stored["spec"]:
            ip = f"10.96.0.{next(self._ips)}"
            stored["spec"] = {**stored["spec"], "clusterIP": ip, "clusterIPs": [ip]}
        # The cache holds what the import informers keep (a slice's endpoints packed).
        cached = self.cache.items[key] = transform_import_object(stored)
        if self.index is not None:
            self.index.observe(old, cached)
        return stored

    def create(self, body: dict[str, Any]) -> dict[str, Any]:
        self.calls.append((self.kind, "create"))
        key = f"{body['metadata']['namespace']}/{body['metadata']['name']}"
        if key in self.cache.items:
            raise AlreadyExists(key)
        return self._store(body)

    def replace(self, body: dict[str, Any]) -> dict[str, Any]:
        self.calls.append((self.kind, "update"))
        return self._store(body, body["metadata"]["uid"])

    def replace_status(self, body: dict[str, Any]) -> dict[str, Any]:
        self.calls.append((self.kind, "status"))
        return self._store(body, body["metadata"]["uid"])

    def delete(self, namespace: str, name: str, *, uid: str | None) -> None:
        self.calls.append((self.kind, "delete"))
        old = self.cache.items.pop(f"{namespace}/{name}", None)
        if old is None:
            raise NotFoundError(name)
        if self.index is not None:
            self.index.observe(old, None)


class Events:
    def __init__(self) -> None:
        self.recorded: list[tuple[str, str]] = []
        self.about: list[tuple[str, str, str]] = []  # (kind, name, message)

    def record(self, obj: dict[str, Any], *, type: str, reason: str, message: str) -> None:
        self.recorded.append((type, reason))
        self.about.append((str(obj.get("kind")), str(obj["metadata"]["name"]), message))


_hub_rv = itertools.count(5)


def _changed(moment: datetime | None) -> dict[str, str] | None:
    return {ANNOTATION_CHANGED_AT: format_millis(moment)} if moment is not None else None


def hub_import(
    changed: datetime | None = None, served: tuple[str, ...] = ("a", "b"), **spec: Any
) -> dict[str, Any]:
    """The feed's entry of the hub's ServiceImport demo/hello, its port served by `served`."""
    return feed_entry(
        ServiceImport.model_validate(
            {
                "metadata": {
                    "name": "hello",
                    "namespace": "demo",
                    "resourceVersion": str(next(_hub_rv)),
                    "annotations": _changed(changed),
                },
                "spec": {"type": "ClusterSetIP", "ports": [{"name": "http", "port": 80}], **spec},
                "status": {
                    "clusters": [{"cluster": c} for c in served],
                    "ports": [{"name": "http", "port": 80, "clusters": list(served)}],
                },
            }
        )
    )


def hub_slice(
    name: str, address: str, cluster: str = "a", changed: datetime | None = None
) -> dict[str, Any]:
    """The feed's entry of `cluster`'s source slice `name` of demo/hello."""
    return feed_entry(
        EndpointSliceExport.model_validate(
            {
                "metadata": {
                    "name": name,
                    "namespace": "demo",
                    "resourceVersion": str(next(_hub_rv)),
                    "annotations": _changed(changed),
                },
                "spec": {
                    "serviceName": "hello",
                    "clusterId": cluster,
                    "addressType": "IPv4",
                    "ports": [{"name": "http", "port": 8080}],
                    "endpoints": [{"addresses": [address], "conditions": {"ready": True}}],
                },
            }
        )
    )


class World:
    """One cluster's caches, the hub's feed, the three reconcilers over them."""

    def __init__(self) -> None:
        self.hub = Cache()
        self.view = ImportView(self.hub)  # type: ignore[arg-type]
        self.imports, self.services, self.slices = Cache(), Cache(), Cache()
        self.others = Cache()  # the Services not labelled ours (the export side's cache)
        self.namespaces = Cache()
        self.namespaces.items["demo"] = {"metadata": {"name": "demo"}}
        self.calls: list[tuple[str, str]] = []
        self.events = Events()
        self.leading = True
        self.metrics = AgentMetrics(registry=CollectorRegistry())
        self.import_metrics = ImportMetrics(self.metrics)
        self.foreign = ForeignImports(on_change=self.import_metrics.unmanaged.set)
        self.refusals = FamilyRefusals()
        self.index = ManagedIndex(self.slices)
        self.changed = ChangedSlices()
        self.in_the_way = InTheWay(self.events)  # type: ignore[arg-type]
        scope = ImportScope(namespaces=self.namespaces, watched=(), denied=("kube-system",))
        common: dict[str, Any] = {
            "imports": self.view,
            "service_imports": self.imports,
            "services": self.services,
            "scope": scope,
            "metrics": self.metrics,
            "import_metrics": self.import_metrics,
            "may_write": lambda: self.leading,
            "derived": DerivedServices(
                managed=self.services, service_imports=self.imports, others=self.others
            ),
            "in_the_way": self.in_the_way,
        }
        self.si = ServiceImportReconciler(
            writer=Writer(self.imports, self.calls, "ServiceImport"),  # type: ignore[arg-type]
            events=self.events,  # type: ignore[arg-type]
            foreign=self.foreign,
            refusals=self.refusals,
            slices=self.index,
            **common,  # type: ignore[arg-type]
        )
        self.svc = DerivedServiceReconciler(
            writer=Writer(self.services, self.calls, "Service"),
            refusals=self.refusals,
            **common,  # type: ignore[arg-type]
        )
        self.eps = MirroredSliceReconciler(
            writer=Writer(self.slices, self.calls, "EndpointSlice", self.index),  # type: ignore[arg-type]
            slices=self.index,
            changed=self.changed,
            **common,
        )

    def feed(self, obj: dict[str, Any] | None, *, delete: str | None = None) -> None:
        """A hub feed event; the slices' reconcile is told which slice, as by the importer."""
        if obj is not None:
            key = import_item_key(obj)
            old = self.hub.items.get(key)
            self.hub.items[key] = obj
            self.view.observe(old, obj)
            self.changed.mark(KEY, slice_ref(obj))
        if delete is not None:
            old = self.hub.items.pop(delete)
            self.view.observe(old, None)
            self.changed.mark(KEY, slice_ref(old))

    def user_edits_slice(self, name: str, **fields: Any) -> None:
        """Someone else's update of a managed slice: new fields, a new resourceVersion,
        and the whole key queued (the managed-slice informer's event)."""
        key = f"demo/{name}"
        edited = {**self.slices.items[key], **fields}
        edited["metadata"] = {**edited["metadata"], "resourceVersion": str(next(Writer._rv))}
        self.slices.items[key] = transform_import_object(edited)
        self.changed.mark(KEY, None)

    def converge(self) -> list[tuple[str, str]]:
        """Run the three reconcilers in turn until nothing is written; answers the writes."""
        start = len(self.calls)
        for _ in range(5):
            before = len(self.calls)
            for reconciler in (self.si, self.svc, self.si, self.eps):
                reconciler.reconcile(KEY)
            if len(self.calls) == before:
                break
        return self.calls[start:]

    def writes_of(self, reconcile: Any) -> list[tuple[str, str]]:
        start = len(self.calls)
        reconcile(KEY)
        return self.calls[start:]


@pytest.fixture
def world() -> World:
    return World()


def test_an_import_yields_the_three_objects_then_nothing_more(world: World) -> None:
    world.feed(hub_import(ipFamilies=["IPv4"]))
    world.feed(hub_slice("hello-1", "10.0.0.1"))
    writes = world.converge()
    assert sorted(writes) == sorted(
        [
            ("ServiceImport", "create"),
            ("ServiceImport", "status"),
            ("Service", "create"),
            ("ServiceImport", "update"),  # spec.ips once the Service has its clusterIP
            ("EndpointSlice", "create"),
            ("ServiceImport", "status"),  # Ready once the slice is written
        ]
    )
    si = world.imports.get(KEY)
    assert si is not None
    assert si["spec"]["ips"] == ["10.96.0.7"]
    assert si["status"]["clusters"] == [{"cluster": "a"}, {"cluster": "b"}]
    (ready,) = si["status"]["conditions"]
    assert (ready["type"], ready["status"], ready["reason"]) == ("Ready", "True", "Ready")
    svc = world.services.get(f"demo/{DERIVED}")
    assert svc is not None
    assert svc["metadata"]["ownerReferences"][0]["uid"] == si["metadata"]["uid"]
    assert world.converge() == []  # nothing changed: nothing rewritten


def test_one_endpoint_change_costs_one_slice_write(world: World) -> None:
    world.feed(hub_import())
    world.feed(hub_slice("hello-1", "10.0.0.1"))
    world.feed(hub_slice("hello-2", "10.0.0.2", cluster="b"))
    world.converge()
    world.feed(hub_slice("hello-1", "10.0.0.9"))
    assert world.writes_of(world.eps.reconcile) == [("EndpointSlice", "update")]
    mirrored = world.slices.get(f"demo/{mirrored_slice_name('hello', 'a', 'hello-1')}")
    assert mirrored is not None
    assert unpacked(mirrored)["endpoints"][0]["addresses"] == ["10.0.0.9"]


def _stale_slice(world: World) -> str:
    """A managed slice no source wants (its source went while the agent was down)."""
    name = mirrored_slice_name("hello", "gone", "hello-1")
    body = {**world.slices.items[f"demo/{mirrored_slice_name('hello', 'a', 'hello-1')}"]}
    body["metadata"] = {**body["metadata"], "name": name, "resourceVersion": "1"}
    world.slices.items[f"demo/{name}"] = body
    world.index.observe(None, body)
    return name


M1 = mirrored_slice_name("hello", "a", "hello-1")
M2 = mirrored_slice_name("hello", "b", "hello-2")
M3 = mirrored_slice_name("hello", "b", "hello-3")


@pytest.mark.parametrize(
    ("change", "expected", "present", "absent"),
    [
        pytest.param(
            lambda w: w.feed(hub_slice("hello-1", "10.0.0.1")),
            [],
            [M1, M2],
            [],
            id="source slice unchanged (new revision): no write",
        ),
        pytest.param(
            lambda w: w.feed(hub_slice("hello-1", "10.0.0.9")),
            ["update"],
            [M1, M2],
            [],
            id="endpoint moved: one update",
        ),
        pytest.param(
            lambda w: w.feed(hub_slice("hello-3", "10.0.0.3", cluster="b")),
            ["create"],
            [M1, M2, M3],
            [],
            id="new source slice: create",
        ),
        pytest.param(
            lambda w: w.feed(None, delete="slice:b/demo/hello-2"),
            ["delete"],
            [M1],
            [M2],
            id="source slice gone: delete",
        ),
        pytest.param(
            lambda w: w.user_edits_slice(M2, endpoints=[]),
            ["update"],
            [M1, M2],
            [],
            id="user-edited managed slice: repaired",
        ),
        pytest.param(
            lambda w: (_stale_slice(w), w.changed.mark(KEY, None)),
            ["delete"],
            [M1, M2],
            [mirrored_slice_name("hello", "gone", "hello-1")],
            id="key-level relist: stale slice deleted",
        ),
        pytest.param(
            lambda w: (_stale_slice(w), w.feed(hub_slice("hello-1", "10.0.0.9"))),
            ["update"],
            [M1, M2, mirrored_slice_name("hello", "gone", "hello-1")],
            [],
            id="slice change: that slice alone, the stale one left to a relist",
        ),
        pytest.param(
            lambda w: w.feed(hub_import(served=("a",))),
            ["delete"],
            [M1],
            [M2],
            id="import no longer served by b: b's slice deleted",
        ),
    ],
)
def test_mirrored_slices_one_row_per_outcome(
    world: World, change: Any, expected: list[str], present: list[str], absent: list[str]
) -> None:
    world.feed(hub_import())
    world.feed(hub_slice("hello-1", "10.0.0.1"))
    world.feed(hub_slice("hello-2", "10.0.0.2", cluster="b"))
    world.converge()
    change(world)
    assert world.writes_of(world.eps.reconcile) == [("EndpointSlice", op) for op in expected]
    for name in present:
        assert f"demo/{name}" in world.slices.items, name
    for name in absent:
        assert f"demo/{name}" not in world.slices.items, name
    if expected == ["update"]:  # what was written is the source's state again
        mirrored = {n.rsplit("/", 1)[1]: unpacked(o) for n, o in world.slices.items.items()}
        assert mirrored[M1]["endpoints"][0]["addresses"] in (["10.0.0.1"], ["10.0.0.9"])
        assert mirrored[M2]["endpoints"][0]["addresses"] == ["10.0.0.2"]
    world.changed.mark(KEY, None)  # a relist then finds only a stale slice left to delete
    stale = f"demo/{mirrored_slice_name('hello', 'gone', 'hello-1')}" in world.slices.items
    assert world.writes_of(world.eps.reconcile) == [("EndpointSlice", "delete")] * stale


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        pytest.param("slice", [("EndpointSlice", "delete")], id="a source slice goes"),
        pytest.param(
            "import",
            [("EndpointSlice", "delete")] * 2
            + [("Service", "delete"), ("ServiceImport", "delete")],
            id="the last export goes: all three, explicitly",
        ),
    ],
)
def test_withdrawals_delete_explicitly(
    world: World, change: str, expected: list[tuple[str, str]]
) -> None:
    world.feed(hub_import())
    world.feed(hub_slice("hello-1", "10.0.0.1"))
    world.feed(hub_slice("hello-2", "10.0.0.2"))
    world.converge()
    if change == "slice":
        world.feed(None, delete=import_item_key(hub_slice("hello-2", "10.0.0.2")))
    else:
        for name in ("hello-1", "hello-2"):
            world.feed(None, delete=import_item_key(hub_slice(name, "10.0.0.1")))
        world.feed(None, delete=KEY)
    writes = world.writes_of(world.eps.reconcile)
    writes += world.writes_of(world.svc.reconcile) + world.writes_of(world.si.reconcile)
    assert sorted(writes) == sorted(expected)


def test_a_foreign_service_import_is_left_alone_with_a_warning(world: World) -> None:
    world.imports.items[KEY] = {
        "apiVersion": "multicluster.x-k8s.io/v1beta1",
        "kind": "ServiceImport",
        "metadata": {"name": "hello", "namespace": "demo", "uid": "theirs"},
        "spec": {"type": "Headless"},
    }
    world.feed(hub_import())
    world.feed(hub_slice("hello-1", "10.0.0.1"))
    assert world.converge() == []
    assert world.events.recorded == [("Warning", "ServiceImportNotManaged")]
    assert world.import_metrics.unmanaged._value.get() == 1
    world.converge()
    assert len(world.events.recorded) == 1  # one Event, not one per reconcile
    del world.imports.items[KEY]  # its owner deletes it: the key is ours again
    assert ("ServiceImport", "create") in world.converge()
    assert world.import_metrics.unmanaged._value.get() == 0


@pytest.mark.parametrize(
    "namespace_state",
    ["missing", "terminating", "denied"],
    ids=["namespace missing", "namespace being deleted", "namespace denied"],
)
def test_nothing_is_written_out_of_scope(world: World, namespace_state: str) -> None:
    if namespace_state == "missing":
        del world.namespaces.items["demo"]
    elif namespace_state == "terminating":
        world.namespaces.items["demo"] = {
            "metadata": {"name": "demo", "deletionTimestamp": "2026-11-24T09:00:00Z"},
            "status": {"phase": "Terminating"},
        }
    else:
        world.si._scope = world.svc._scope = world.eps._scope = ImportScope(
            namespaces=world.namespaces, watched=(), denied=("demo",)
        )
    world.feed(hub_import())
    assert world.converge() == []


def test_a_namespace_created_later_receives_its_imports(world: World) -> None:
    del world.namespaces.items["demo"]
    world.feed(hub_import())
    assert world.converge() == []
    world.namespaces.items["demo"] = {"metadata": {"name": "demo"}}
    assert ("ServiceImport", "create") in world.converge()


def test_a_users_edit_is_repaired(world: World) -> None:
    world.feed(hub_import(sessionAffinity="ClientIP"))
    world.converge()
    svc = world.services.items[f"demo/{DERIVED}"]
    svc["spec"]["sessionAffinity"] = "None"
    assert world.writes_of(world.svc.reconcile) == [("Service", "update")]
    assert world.services.items[f"demo/{DERIVED}"]["spec"]["sessionAffinity"] == "ClientIP"
    assert world.services.items[f"demo/{DERIVED}"]["spec"]["clusterIP"] == "10.96.0.7"


def test_headless_to_clusterset_ip_recreates_the_service(world: World) -> None:
    world.feed(hub_import(type="Headless"))
    world.converge()
    world.feed(hub_import())
    assert world.writes_of(world.svc.reconcile) == [("Service", "delete"), ("Service", "create")]


def test_a_standby_writes_nothing(world: World) -> None:
    world.leading = False
    world.feed(hub_import())
    with pytest.raises(NotLeading):
        world.si.reconcile(KEY)
    assert world.calls == []


def test_derived_service_and_slices_wait_for_their_owner(world: World) -> None:
    world.feed(hub_import())
    world.feed(hub_slice("hello-1", "10.0.0.1"))
    assert world.writes_of(world.svc.reconcile) == []
    assert world.writes_of(world.eps.reconcile) == []


def _lag(world: World, kind: str) -> tuple[float, float]:
    registry = world.metrics.registry
    labels = {"kind": kind}
    count = registry.get_sample_value("mcsync_agent_import_lag_milliseconds_count", labels)
    total = registry.get_sample_value("mcsync_agent_import_lag_milliseconds_sum", labels)
    assert count is not None and total is not None  # present at 0 from start
    return count, total


def test_the_import_lag_is_counted_once_per_hub_change(world: World) -> None:
    """docs/reference.md#observability: from the hub's commit of a change (the event's
    `mcsync.io/changed-at`) to this cluster's objects written for it; once per change and kind,
    never for a repair."""
    assert _lag(world, "EndpointSlice") == (0.0, 0.0)
    committed = utcnow() - timedelta(milliseconds=250)
    world.feed(hub_import(committed))
    world.feed(hub_slice("hello-1", "10.0.0.1", changed=committed))
    world.converge()
    for kind in ("ServiceImport", "Service", "EndpointSlice"):
        count, total = _lag(world, kind)
        assert count == 1, kind
        assert 250 <= total < 60_000, kind
    # A user's edit repaired: the hub's change was counted already.
    world.user_edits_slice(mirrored_slice_name("hello", "a", "hello-1"), endpoints=[])
    assert world.writes_of(world.eps.reconcile) == [("EndpointSlice", "update")]
    assert _lag(world, "EndpointSlice")[0] == 1
    # A new endpoint change on the hub: one more data point for the slice.
    world.feed(hub_slice("hello-1", "10.0.0.2", changed=utcnow()))
    assert world.writes_of(world.eps.reconcile) == [("EndpointSlice", "update")]
    assert _lag(world, "EndpointSlice")[0] == 2


def test_listed_objects_carry_no_change_time_and_count_no_lag(world: World) -> None:
    world.feed(hub_import())
    world.feed(hub_slice("hello-1", "10.0.0.1"))
    world.converge()
    assert _lag(world, "EndpointSlice") == (0.0, 0.0)
