"""Cluster selection and failover order (KEP-5939, carried in annotations).

Upstream's ServiceExport CRD prunes unknown spec fields, so a Service's preference of
clusters travels as three ServiceExport annotations (docs/reference.md#cluster-selection):

* `mcsync.io/cluster-selectors`: KEP-5939's `clusterSelectors` verbatim, a JSON list of
  `{"propertySelector": {...}}` in order of preference;
* `mcsync.io/cluster-selection`: the policy (`minReadyEndpoints`, `minReadyPercent`,
  `failbackDelaySeconds`, `fallback`);
* `mcsync.io/import-clusters`: one bare property selector naming the clusters that import
  the Service at all.

The wire models live here once, so the agent (which sets `Valid=False` with reason
`InvalidClusterSelector`) and the hub (which answers 422 naming the field) refuse exactly
the same values. Property selectors follow Kubernetes' label selectors (terms ANDed, the
four operators and their value rules); their keys are `ClusterProperty` names, which
KEP-2149 makes DNS subdomains, and their values are property values (not label values:
a property value may be up to 1 KiB of any text).

The module also holds the pure selection core: given the tiers' properties and endpoint
counts, which tier an importing cluster uses, with failback damping. It does no I/O and
reads no clock: the caller passes `now`.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Annotated, Any, Final, Literal

from pydantic import Field, ValidationError, field_validator, model_validator

from shared.timefmt import format_millis, parse_rfc3339
from shared.validation import StrictInt, is_dns1123_subdomain
from shared.wirebase import StrictWireModel

__all__ = [
    "ANNOTATION_ACTIVE_CLUSTERS",
    "ANNOTATION_CLUSTER_SELECTION",
    "ANNOTATION_CLUSTER_SELECTORS",
    "ANNOTATION_CLUSTER_SELECTOR_RESULTS",
    "ANNOTATION_FAILBACK_PENDING_SINCE",
    "ANNOTATION_IMPORT_CLUSTERS",
    "MAX_CLUSTER_SELECTORS",
    "NO_ENDPOINTS",
    "SAME_AS_IMPORTER",
    "ClusterSelectionPolicy",
    "ClusterSelector",
    "ClusterSelectors",
    "Direction",
    "EndpointCounts",
    "ImportClustersSelector",
    "InvalidClusterSelector",
    "PropertySelector",
    "PropertySelectorRequirement",
    "Selection",
    "SelectionAnnotations",
    "SelectionState",
    "matches",
    "parse_selection_annotations",
    "pending_since_text",
    "resumed_state",
    "select",
    "tiers_of",
]

# --- annotation keys ------------------------------------------------------------------------

ANNOTATION_CLUSTER_SELECTORS: Final = "mcsync.io/cluster-selectors"
ANNOTATION_CLUSTER_SELECTION: Final = "mcsync.io/cluster-selection"
ANNOTATION_IMPORT_CLUSTERS: Final = "mcsync.io/import-clusters"
# Written by the importing agent on its own ServiceImport: the outcome, for people and tools.
ANNOTATION_CLUSTER_SELECTOR_RESULTS: Final = "mcsync.io/cluster-selector-results"
ANNOTATION_ACTIVE_CLUSTERS: Final = "mcsync.io/active-clusters"
# Written there too while a failback waits: since when each more preferred tier has
# qualified, so that a restarted agent resumes the wait (`resumed_state`).
ANNOTATION_FAILBACK_PENDING_SINCE: Final = "mcsync.io/failback-pending-since"

# The value that stands for the importing cluster's own value of the same property.
SAME_AS_IMPORTER: Final = "@SameAsImporter@"
MAX_CLUSTER_SELECTORS: Final = 16
# A ClusterProperty's value is at most 1 KiB (docs/reference.md#cluster-properties): a
# longer value in a selector could never match anything, so it is a mistake worth naming.
MAX_PROPERTY_VALUE: Final = 1024

Operator = Literal["In", "NotIn", "Exists", "DoesNotExist"]
Fallback = Literal["AllClusters", "None"]


class InvalidClusterSelector(ValueError):
    """One of the three annotations is malformed; the message names it and the problem."""


# --- wire models ----------------------------------------------------------------------------


def _key(value: str) -> str:
    if not is_dns1123_subdomain(value):
        raise ValueError(
            f"key {value!r} is not a ClusterProperty name (a DNS-1123 subdomain: lower-case "
            "letters, digits, '-' and '.', at most 253 characters)"
        )
    return value


def _value(value: str) -> str:
    if not value:
        raise ValueError("a property value may not be empty")
    if len(value) > MAX_PROPERTY_VALUE:
        raise ValueError(
            f"a property value is at most {MAX_PROPERTY_VALUE} characters, not {len(value)}"
        )
    return value


class PropertySelectorRequirement(StrictWireModel):
    """One `matchExpressions` term, ruled as a Kubernetes label-selector requirement."""

    key: str
    operator: Operator
    values: list[str] = Field(default_factory=list)

    @field_validator("key")
    @classmethod
    def _check_key(cls, value: str) -> str:
        return _key(value)

    @field_validator("values")
    @classmethod
    def _check_values(cls, values: list[str]) -> list[str]:
        for value in values:
            _value(value)
        return values

    @model_validator(mode="after")
    def _operator_values(self) -> PropertySelectorRequirement:
        if self.operator in ("In", "NotIn") and not self.values:
            raise ValueError(f"operator {self.operator} needs at least one value")
        if self.operator in ("Exists", "DoesNotExist") and self.values:
            raise ValueError(f"operator {self.operator} takes no values")
        return self


class PropertySelector(StrictWireModel):
    """Terms on a cluster's properties, ANDed; at least one term.

    `@SameAsImporter@` may stand in `matchProperties` values and In/NotIn values: it is the
    importing cluster's own value of that key (`matches` resolves it)."""

    match_properties: dict[str, str] = Field(default_factory=dict)
    match_expressions: list[PropertySelectorRequirement] = Field(default_factory=list)

    @field_validator("match_properties")
    @classmethod
    def _check_properties(cls, properties: dict[str, str]) -> dict[str, str]:
        for key, value in properties.items():
            _key(key)
            try:
                _value(value)
            except ValueError as error:
                raise ValueError(f"value of {key!r}: {error}") from None
        return properties

    @model_validator(mode="after")
    def _not_empty(self) -> PropertySelector:
        if not self.match_properties and not self.match_expressions:
            raise ValueError(
                "an empty property selector is invalid: give matchProperties or "
                "matchExpressions"
            )
        return self

    def mentions_importer(self) -> bool:
        """Whether any value is `@SameAsImporter@` (the result then depends on the importer)."""
        return SAME_AS_IMPORTER in self.match_properties.values() or any(
            SAME_AS_IMPORTER in term.values for term in self.match_expressions
        )


class ImportClustersSelector(PropertySelector):
    """`mcsync.io/import-clusters`: which clusters import the Service at all.

    The hub evaluates it for every cluster, so no importer is there to stand in for
    `@SameAsImporter@`: the value is refused here."""

    @model_validator(mode="after")
    def _no_importer(self) -> ImportClustersSelector:
        if self.mentions_importer():
            raise ValueError(
                f"{SAME_AS_IMPORTER} is not allowed in import-clusters (it stands for an "
                "importing cluster's value, and this selector chooses the importers)"
            )
        return self


class ClusterSelector(StrictWireModel):
    """One entry of `clusterSelectors`: exactly one criterion (KEP-5939 has one kind now)."""

    property_selector: PropertySelector | None = None

    @model_validator(mode="after")
    def _one_criterion(self) -> ClusterSelector:
        if self.property_selector is None:
            raise ValueError("a cluster selector needs exactly one criterion: propertySelector")
        return self


ClusterSelectors = Annotated[
    list[ClusterSelector], Field(min_length=1, max_length=MAX_CLUSTER_SELECTORS)
]


class ClusterSelectionPolicy(StrictWireModel):
    """`mcsync.io/cluster-selection`: when a tier qualifies and how carefully to come back."""

    min_ready_endpoints: Annotated[StrictInt, Field(ge=1, le=10_000)] = 1
    min_ready_percent: Annotated[StrictInt, Field(ge=0, le=100)] = 0
    failback_delay_seconds: Annotated[StrictInt, Field(ge=0, le=3_600)] = 30
    fallback: Fallback = "AllClusters"

    def required_ready(self, total_endpoints: int) -> int:
        """Ready endpoints a tier holding `total_endpoints` needs to qualify."""
        return max(
            self.min_ready_endpoints, math.ceil(self.min_ready_percent * total_endpoints / 100)
        )


DEFAULT_POLICY: Final = ClusterSelectionPolicy()


# --- parsing the annotations ------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SelectionAnnotations:
    """The three annotations of one ServiceExport, parsed; None where absent."""

    cluster_selectors: tuple[ClusterSelector, ...] | None = None
    cluster_selection: ClusterSelectionPolicy | None = None
    import_clusters: ImportClustersSelector | None = None


def _problem(error: ValidationError) -> str:
    """pydantic's errors as one line: the wire path of each, then what is wrong."""
    parts = []
    for item in error.errors(include_url=False):
        where = ""
        for step in item["loc"]:
            where += f"[{step}]" if isinstance(step, int) else (f".{step}" if where else step)
        message = str(item["msg"]).removeprefix("Value error, ")
        parts.append(f"{where}: {message}" if where else message)
    return "; ".join(parts)


def _json_kind(value: object) -> str:
    if isinstance(value, bool):
        return "a boolean"
    if value is None:
        return "null"
    kinds = {dict: "an object", list: "a list", str: "a string", int: "a number", float: "a number"}
    return kinds.get(type(value), type(value).__name__)


def _load(annotation: str, text: str, expected: type) -> Any:
    try:
        value = json.loads(text)
    except ValueError as error:
        raise InvalidClusterSelector(f"{annotation}: not valid JSON ({error})") from None
    if not isinstance(value, expected):
        wanted = "a JSON list" if expected is list else "a JSON object"
        raise InvalidClusterSelector(f"{annotation}: must be {wanted}, not {_json_kind(value)}")
    return value


def parse_selection_annotations(annotations: Mapping[str, str]) -> SelectionAnnotations:
    """The three selection annotations of a ServiceExport, validated.

    Raises `InvalidClusterSelector` naming the first annotation that is malformed."""
    selectors: tuple[ClusterSelector, ...] | None = None
    policy: ClusterSelectionPolicy | None = None
    import_clusters: ImportClustersSelector | None = None

    text = annotations.get(ANNOTATION_CLUSTER_SELECTORS)
    if text is not None:
        items = _load(ANNOTATION_CLUSTER_SELECTORS, text, list)
        if not items:
            raise InvalidClusterSelector(
                f"{ANNOTATION_CLUSTER_SELECTORS}: the list is empty (remove the annotation to "
                "use every exporting cluster)"
            )
        if len(items) > MAX_CLUSTER_SELECTORS:
            raise InvalidClusterSelector(
                f"{ANNOTATION_CLUSTER_SELECTORS}: {len(items)} selectors, at most "
                f"{MAX_CLUSTER_SELECTORS}"
            )
        parsed = []
        for index, item in enumerate(items):
            try:
                parsed.append(ClusterSelector.model_validate(item))
            except ValidationError as error:
                raise InvalidClusterSelector(
                    f"{ANNOTATION_CLUSTER_SELECTORS}: selector {index + 1}: {_problem(error)}"
                ) from None
        selectors = tuple(parsed)

    text = annotations.get(ANNOTATION_CLUSTER_SELECTION)
    if text is not None:
        body = _load(ANNOTATION_CLUSTER_SELECTION, text, dict)
        try:
            policy = ClusterSelectionPolicy.model_validate(body)
        except ValidationError as error:
            raise InvalidClusterSelector(
                f"{ANNOTATION_CLUSTER_SELECTION}: {_problem(error)}"
            ) from None

    text = annotations.get(ANNOTATION_IMPORT_CLUSTERS)
    if text is not None:
        body = _load(ANNOTATION_IMPORT_CLUSTERS, text, dict)
        try:
            import_clusters = ImportClustersSelector.model_validate(body)
        except ValidationError as error:
            raise InvalidClusterSelector(
                f"{ANNOTATION_IMPORT_CLUSTERS}: {_problem(error)}"
            ) from None

    return SelectionAnnotations(selectors, policy, import_clusters)


# --- matching ---------------------------------------------------------------------------------


def _resolved(
    key: str, values: Iterable[str], importer: Mapping[str, str]
) -> tuple[set[str], bool]:
    """`values` with `@SameAsImporter@` replaced by the importer's value of `key`, and
    whether a token could not be resolved (the importer lacks the property)."""
    out: set[str] = set()
    unresolved = False
    for value in values:
        if value == SAME_AS_IMPORTER:
            own = importer.get(key)
            if own is None:
                unresolved = True
            else:
                out.add(own)
        else:
            out.add(value)
    return out, unresolved


def matches(
    selector: PropertySelector, properties: Mapping[str, str], importer: Mapping[str, str]
) -> bool:
    """Whether a cluster with `properties` is selected, for the importer with `importer`.

    An importer without the property that `@SameAsImporter@` names matches nothing through
    it: in `matchProperties` that term is false; in `In` the token adds no value (the
    others still count); a `NotIn` holding such a token is false, because "not the same as
    a value I do not have" would otherwise select every cluster."""
    for key, wanted in selector.match_properties.items():
        if wanted == SAME_AS_IMPORTER:
            own = importer.get(key)
            if own is None:
                return False
            wanted = own
        if properties.get(key) != wanted:
            return False
    for term in selector.match_expressions:
        have = properties.get(term.key)
        if term.operator == "Exists":
            if have is None:
                return False
        elif term.operator == "DoesNotExist":
            if have is not None:
                return False
        else:
            values, unresolved = _resolved(term.key, term.values, importer)
            if term.operator == "In":
                if have is None or have not in values:
                    return False
            elif unresolved or (have is not None and have in values):
                return False
    return True


def tiers_of(
    selectors: Sequence[ClusterSelector],
    clusters: Mapping[str, Mapping[str, str] | None],
    importer: Mapping[str, str],
) -> tuple[tuple[str, ...], ...]:
    """The tiers: for each selector, the sorted ids of the clusters it selects. A cluster
    whose properties are unknown (None) is in no tier."""
    tiers = []
    for selector in selectors:
        chosen = selector.property_selector
        assert chosen is not None  # a validated ClusterSelector has its one criterion
        tiers.append(
            tuple(
                sorted(
                    cluster
                    for cluster, properties in clusters.items()
                    if properties is not None and matches(chosen, properties, importer)
                )
            )
        )
    return tuple(tiers)


# --- the selection core ---------------------------------------------------------------------
#
# Pure: the caller (the importing agent) passes every input, `now` included, and keeps the
# answered `SelectionState` for the next evaluation of the same import.

Direction = Literal["failover", "failback"]


@dataclass(frozen=True, slots=True)
class EndpointCounts:
    """One exporting cluster's endpoints as this cluster's mirrored slices would hold them:
    `ready` counts those ready (not terminating), `total` all of them. A Stale cluster's
    endpoints are withdrawn, so it counts (0, 0)."""

    ready: int = 0
    total: int = 0


NO_ENDPOINTS: Final = EndpointCounts()


def endpoint_is_ready(conditions: Mapping[str, Any] | None) -> bool:
    """Whether an endpoint counts as ready for selection, as consumers of a slice read it:
    `ready` not false (absent is ready, as Kubernetes documents) and not terminating."""
    conditions = conditions or {}
    return conditions.get("ready") is not False and not conditions.get("terminating")


@dataclass(frozen=True, slots=True)
class SelectionState:
    """What one import's next evaluation needs of the last: the active tier (its index;
    None when on fallback) and, for each more preferred tier that qualifies now, since when
    it has without a break (the failback wait)."""

    active: int | None
    qualified_since: tuple[tuple[int, float], ...] = ()


@dataclass(frozen=True, slots=True)
class Selection:
    """The outcome of one evaluation.

    `tiers`: per selector, the sorted ids of the exporting clusters it selects (Stale ones
    included: tiers depend on properties only). `active`: the active tier's index, None on
    fallback. `active_clusters`: whose endpoints may be ready here, sorted. `switch`: the
    move this evaluation made, if any, and `message` naming both tiers. `state`: to pass
    back next time (None while no choice has been made). `wake_at`: when a failback wait
    ends (the caller re-evaluates then), or None."""

    tiers: tuple[tuple[str, ...], ...]
    active: int | None
    fallback: Fallback
    active_clusters: tuple[str, ...]
    switch: Direction | None
    message: str | None
    state: SelectionState | None
    wake_at: float | None

    @property
    def on_fallback(self) -> bool:
        return self.active is None


def _describe(
    index: int | None, tiers: Sequence[tuple[str, ...]], fallback: Fallback,
    everyone: tuple[str, ...],
) -> str:
    if index is None:
        members = everyone if fallback == "AllClusters" else ()
        return f"fallback {fallback} ({','.join(members)})"
    return f"tier {index + 1} ({','.join(tiers[index])})"


def select(
    selectors: Sequence[ClusterSelector],
    policy: ClusterSelectionPolicy,
    importer: Mapping[str, str],
    clusters: Mapping[str, Mapping[str, str] | None],
    endpoints: Mapping[str, EndpointCounts],
    previous: SelectionState | None,
    now: float,
    *,
    tiers: tuple[tuple[str, ...], ...] | None = None,
) -> Selection:
    """Which exporting clusters' endpoints this importer uses (docs/reference.md#cluster-selection).

    `clusters`: every exporting cluster → its properties (None: not known here, so in no
    tier); `endpoints`: per cluster, the counts its mirrored slices would hold (absent:
    none); `previous`: the last evaluation's state (None for an import not decided yet);
    `now`: seconds on a monotonic clock; `tiers`: `tiers_of(selectors, clusters,
    importer)` when the caller kept them from an evaluation with the same inputs.

    A tier qualifies when its ready endpoints reach `policy.required_ready(its total)`. The
    first choice is the first qualifying tier, undamped; it is made once the import has a
    ready endpoint somewhere (before that there is nothing to choose, and choosing fallback
    would make the first real choice wait as a failback). Then: a move to a less preferred
    tier (or into fallback) is immediate; a move back waits until the better tier has
    qualified without a break for `failbackDelaySeconds`. When the active tier itself stops
    qualifying, there is nothing to stay on: the first qualifying tier is taken at once,
    whichever side it is on. Tiers are held by index, so a cluster entering or leaving the
    active tier through a property change moves nothing.
    """
    if tiers is None:
        tiers = tiers_of(selectors, clusters, importer)
    qualifying = []
    least, percent = policy.min_ready_endpoints, policy.min_ready_percent
    for index, members in enumerate(tiers):
        ready = total = 0
        for cluster in members:
            counts = endpoints.get(cluster, NO_ENDPOINTS)
            ready += counts.ready
            total += counts.total
        # `required_ready`, inline: this loop runs for every import at each re-evaluation.
        if ready >= least and (not percent or ready * 100 >= percent * total):
            qualifying.append(index)
    first = qualifying[0] if qualifying else None
    # A tier's rank is its index; fallback ranks after every tier.
    last = len(tiers)

    state: SelectionState | None
    switch: Direction | None = None
    message = None
    wake_at = None
    if previous is None:
        target = first
        any_ready = any(counts.ready > 0 for counts in endpoints.values())
        state = SelectionState(target) if any_ready else None
    else:
        current = previous.active
        if current is not None and current >= last:
            current = None  # fewer selectors than when chosen: the caller should have reset
        current_rank = last if current is None else current
        target = current
        if current is not None and current not in qualifying:
            target = first
        target_rank = last if target is None else target
        since: dict[int, float] = {}
        # A wait runs only for a tier more preferred than the current one that qualifies:
        # commonly none, and then no wait is worked out.
        if first is not None and first < current_rank:
            held = dict(previous.qualified_since)
            since = {i: held.get(i, now) for i in qualifying if i < current_rank}
            delay = policy.failback_delay_seconds
            for index in since:  # ascending: `qualifying` is
                if index < target_rank and now - since[index] >= delay:
                    target = target_rank = index
                    break
            since = {i: t for i, t in since.items() if i < target_rank}
            if since:
                wake_at = min(t + delay for t in since.values())
        if target_rank != current_rank:
            switch = "failover" if target_rank > current_rank else "failback"
            everyone = tuple(sorted(clusters))
            message = (
                f"{_describe(current, tiers, policy.fallback, everyone)} → "
                f"{_describe(target, tiers, policy.fallback, everyone)}"
            )
        waits = tuple(since.items())  # ascending, as `qualifying`
        unchanged = target == previous.active and waits == previous.qualified_since
        state = previous if unchanged else SelectionState(target, waits)

    if target is not None:
        active_clusters = tiers[target]
    elif policy.fallback == "AllClusters":
        active_clusters = tuple(sorted(clusters))
    else:
        active_clusters = ()
    return Selection(
        tiers=tiers,
        active=target,
        fallback=policy.fallback,
        active_clusters=active_clusters,
        switch=switch,
        message=message,
        state=state,
        wake_at=wake_at,
    )


# --- resuming after a restart -----------------------------------------------------------------
#
# The agent holds each import's `SelectionState` in memory. A restarted agent that chose
# afresh would take the first qualifying tier at once, a failback that skipped the damping,
# so it resumes from what its ServiceImport says instead (docs/reference.md#cluster-selection):
# the tiers and active clusters it last wrote, and `mcsync.io/failback-pending-since`.


def pending_since_text(pending: Iterable[tuple[int, float]]) -> str | None:
    """The annotation's value for `(tier index, since)` pairs, `since` in seconds of the
    wall clock: `1=2026-11-29T01:02:03.250Z`, the tier numbered from 1, comma-separated
    when several tiers wait; None when none does."""
    parts = [
        f"{index + 1}={format_millis(datetime.fromtimestamp(since, UTC))}"
        for index, since in sorted(pending)
    ]
    return ",".join(parts) or None


def _pending_since(text: str) -> dict[int, float]:
    """`pending_since_text`'s inverse: tier index → wall-clock seconds. A part that does not
    read is left out (its tier's wait then starts afresh, never skipped)."""
    out: dict[int, float] = {}
    for part in text.split(","):
        number, _, moment = part.strip().partition("=")
        try:
            index = int(number) - 1
            since = parse_rfc3339(moment).timestamp()
        except ValueError:
            continue
        if index >= 0:
            out[index] = since
    return out


def resumed_state(
    annotations: Mapping[str, str] | None,
    selectors: int,
    fallback_clusters: Sequence[str],
    now: float,
    wall: float,
) -> SelectionState | None:
    """The state a restarted agent resumes an import from, given its ServiceImport's
    annotations; None when they hold no choice to resume (a new import, or one with a
    different number of selectors: a new choice, as in memory).

    The active tier is read from the recorded active clusters: the recorded tier, or the fallback
    (`fallback_clusters`: every exporting cluster under `AllClusters`, none under `None`), holding
    exactly those clusters; when several do, the least preferred of them, so that any move from
    there is a failback and damped (the clusters are the same, so traffic is too), and when none
    does, the fallback. A tier with a recorded pending time keeps it, mapped onto `now`'s monotonic
    clock by the wall clock `wall` (a time in the future counts as now); every other more preferred
    tier starts its wait at `now`, so a restart delays a failback at most by one
    `failbackDelaySeconds` and never skips one."""
    if not annotations:
        return None
    results = annotations.get(ANNOTATION_CLUSTER_SELECTOR_RESULTS)
    active_text = annotations.get(ANNOTATION_ACTIVE_CLUSTERS)
    if results is None or active_text is None:
        return None
    try:
        recorded = [tuple(sorted(entry["clusters"])) for entry in json.loads(results)]
    except (ValueError, TypeError, KeyError):
        return None
    if len(recorded) != selectors:
        return None
    active_clusters = tuple(sorted(c for c in active_text.split(",") if c))
    candidates = [i for i, tier in enumerate(recorded) if tier == active_clusters]
    on_fallback = not candidates or tuple(sorted(fallback_clusters)) == active_clusters
    active = None if on_fallback else candidates[-1]
    rank = len(recorded) if active is None else active
    pending = _pending_since(annotations.get(ANNOTATION_FAILBACK_PENDING_SINCE) or "")
    waits = tuple(
        (index, now - max(0.0, wall - since))
        for index, since in sorted(pending.items())
        if index < rank
    )
    return SelectionState(active, waits)
