"""The importing agent applies cluster selection (docs/reference.md#cluster-selection):
only the active tier's endpoints are ready in the mirrored slices, a switch rewrites only
the slices whose readiness changes, the ServiceImport carries the tiers and the active
clusters, each switch is one Event and one count, and a failback waits on a timer.

The three reconcilers run against the fakes of `test_import_reconcilers` (writes applied at
once to caches), with a clock the test moves and properties it sets through the
`FleetProperties` protocol (`StaticProperties`), so the agent path is tested whatever
carries the properties in a real fleet. The selectors and policy are the hub's
ServiceImport fields, held by the import feed as it holds them.
"""

from __future__ import annotations

from typing import Any

import pytest

from member.imports.importfeed import feed_entry
from member.imports.importspec import (
    MirroredSlice,
    mirrored_slice_name,
    pack_json,
    unpack_json,
)
from member.imports.mirroredslices import MirroredSliceReconciler
from member.imports.selection import (
    ImportSelections,
    SelectionMetrics,
    StaticProperties,
    endpoint_counts,
    masked,
)
from member.imports.serviceimport import ServiceImportReconciler
from member.transform import unpacked
from shared.clusterselection import ClusterSelector
from shared.models import EndpointSliceExport, ServiceImport
from tests.member.test_import_reconcilers import KEY, World, Writer

SELECTORS = (
    ClusterSelector.model_validate(
        {"propertySelector": {"matchProperties": {"region": "@SameAsImporter@"}}}),
    ClusterSelector.model_validate(
        {"propertySelector": {"matchExpressions": [{"key": "region", "operator": "Exists"}]}}),
)
REGIONS = {"a": "eu", "b": "us", "c": "us"}


_rv = iter(range(1000, 10**6))


def hub_import(clusters: tuple[str, ...], selectors: Any = SELECTORS,
               **policy: Any) -> dict[str, Any]:
    """The feed's entry of the hub's ServiceImport demo/hello with the winner's selection."""
    spec: dict[str, Any] = {"type": "ClusterSetIP", "ports": [{"name": "http", "port": 80}]}
    if selectors is not None:
        spec["clusterSelectors"] = [
            s.model_dump(mode="json") if isinstance(s, ClusterSelector) else s for s in selectors
        ]
    if policy:
        spec["clusterSelection"] = policy
    return feed_entry(ServiceImport.model_validate({
        "metadata": {"name": "hello", "namespace": "demo", "resourceVersion": str(next(_rv))},
        "spec": spec,
        "status": {"clusters": [{"cluster": c} for c in clusters],
                   "ports": [{"name": "http", "port": 80, "clusters": list(clusters)}]},
    }))


def hub_slice(cluster: str, *ready: bool) -> dict[str, Any]:
    """`cluster`'s one source slice of demo/hello, an endpoint per `ready` flag."""
    return feed_entry(EndpointSliceExport.model_validate({
        "metadata": {"name": f"hello-{cluster}", "namespace": "demo",
                     "resourceVersion": str(next(_rv))},
        "spec": {
            "serviceName": "hello", "clusterId": cluster, "addressType": "IPv4",
            "ports": [{"name": "http", "port": 8080}],
            "endpoints": [
                {"addresses": [f"10.{ord(cluster)}.0.{i + 1}"],
                 "conditions": {"ready": r, "serving": r}}
                for i, r in enumerate(ready)
            ],
        },
    }))


WALL = 1_800_000_000.0


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class SelectingWorld(World):
    """`World` with the two reconcilers that select, and what they tell the importer."""

    def __init__(self) -> None:
        super().__init__()
        self.clock = Clock()
        self.properties = StaticProperties(
            {"region": "eu"}, {c: {"region": r} for c, r in REGIONS.items()})
        self.queued: list[str] = []
        self.wakes: list[float] = []
        self.selection_events: list[tuple[str, str, str]] = []
        self.selection_metrics = SelectionMetrics(self.metrics)
        self.selections = self.new_selections()
        common = {
            "imports": self.view, "service_imports": self.imports, "services": self.services,
            "scope": self.si._scope, "metrics": self.metrics,
            "import_metrics": self.import_metrics, "derived": self.si._derived,
            "in_the_way": self.in_the_way,
        }
        self.si = ServiceImportReconciler(
            writer=Writer(self.imports, self.calls, "ServiceImport"),  # type: ignore[arg-type]
            events=self.events,  # type: ignore[arg-type]
            foreign=self.foreign, refusals=self.refusals, slices=self.index,
            selection=self.selections, **common,  # type: ignore[arg-type]
        )
        self.eps = MirroredSliceReconciler(
            writer=Writer(self.slices, self.calls, "EndpointSlice", self.index),  # type: ignore[arg-type]
            slices=self.index, changed=self.changed, selection=self.selections,
            **common,  # type: ignore[arg-type]
        )

    def new_selections(self) -> ImportSelections:
        return ImportSelections(
            imports=self.view,
            properties=self.properties,
            metrics=self.selection_metrics,
            on_change=self.queued.append,
            wake=lambda _key, delay: self.wakes.append(delay),
            events=lambda _k, type_, reason, message: self.selection_events.append(
                (type_, reason, message)),
            clock=self.clock,
            wall=lambda: WALL + self.clock.now,
            recorded=lambda key: (self.imports.get(key) or {}).get("metadata", {}).get(
                "annotations"),
        )

    def restart(self) -> None:
        """A new agent process: its selection memory empty, the caches as the API holds."""
        self.selections = self.new_selections()
        self.si._selection = self.eps._selection = self.selections

    def readiness(self) -> dict[str, list[tuple[bool, bool]]]:
        """cluster → (ready, serving) of each endpoint of its mirrored slice."""
        found = {}
        for cluster in REGIONS:
            name = mirrored_slice_name("hello", cluster, f"hello-{cluster}")
            obj = self.slices.get(f"demo/{name}")
            if obj is not None:
                found[cluster] = [
                    (e["conditions"].get("ready", True), e["conditions"].get("serving", True))
                    for e in unpacked(obj)["endpoints"]
                ]
        return found

    def annotations(self) -> dict[str, str]:
        si = self.imports.get(KEY)
        assert si is not None
        return {k: v for k, v in si["metadata"].get("annotations", {}).items()
                if k.startswith("mcsync.io/")}

    def metric(self, name: str, **labels: str) -> float | None:
        return self.metrics.registry.get_sample_value(name, labels)


UP, DOWN = [(True, True)], [(False, False)]


@pytest.fixture
def world() -> SelectingWorld:
    w = SelectingWorld()
    w.feed(hub_import(("a", "b")))
    w.feed(hub_slice("a", True))
    w.feed(hub_slice("b", True))
    w.converge()
    return w


def test_only_the_importers_region_is_ready_and_the_serviceimport_says_so(
    world: SelectingWorld,
) -> None:
    assert world.readiness() == {"a": UP, "b": DOWN}
    assert world.annotations() == {
        "mcsync.io/cluster-selector-results": '[{"clusters":["a"]},{"clusters":["a","b"]}]',
        "mcsync.io/active-clusters": "a",
    }
    assert world.selection_events == []  # the first choice is no switch
    assert world.converge() == []


def test_failover_rewrites_only_the_slices_whose_readiness_changes(
    world: SelectingWorld,
) -> None:
    world.feed(hub_slice("a", False))
    writes = world.writes_of(world.eps.reconcile)
    # a's endpoint changed (its own write) and b's is now ready: one write each.
    assert writes == [("EndpointSlice", "update"), ("EndpointSlice", "update")]
    assert world.readiness() == {"a": DOWN, "b": UP}
    assert world.selection_events == [
        ("Warning", "ClusterSelectionFailover", "cluster selection: tier 1 (a) → tier 2 (a,b)")]
    assert world.metric("mcsync_agent_cluster_selection_switches_total",
                        direction="failover") == 1
    assert world.metric("mcsync_agent_cluster_selection_not_first_tier") == 1
    assert world.queued == [KEY]  # the ServiceImport's annotations follow
    world.si.reconcile(KEY)
    assert world.annotations()["mcsync.io/active-clusters"] == "a,b"


def test_each_evaluation_sees_the_latest_source_slices(world: SelectingWorld) -> None:
    """Evaluations in a row, each after one slice change and nothing else (no property,
    no import change): every one answers from the slices as they are now."""
    imported = world.view.get(KEY)
    assert imported is not None
    evaluate = world.selections.evaluate
    first = evaluate(KEY, imported)
    assert first is not None and first.active_clusters == ("a",)
    assert evaluate(KEY, imported) is first  # nothing changed
    world.feed(hub_slice("a", False))
    after_down = evaluate(KEY, imported)
    assert after_down is not None and after_down.active_clusters == ("a", "b")
    world.feed(hub_slice("b", False))
    world.feed(hub_slice("a", False, True, True))  # 2 of 3 ready: tier 1 qualifies again
    back = evaluate(KEY, imported)
    assert back is not None and back.state is not None and back.state.qualified_since
    world.feed(None, delete="slice:a/demo/hello-a")  # and b has none ready: no tier qualifies
    gone = evaluate(KEY, imported)
    assert gone is not None and gone.on_fallback and gone.switch == "failover"


def test_a_withdrawn_cluster_fails_over_like_a_down_one(world: SelectingWorld) -> None:
    world.feed(None, delete="slice:a/demo/hello-a")  # a is Stale: its slice withdrawn
    writes = world.writes_of(world.eps.reconcile)
    assert sorted(writes) == [("EndpointSlice", "delete"), ("EndpointSlice", "update")]
    assert world.readiness() == {"b": UP}
    assert [e[1] for e in world.selection_events] == ["ClusterSelectionFailover"]


def test_failback_waits_for_the_delay_on_a_timer(world: SelectingWorld) -> None:
    world.feed(hub_slice("a", False))
    world.eps.reconcile(KEY)
    world.clock.now += 100
    world.feed(hub_slice("a", True))
    world.eps.reconcile(KEY)
    assert world.readiness() == {"a": UP, "b": UP}  # still tier 2, which holds a too
    assert world.wakes == [30.0]  # queued again when the default 30 s wait ends
    world.clock.now += 29
    world.eps.reconcile(KEY)
    assert world.readiness() == {"a": UP, "b": UP}
    assert world.wakes[-1] == pytest.approx(1.0)
    world.clock.now += 1
    writes = world.writes_of(world.eps.reconcile)
    assert writes == [("EndpointSlice", "update")]  # only b's readiness changes
    assert world.readiness() == {"a": UP, "b": DOWN}
    assert world.selection_events[-1] == (
        "Normal", "ClusterSelectionFailback", "cluster selection: tier 2 (a,b) → tier 1 (a)")
    assert world.metric("mcsync_agent_cluster_selection_switches_total",
                        direction="failback") == 1
    assert world.metric("mcsync_agent_cluster_selection_not_first_tier") == 0


def test_fallback_none_leaves_no_endpoint_ready() -> None:
    w = SelectingWorld()
    only_eu = ({"propertySelector": {"matchProperties": {"region": "eu"}}},)
    w.feed(hub_import(("a", "b"), selectors=only_eu, fallback="None"))
    w.feed(hub_slice("a", True))
    w.feed(hub_slice("b", True))
    w.converge()
    assert w.readiness() == {"a": UP, "b": DOWN}
    w.feed(hub_slice("a", False))
    w.converge()
    assert w.readiness() == {"a": DOWN, "b": DOWN}
    assert w.annotations()["mcsync.io/active-clusters"] == ""
    assert w.metric("mcsync_agent_cluster_selection_on_fallback") == 1


def test_a_property_change_queues_the_keys_it_concerns_and_moves_the_tier(
    world: SelectingWorld,
) -> None:
    world.properties.set("b", {"region": "eu"})
    assert world.queued == [KEY]
    world.converge()
    assert world.readiness() == {"a": UP, "b": UP}  # b joined the active tier: no move
    assert world.selection_events == []
    assert world.annotations()["mcsync.io/active-clusters"] == "a,b"


def test_an_import_without_selectors_is_untouched() -> None:
    w = SelectingWorld()
    w.feed(hub_import(("a", "b"), selectors=None))
    w.feed(hub_slice("a", True))
    w.feed(hub_slice("b", True))
    w.converge()
    assert w.readiness() == {"a": UP, "b": UP}
    assert w.annotations() == {}


def test_switch_metrics_exist_from_start_at_zero() -> None:
    w = SelectingWorld()
    for direction in ("failover", "failback"):
        assert w.metric("mcsync_agent_cluster_selection_switches_total",
                        direction=direction) == 0
    assert w.metric("mcsync_agent_cluster_selection_not_first_tier") == 0
    assert w.metric("mcsync_agent_cluster_selection_on_fallback") == 0


def test_masking_keeps_terminating_and_counting_reads_ready_as_consumers_do() -> None:
    endpoints = [
        {"addresses": ["10.0.0.1"], "conditions": {"ready": True}},
        {"addresses": ["10.0.0.2"], "conditions": {}},
        {"addresses": ["10.0.0.3"], "conditions": {"ready": False}},
        {"addresses": ["10.0.0.4"], "conditions": {"ready": True, "terminating": True}},
    ]
    packed = pack_json(endpoints)
    counted = endpoint_counts(packed)
    assert (counted.ready, counted.total) == (2, 4)
    want = MirroredSlice("n", "demo", "hello", "a", "o", "u", "IPv4", (), packed)
    out = unpack_json(masked(want).endpoints)
    assert [e["conditions"] for e in out] == [
        {"ready": False, "serving": False},
        {"ready": False, "serving": False},
        {"ready": False, "serving": False},
        {"ready": False, "serving": False, "terminating": True},
    ]



def test_a_restart_mid_wait_resumes_the_failback_wait(world: SelectingWorld) -> None:
    """The wait's start is on the ServiceImport, so a restarted agent neither fails back
    at once nor waits anew: it fails back when the wait that began before it ends."""
    world.feed(hub_slice("a", False))
    world.converge()
    world.clock.now += 100
    world.feed(hub_slice("a", True))
    world.converge()
    assert world.annotations()["mcsync.io/failback-pending-since"] == (
        "1=2027-01-15T08:18:20.000Z")  # WALL + 1100 s: tier 1 qualifies since then
    world.clock.now += 10
    world.restart()
    assert world.writes_of(world.eps.reconcile) == []  # still tier 2
    assert world.readiness() == {"a": UP, "b": UP}
    assert world.wakes[-1] == pytest.approx(20.0)  # the 30 s wait less the 10 s gone
    world.clock.now += 20
    world.converge()
    assert world.readiness() == {"a": UP, "b": DOWN}
    assert world.selection_events[-1][1] == "ClusterSelectionFailback"
    assert "mcsync.io/failback-pending-since" not in world.annotations()


def test_a_restart_on_a_later_tier_damps_a_failback_it_did_not_see_begin(
    world: SelectingWorld,
) -> None:
    world.feed(hub_slice("a", False))
    world.converge()
    world.restart()  # down while a comes back
    world.clock.now += 100
    world.feed(hub_slice("a", True))
    world.converge()
    assert world.readiness() == {"a": UP, "b": UP}  # no failback at once
    assert world.wakes[-1] == pytest.approx(30.0)
