"""The importing agent's cluster selection (docs/reference.md#cluster-selection).

Each importing cluster decides for itself which exporting clusters' endpoints it uses: the
pure core (`shared.clusterselection.select`) answers from the import's selectors and
policy, every cluster's properties (`member.clusterproperties.FleetProperties`), the ready
and total endpoints each cluster's mirrored slices would hold, and what it answered last
time. This module feeds it and acts on its answers:

* `ImportSelections.evaluate(key, imported)` — one evaluation, remembered per key. The
  failback wait lives in that memory and, while a failback waits, in the ServiceImport's
  `mcsync.io/failback-pending-since` annotation: a restarted agent resumes each import from its
  ServiceImport's annotations (`shared.clusterselection.resumed_state`), so a restart never fails
  back at once past the damping. Both the mirrored-slice and the ServiceImport reconcilers call it:
  the first to see a switch records it (one Event on the ServiceImport, one count of
  `mcsync_agent_cluster_selection_switches_total`), and any change of the outcome queues the key's
  other reconciler, so slices and annotations follow each other.
* a failback wait ends → the key is queued again at that moment (`wake`, the work queue's
  add-after): no polling.
* a cluster's properties change → every selecting key that cluster exports (every
  selecting key, when it is this cluster's own) is queued (`on_properties_changed`).
* `masked(slice)` — a mirrored slice of a cluster outside the active set: every endpoint
  `ready: false, serving: false`, so kube-proxy, Cilium or any consumer routes by the
  active tier; the slice stays (its addresses are still known, and a switch back is one
  write, not a create).

Inputs are read defensively from the hub's import (`cluster_selectors`,
`cluster_selection`): as models, dicts or JSON text, and absent on a hub that does not send
them, in which case nothing changes (every exporting cluster's endpoints are used).
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from prometheus_client import Counter, Gauge

from member.clusterproperties import FleetProperties
from member.imports.importfeed import ImportView
from member.imports.importspec import (
    HeldImport,
    MirroredSlice,
    SourceSlice,
    pack_json,
    served_ports,
)
from member.imports.importspec import unpack_json as _unpack
from member.metrics import AgentMetrics
from shared.clusterselection import (
    ANNOTATION_ACTIVE_CLUSTERS,
    ANNOTATION_CLUSTER_SELECTOR_RESULTS,
    ANNOTATION_FAILBACK_PENDING_SINCE,
    DEFAULT_POLICY,
    ClusterSelectionPolicy,
    ClusterSelector,
    EndpointCounts,
    Selection,
    SelectionState,
    endpoint_is_ready,
    pending_since_text,
    resumed_state,
    select,
    tiers_of,
)

__all__ = [
    "DIRECTIONS",
    "REASON_FAILBACK",
    "REASON_FAILOVER",
    "ImportSelections",
    "SelectionMetrics",
    "StaticProperties",
    "endpoint_counts",
    "masked",
    "result_annotations",
    "selection_inputs",
]

logger = logging.getLogger(__name__)

DIRECTIONS = ("failover", "failback")
REASON_FAILOVER = "ClusterSelectionFailover"
REASON_FAILBACK = "ClusterSelectionFailback"

Inputs = tuple[tuple[ClusterSelector, ...], ClusterSelectionPolicy]
_warned: set[tuple[str, str]] = set()


# --- reading the import's selectors and policy -------------------------------------------------


# By the held import's canonical JSON (bytes, or text): equal values share one parse, and
# every evaluation of a key after the first is a dictionary hit.
@lru_cache(maxsize=4096)
def _parse_selectors(text: str | bytes) -> tuple[ClusterSelector, ...]:
    return tuple(ClusterSelector.model_validate(item) for item in json.loads(text))


@lru_cache(maxsize=4096)
def _parse_policy(text: str | bytes) -> ClusterSelectionPolicy:
    return ClusterSelectionPolicy.model_validate(json.loads(text))


def _selectors(value: Any) -> tuple[ClusterSelector, ...]:
    if isinstance(value, tuple) and (not value or isinstance(value[0], ClusterSelector)):
        return value  # already models (the held import's own form)
    if isinstance(value, bytes | str):
        return _parse_selectors(value)
    return tuple(
        item if isinstance(item, ClusterSelector) else ClusterSelector.model_validate(item)
        for item in value
    )


def _policy(value: Any) -> ClusterSelectionPolicy:
    if value is None:
        return DEFAULT_POLICY
    if isinstance(value, ClusterSelectionPolicy):
        return value
    if isinstance(value, bytes | str):
        return _parse_policy(value)
    return ClusterSelectionPolicy.model_validate(value)


def selection_inputs(imported: object) -> Inputs | None:
    """The import's selectors and policy; None when it has no selectors (or a value this
    agent cannot read, which is logged: the hub validated it, so that is a version skew,
    and using every cluster is the behaviour without selectors)."""
    raw = getattr(imported, "cluster_selectors", None)
    if raw is None and hasattr(imported, "spec"):
        raw = getattr(imported.spec, "cluster_selectors", None)  # a wire ServiceImport
    if not raw:
        return None
    policy_raw = getattr(imported, "cluster_selection", None)
    if policy_raw is None and hasattr(imported, "spec"):
        policy_raw = getattr(imported.spec, "cluster_selection", None)
    try:
        return _selectors(raw), _policy(policy_raw)
    except ValueError as error:
        name = getattr(imported, "name", "?")
        if (name, str(error)) not in _warned:  # once per import and problem, not per reconcile
            if len(_warned) > 1024:
                _warned.clear()
            _warned.add((name, str(error)))
            logger.warning("cluster selection of %s not readable, every cluster used: %s",
                           name, error)
        return None


# --- endpoints ---------------------------------------------------------------------------------


@lru_cache(maxsize=65536)
def endpoint_counts(packed: bytes) -> EndpointCounts:
    """Ready and total endpoints of one slice's packed endpoints. Ready as consumers read
    it: `ready` not false (absent is ready, as Kubernetes documents) and not terminating.
    Cached by the bytes, which the import feed keeps per source slice."""
    ready = total = 0
    for endpoint in _unpack(packed):
        total += 1
        if endpoint_is_ready(endpoint.get("conditions")):
            ready += 1
    return EndpointCounts(ready, total)


@lru_cache(maxsize=65536)
def _masked_endpoints(packed: bytes) -> bytes:
    endpoints = _unpack(packed)
    for endpoint in endpoints:
        conditions = endpoint.setdefault("conditions", {})
        conditions["ready"] = False
        conditions["serving"] = False
    return pack_json(endpoints)


def masked(want: MirroredSlice) -> MirroredSlice:
    """`want` with every endpoint `ready: false, serving: false` (terminating kept)."""
    return want._replace(endpoints=_masked_endpoints(want.endpoints))


def result_annotations(selection: Selection, pending: str | None = None) -> dict[str, str]:
    """The annotations the importing cluster's ServiceImport carries: the KEP's
    `clusterSelectorResults` (a list of `{"clusters": [...]}`, one per selector), the
    active clusters, comma-separated, and while a failback waits, since when
    (`pending`, `shared.clusterselection.pending_since_text`)."""
    results = [{"clusters": list(tier)} for tier in selection.tiers]
    answer = {
        ANNOTATION_CLUSTER_SELECTOR_RESULTS: json.dumps(results, separators=(",", ":")),
        ANNOTATION_ACTIVE_CLUSTERS: ",".join(selection.active_clusters),
    }
    if pending is not None:
        answer[ANNOTATION_FAILBACK_PENDING_SINCE] = pending
    return answer


# --- properties for tests and for an agent without them ------------------------------------------


class StaticProperties:
    """An in-memory `FleetProperties` that is told its values (tests, and the agent when no
    property source is wired: no properties at all)."""

    def __init__(
        self, own: Mapping[str, str] | None = None,
        others: Mapping[str, Mapping[str, str]] | None = None,
    ) -> None:
        self._own = dict(own or {})
        self._others = {c: dict(v) for c, v in (others or {}).items()}
        self._subscribers: list[Callable[[frozenset[str]], None]] = []

    def own(self) -> Mapping[str, str]:
        return self._own

    def of(self, cluster: str) -> Mapping[str, str] | None:
        return self._others.get(cluster)

    def subscribe(self, callback: Callable[[frozenset[str]], None]) -> None:
        self._subscribers.append(callback)

    def set(self, cluster: str, values: Mapping[str, str] | None, *, own: bool = False) -> None:
        """Change one cluster's properties (None: unknown), or this cluster's own (`own`),
        and tell the subscribers."""
        if own:
            self._own = dict(values or {})
        elif values is None:
            self._others.pop(cluster, None)
        else:
            self._others[cluster] = dict(values)
        for callback in self._subscribers:
            callback(frozenset({cluster}))


# --- metrics -----------------------------------------------------------------------------------


class SelectionMetrics:
    """`mcsync_agent_cluster_selection_switches_total{direction}` (both at 0 from start),
    and the imports with selectors that are not on their first tier, and on fallback."""

    def __init__(self, metrics: AgentMetrics) -> None:
        registry = metrics.registry
        self.switches = Counter(
            "mcsync_agent_cluster_selection_switches_total",
            "Cluster-selection switches of this cluster's imports: failover (to a less "
            "preferred tier or into fallback) and failback (docs/reference.md#cluster-selection).",
            ["direction"],
            registry=registry,
        )
        for direction in DIRECTIONS:
            self.switches.labels(direction)
        self.not_first_tier = Gauge(
            "mcsync_agent_cluster_selection_not_first_tier",
            "Imports with cluster selectors whose active tier is not their first (on a later "
            "tier or on fallback).",
            registry=registry,
        )
        self.on_fallback = Gauge(
            "mcsync_agent_cluster_selection_on_fallback",
            "Imports with cluster selectors where no tier qualifies, so their fallback "
            "(AllClusters or None) decides.",
            registry=registry,
        )


# --- the agent's memory of each import's selection -----------------------------------------------


@dataclass(slots=True)  # not frozen: one is made per evaluation, and frozen init is slower
class _Held:
    inputs: Inputs
    clusters: tuple[str, ...]
    selection: Selection
    # What the tiers were computed from: equal next time, they are the same tiers.
    tiered_from: tuple[Any, ...]
    # What the endpoint counts were computed from, and the counts.
    counted_from: tuple[Any, ...]
    endpoints: Mapping[str, EndpointCounts]
    # `mcsync.io/failback-pending-since`'s value (None: no failback waits), and the
    # state's waits it was written from: the same waits keep the same text.
    pending: str | None = None
    pending_from: tuple[tuple[int, float], ...] = ()
    # The import's selection fields and exporters as held, and the properties' version,
    # when this was computed: all equal, with no wait running, the answer is the same.
    raw: tuple[Any, ...] = ()
    version: int = -1


Events = Callable[[str, str, str, str], None]  # key, type, reason, message
Exporters = Mapping[str, Mapping[str, str] | None]  # exporting cluster -> its properties


class ImportSelections:
    """Per key, the last selection; see the module doc. Thread-safe: evaluations of one
    key from two reconcilers serialise on one lock (an evaluation is microseconds)."""

    def __init__(
        self,
        *,
        imports: ImportView,
        properties: FleetProperties,
        metrics: SelectionMetrics,
        on_change: Callable[[str], None] = lambda _key: None,
        wake: Callable[[str, float], None] = lambda _key, _delay: None,
        events: Events = lambda _key, _type, _reason, _message: None,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
        recorded: Callable[[str], Mapping[str, str] | None] = lambda _key: None,
    ) -> None:
        """`on_change(key)`: queue the key's reconcilers (the outcome changed);
        `wake(key, delay)`: queue it again after `delay` seconds (a failback wait ends);
        `events(key, type, reason, message)`: an Event on the key's ServiceImport;
        `recorded(key)`: the annotations of the key's ServiceImport of ours as it stands
        (a key first evaluated by this process resumes from them); `wall`: the clock the
        pending-since annotation is written in."""
        self._imports = imports
        self._properties = properties
        self._metrics = metrics
        self._on_change = on_change
        self._wake = wake
        self._events = events
        self._clock = clock
        self._wall = wall
        self._recorded = recorded
        self._lock = threading.Lock()
        self._held: dict[str, _Held] = {}
        self._not_first: set[str] = set()
        self._fallback: set[str] = set()
        # Bumped by every property change; the shortcuts of `evaluate` need it, so they
        # are off for a property source that does not tell of its changes.
        self._version = 0
        self._tiers: dict[tuple[Any, ...], tuple[tuple[str, ...], ...]] = {}
        # Exporting clusters -> their properties, as of `_version` (`_exporters_of`).
        self._exporters: dict[tuple[str, ...], tuple[Exporters, tuple[Any, ...]]] = {}
        subscribe = getattr(properties, "subscribe", None)
        self._versioned = callable(subscribe)
        if callable(subscribe):
            subscribe(self.on_properties_changed)

    @staticmethod
    def counts(
        imported: HeldImport, sources: Iterable[SourceSlice]
    ) -> dict[str, EndpointCounts]:
        """cluster → the endpoints its mirrored slices of `imported` would hold, from the
        key's source slices (a cluster serving none of the import's ports holds none; a
        Stale cluster's are withdrawn). The rule of `member.imports.importspec.mirrored_slice`,
        without building the slice."""
        served = served_ports(imported) if imported.ports else None
        ready: dict[str, int] = {}
        total: dict[str, int] = {}
        for source in sources:
            cluster = source.cluster
            if not cluster:
                continue
            if served is not None:
                kept = served.get(cluster)
                if not kept or not any(port.name in kept for port in source.ports):
                    continue
            counted = endpoint_counts(source.endpoints)
            ready[cluster] = ready.get(cluster, 0) + counted.ready
            total[cluster] = total.get(cluster, 0) + counted.total
        return {c: EndpointCounts(ready[c], total[c]) for c in total}

    def evaluate(self, key: str, imported: HeldImport) -> Selection | None:
        """This cluster's selection for `key` now (None: the import has no selectors).

        Two shortcuts keep a burst of re-evaluations cheap: the tiers are computed once per
        distinct (selectors, exporting clusters) while no property changes (`_tiers`), and
        an import whose inputs are all as last time, with no failback waiting (the only
        thing time changes), answers its last selection without running the core."""
        raw = (getattr(imported, "cluster_selectors", None),
               getattr(imported, "cluster_selection", None), imported.clusters)
        hint = self._held.get(key)
        # The same held fields parse to the same selectors and policy.
        inputs = hint.inputs if hint is not None and hint.raw == raw else selection_inputs(imported)
        if inputs is None:
            self.forget(key)
            return None
        selectors, policy = inputs
        # Read before the properties: a change after this read bumps it, so whatever is
        # computed from older properties is never kept under the newer version.
        version = self._version
        # The source slices are immutable and replaced when they change: equal to last
        # time (by identity, on the common path), they hold the same endpoints.
        counted_from = (self._imports.slices(key), imported.ports, imported.served)
        if (
            hint is not None
            and hint.version == version
            and self._versioned
            and hint.raw == raw
            and hint.counted_from == counted_from
            and (hint.selection.state is None or not hint.selection.state.qualified_since)
        ):
            return hint.selection
        clusters, known = self._exporters_of(imported.clusters, version)
        if hint is not None and hint.counted_from == counted_from:
            endpoints = hint.endpoints
        else:
            endpoints = self.counts(imported, counted_from[0])
        own = self._properties.own()
        # Properties are replaced whole when they change, so this compares by identity
        # on the common path (an evaluation for endpoints or a timer).
        tiered_from = (selectors, own, known)
        with self._lock:
            now = self._clock()
            held = self._held.get(key)
            # New selectors are a new choice; a new policy keeps the tier it is on. A key
            # this process has not evaluated resumes from its ServiceImport (a restart).
            resumed_text = None
            previous: SelectionState | None
            if held is None:
                recorded = self._recorded(key)
                fallback = tuple(sorted(clusters)) if policy.fallback == "AllClusters" else ()
                previous = resumed_state(recorded, len(selectors), fallback, now, self._wall())
                if previous is not None and previous.qualified_since and recorded:
                    resumed_text = recorded.get(ANNOTATION_FAILBACK_PENDING_SINCE)
            elif held.inputs[0] == selectors:
                previous = held.selection.state
            else:
                previous = None
            tiers = (
                held.selection.tiers
                if held is not None and held.tiered_from == tiered_from
                else None
            )
            shared_key = None
            if tiers is None and self._versioned and isinstance(raw[0], bytes | str):
                shared_key = (raw[0], raw[2], version)
                tiers = self._tiers.get(shared_key)
            if tiers is None:
                tiers = tiers_of(selectors, clusters, own)
                if shared_key is not None:
                    if len(self._tiers) >= 4096:
                        self._tiers.clear()
                    self._tiers[shared_key] = tiers
            selection = select(
                selectors, policy, own, clusters, endpoints, previous, now, tiers=tiers
            )
            waits = selection.state.qualified_since if selection.state is not None else ()
            if held is not None and held.pending_from == waits:
                pending = held.pending
            elif previous is not None and waits == previous.qualified_since and resumed_text:
                pending = resumed_text  # as recorded: no rewrite for a rounding
            else:
                wall = self._wall()
                pending = pending_since_text((i, wall - (now - t)) for i, t in waits)
            changed = held is None or (
                held.selection.tiers, held.selection.active_clusters, held.pending
            ) != (selection.tiers, selection.active_clusters, pending)
            self._held[key] = _Held(
                inputs, imported.clusters, selection, tiered_from, counted_from, endpoints,
                pending, waits, raw, version,
            )
            decided = selection.state is not None
            if self._mark(self._not_first, key, decided and selection.active != 0):
                self._metrics.not_first_tier.set(len(self._not_first))
            if self._mark(self._fallback, key, decided and selection.on_fallback):
                self._metrics.on_fallback.set(len(self._fallback))
        if selection.switch is not None:
            self._metrics.switches.labels(selection.switch).inc()
            failover = selection.switch == "failover"
            self._events(
                key,
                "Warning" if failover else "Normal",
                REASON_FAILOVER if failover else REASON_FAILBACK,
                f"cluster selection: {selection.message}",
            )
            logger.info("%s: cluster selection %s: %s", key, selection.switch, selection.message,
                        extra={"key": key})
        if selection.wake_at is not None:
            self._wake(key, max(selection.wake_at - now, 0.0))
        if changed and held is not None:
            self._on_change(key)
        return selection

    def _exporters_of(
        self, clusters: tuple[str, ...], version: int
    ) -> tuple[Exporters, tuple[Any, ...]]:
        """Each of `clusters` → its properties (None: unknown), and the same as pairs.
        Kept per distinct exporting clusters until a property changes (imports commonly
        share their exporters), when the property source tells of its changes; `version`
        is `_version` as read before the properties are, so nothing read from older
        properties is kept under a newer version."""
        if self._versioned:
            kept = self._exporters.get(clusters)
            if kept is not None:
                return kept
        of = self._properties.of
        found = {c: of(c) for c in clusters}
        answer = (found, tuple(found.items()))
        if self._versioned:
            with self._lock:
                if self._version == version:
                    if len(self._exporters) >= 4096:
                        self._exporters.clear()
                    self._exporters[clusters] = answer
        return answer

    def annotations(self, key: str, selection: Selection) -> dict[str, str]:
        """The annotations of `key`'s ServiceImport for `selection` (this key's last)."""
        with self._lock:
            held = self._held.get(key)
        return result_annotations(selection, held.pending if held is not None else None)

    def current(self, key: str) -> Selection | None:
        with self._lock:
            held = self._held.get(key)
        return held.selection if held is not None else None

    def forget(self, key: str) -> None:
        """`key` is no longer imported with selectors here."""
        with self._lock:
            if self._held.pop(key, None) is None:
                return
            self._not_first.discard(key)
            self._fallback.discard(key)
            self._metrics.not_first_tier.set(len(self._not_first))
            self._metrics.on_fallback.set(len(self._fallback))

    def on_properties_changed(self, changed: Iterable[str]) -> None:
        """Some clusters' properties changed: queue the selecting keys they concern."""
        ids = frozenset(changed)
        own_id = getattr(self._properties, "cluster_id", None)
        with self._lock:
            self._version += 1
            self._tiers.clear()
            self._exporters.clear()
            # Our own properties change every `@SameAsImporter@` (and a source that does
            # not say which cluster is ours, every key).
            everything = own_id is None or own_id in ids
            keys = [
                key for key, held in self._held.items()
                if everything or not ids.isdisjoint(held.clusters)
            ]
        for key in keys:
            self._on_change(key)

    @staticmethod
    def _mark(members: set[str], key: str, present: bool) -> bool:
        """Add or remove `key`; answers whether that changed `members`."""
        if present == (key in members):
            return False
        if present:
            members.add(key)
        else:
            members.discard(key)
        return True

