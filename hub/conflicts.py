"""The pure conflict judge of docs/reference.md#conflicts: one key's exports in, verdicts and a
ServiceImport out.

Why a pure function: the store calls `judge` inside the transaction that writes an export,
over the key's exports as that write will leave them: the rows its indexed query read
under the key's lock, with the write's own mutations applied (`hub.store.mutations.plan`),
judged BEFORE any row is written so each row is written once with its verdict. Keeping
the rules here, free of I/O, SQL and framework, means each rule of docs/reference.md#conflicts lives
in one place, is tested case by case with plain data, and the verdict is a pure function of the
key's current set of exports (so re-judging after the winner withdraws simply picks the
next oldest). The store's plan is the one place that *orders* (by `precedence_key`);
`judge` only *checks* the order and raises ValueError when it is violated, because
silently re-sorting would hide a store bug that makes hub replicas disagree.

Rules, in the order `judge` applies them:

* **Winner**: the first export in precedence order, `(exportCreationTimestamp in UTC,
  clusterId)`; cluster ids compare as plain strings, so "cluster-10" < "cluster-9".
* **Decided fields** (the DECIDED rows of `shared.properties`: `type`,
  `sessionAffinity`, `sessionAffinityConfig`, ...): an export whose value differs from
  the winner's carries that row's reason. Values compare in their wire form, exactly,
  except where a row names the part compared: a `sessionAffinityConfig` that carries no
  value (`{}` or `{clientIP: {}}`) equals none at all, since both mean "no client-IP
  timeout configured" and differ only in how an agent spelled them.
* **ipFamilies**: an export with an empty list places no constraint (a Service that does
  not state families can be served over any). Walking the constraining exports oldest
  first, a running set of allowed families starts at the first one's families and narrows
  to its intersection with each later export's families; an export whose families share
  nothing with the running set is *not* narrowed into it and carries `IPFamilyConflict`.
  So a key conflicts exactly when no family is common to all constraining exports, and the
  exports flagged are those whose families include none of the import's families. The
  import's `ipFamilies` are the final running set, in the oldest constraining export's
  order (the winner's order whenever the winner states families).
* **Ports** are merged, not decided: walking exports oldest first, a port that meets a
  merged port with the same name ("" is a name too) but another (protocol, port,
  appProtocol), or the same (protocol, port) under another name, is left out (an
  overridden `ports` of its export); an identical merged port gains the export's cluster;
  any other port joins the union. Merged ports keep first-seen order, and each lists
  exactly the clusters that declare it identically, in precedence order: the agent cuts
  each source cluster's EndpointSlice ports by these lists, so no traffic for a port
  reaches a cluster that does not declare it.
* **PortConflict** whenever the exports' port *sets* are not all identical (order within
  an export does not matter): a port left out above, or simply a port some cluster does
  not declare. The import still exposes the union; the conflict is a warning that some
  port is not served everywhere. It is every export's own reason, the winner's too: a
  mismatch is not one export's fault, and the one that lacks a port is as much party to
  it as the one that adds it. This is the MCS conformance suite's Required test "should
  expose the union of the constituent service ports and raise a conflict". (An export
  with a port left out also lacks the merged port it clashed with, as its own names and
  numbers are unique; so "sets differ" is exactly "some export lacks a port of the
  union", which is how `judge` tells.)
* **Verdict**: when any export carries any reason, the key conflicts and *every* export
  gets `conflict=True` (the winner too); the key's reasons are the union, in the fixed
  order of `shared.conditions.CONFLICT_REASONS`.

What the store keeps of a judgement (`judge_key`, `KeyVerdicts`) is here too: each
export's Conflict condition, the key's reasons and the ServiceImport's canonical spec and
status texts (`import_documents`). A key with ONE export (most keys of a sync) has nothing
to disagree with, so `judge_key` takes a fast path for it (`sole_verdict`,
`sole_import_documents`) that `tests/hub/test_conflicts_sole.py` holds equal to `judge`,
text for text. A re-judged export takes a new revision only when its condition's
(status, reason, message) changed (`same_verdict`).

Messages are deterministic (no clock, no counts of clusters): the store rewrites a
record, and the agent a ServiceExport status, only when the message changes, so an
unrelated cluster joining an agreeing key must leave every other export's message as it
was. A conflict message names the disputed fields (wire names), the winner and why it
won, what happened to this export's own values, and which of the import's ports it does
not declare (their traffic goes only to the clusters that do).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Final, Literal

from pydantic import BaseModel

from shared import conditions, properties
from shared.models import (
    Condition,
    ImportClusterStatus,
    ImportPortStatus,
    InternalServiceExportSpec,
    IPFamily,
    ServiceImportSpec,
    ServiceImportStatus,
    ServicePort,
    to_wire,
)

__all__ = [
    "DECIDED_FIELDS",
    "FIELD_ORDER",
    "ExportVerdict",
    "KeyJudgement",
    "KeyVerdicts",
    "format_timestamp",
    "import_documents",
    "judge",
    "judge_key",
    "precedence_key",
    "same_verdict",
    "sole_import_documents",
    "sole_verdict",
]


# The decided properties (`shared.properties.DECIDED`): (wire name, reason, comparable
# value), in the spec's field order. Read off the one table; kept under this name for the
# judge's callers.
_Read = Callable[[InternalServiceExportSpec], Any]
DECIDED_FIELDS: Final[tuple[tuple[str, str, _Read], ...]] = tuple(
    (p.name, p.reason, p.compared_value) for p in properties.DECIDED
)

PORTS_FIELD: Final = properties.by_name("ports").name
IP_FAMILIES_FIELD: Final = properties.by_name("ipFamilies").name

# Every disputable field in the spec's wire order: the order fields are named in messages
# and in `ExportVerdict.overridden_fields`.
FIELD_ORDER: Final[tuple[str, ...]] = tuple(p.name for p in properties.PROPERTIES)

_REASON_OF_FIELD: Final[dict[str, str]] = {p.name: p.reason for p in properties.PROPERTIES}

# Decided fields whose values are short words (an enum, or unset): a message names both
# this cluster's value and the winner's, so a reader sees "Headless here, ClusterSetIP in
# east" without a second lookup. Labels, annotations and the affinity config can be long
# and are only named (`mcsync describe conflict` shows them).
_VALUED_FIELDS: Final[dict[str, _Read]] = {
    p.name: p.value for p in properties.DECIDED if p.short
}

# At most this many rejected ports are spelled out in a message; the rest are counted.
_MAX_PORTS_NAMED: Final = 5


@dataclass(frozen=True)
class ExportVerdict:
    """The verdict on one export of a key."""

    cluster_id: str
    conflict: bool
    # This export's own reasons, in `CONFLICT_REASONS` order: one per field it lost (see
    # `overridden_fields`), plus PortConflict on every export when the key's port sets
    # differ; () when its values stand and every export declares the same ports.
    reasons: tuple[str, ...]
    message: str
    # Wire names of this export's values that lost, in `FIELD_ORDER`, e.g. ("ports", "type");
    # "ports" only when some of its ports clash and were left out of the import.
    overridden_fields: tuple[str, ...]

    def condition(
        self,
        *,
        key_reasons: tuple[str, ...],
        observed_generation: int | None,
        now: datetime,
        previous: Condition | None,
    ) -> Condition:
        """The `Conflict` condition to store on this export.

        `key_reasons` are the reasons of the whole key (`KeyJudgement.reasons`): the
        condition's reason describes the key, because every export of a conflicting key
        is in conflict. `lastTransitionTime` moves only when the status flips.
        """
        if bool(key_reasons) != self.conflict:
            # Mixing one judgement's verdict with another's reasons would store a condition
            # whose status and reason disagree; refuse instead of guessing which is right.
            raise ValueError(
                f"verdict of {self.cluster_id!r} has conflict={self.conflict} "
                f"but the key's reasons are {key_reasons!r}"
            )
        status: Literal["True", "False"] = "True" if self.conflict else "False"
        reason = (
            conditions.join_conflict_reasons(frozenset(key_reasons))
            if key_reasons
            else conditions.NO_CONFLICTS
        )
        transition = now
        if (
            previous is not None
            and previous.type == conditions.CONFLICT
            and previous.status == status
            and previous.last_transition_time is not None
        ):
            transition = previous.last_transition_time
        # Built without validation: every value is the judge's own or a validated
        # model's (a sync builds one per export, and validating it was a tenth of that).
        return Condition.model_construct(
            type=conditions.CONFLICT,
            status=status,
            reason=reason,
            message=self.message,
            observed_generation=observed_generation,
            last_transition_time=transition,
        )


@dataclass(frozen=True)
class KeyJudgement:
    """The judgement of one service key: verdicts for its exports and its ServiceImport."""

    winner: str
    clusters: tuple[str, ...]
    verdicts: dict[str, ExportVerdict]
    reasons: tuple[str, ...]
    import_spec: ServiceImportSpec
    port_clusters: list[ImportPortStatus] = field(default_factory=list)


def precedence_key(spec: InternalServiceExportSpec) -> tuple[datetime, str]:
    """The precedence of an export: (exportCreationTimestamp in UTC, clusterId)."""
    ref = spec.service_reference
    created = ref.export_creation_timestamp
    if created.tzinfo is None:
        # Pydantic guarantees an aware value; a naive one could only come from
        # model_construct and would compare wrongly against aware ones.
        raise ValueError(f"exportCreationTimestamp of {ref.cluster_id!r} lacks a timezone")
    return created.astimezone(UTC), ref.cluster_id


def judge(exports: Sequence[InternalServiceExportSpec]) -> KeyJudgement:
    """Judge one key's exports, given oldest first (see the module docstring for the rules).

    Raises ValueError when `exports` is empty, spans several keys, repeats a cluster, or is
    not in precedence order.
    """
    _check_input(exports)
    winner = exports[0]
    winner_id = winner.service_reference.cluster_id
    clusters = tuple(e.service_reference.cluster_id for e in exports)

    # overridden[cluster] = wire names of that export's values that lost
    overridden: dict[str, set[str]] = {c: set() for c in clusters}

    for spec in exports[1:]:
        cluster = spec.service_reference.cluster_id
        for name, _, value in DECIDED_FIELDS:
            if value(spec) != value(winner):
                overridden[cluster].add(name)

    families, family_losers = _merge_ip_families(exports)
    for cluster in family_losers:
        overridden[cluster].add(IP_FAMILIES_FIELD)

    merged, rejected_ports, missing_ports = _merge_ports(exports)
    for cluster in rejected_ports:
        overridden[cluster].add(PORTS_FIELD)
    # The port sets differ exactly when some export lacks a port of the union (a cluster
    # with a port left out lacks the merged port it clashed with, too).
    ports_differ = bool(missing_ports)
    port_reason = (conditions.PORT_CONFLICT,) if ports_differ else ()

    own_reasons = {
        c: _in_reason_order([*(_REASON_OF_FIELD[f] for f in fields), *port_reason])
        for c, fields in overridden.items()
    }
    key_reasons = _in_reason_order(r for reasons in own_reasons.values() for r in reasons)
    disputed = _in_field_order(
        [
            *(f for fields in overridden.values() for f in fields),
            *([PORTS_FIELD] if ports_differ else []),
        ]
    )

    verdicts: dict[str, ExportVerdict] = {}
    for spec in exports:
        cluster = spec.service_reference.cluster_id
        own_fields = _in_field_order(overridden[cluster])
        if key_reasons:
            message = _conflict_message(
                exports=exports,
                cluster=cluster,
                disputed=disputed,
                own_fields=own_fields,
                rejected=rejected_ports.get(cluster, []),
                missing=missing_ports.get(cluster, []),
            )
        else:
            message = _no_conflict_message(exports)
        verdicts[cluster] = ExportVerdict(
            cluster_id=cluster,
            conflict=bool(key_reasons),
            reasons=own_reasons[cluster],
            message=message,
            overridden_fields=own_fields,
        )

    # Built with model_construct: every value below comes from validated export specs, so
    # validating them again (once per judged key, thousands per sync batch) buys nothing.
    import_spec = ServiceImportSpec.model_construct(
        ports=[port.model_copy() for port, _ in merged],
        ip_families=families,
        **_winners_values(winner),
    )
    port_clusters = [
        ImportPortStatus.model_construct(
            name=port.name,
            protocol=port.protocol,
            port=port.port,
            app_protocol=port.app_protocol,
            clusters=list(owners),
        )
        for port, owners in merged
    ]
    return KeyJudgement(
        winner=winner_id,
        clusters=clusters,
        verdicts=verdicts,
        reasons=key_reasons,
        import_spec=import_spec,
        port_clusters=port_clusters,
    )


def _copied(value: Any) -> Any:
    """A copy of a winner's value for the import, so the two never share a mutable part."""
    if isinstance(value, BaseModel):
        return value.model_copy(deep=True)
    if isinstance(value, dict):
        return dict(value)
    if isinstance(value, (list, tuple)):
        return [_copied(item) for item in value]
    return value


def _winners_values(winner: InternalServiceExportSpec) -> dict[str, Any]:
    """The import spec's decided fields (attribute names): the winner's values."""
    return {
        imported: _copied(getattr(winner, exported))
        for p in properties.DECIDED
        for exported, imported in zip(p.export_attributes, p.import_attributes, strict=True)
    }


def sole_verdict(spec: InternalServiceExportSpec) -> ExportVerdict:
    """`judge([spec]).verdicts[cluster]`: the verdict on a key's only export.

    A lone export has nothing to disagree with (its port set is the union, so not even a
    PortConflict), so its verdict is always "no conflicts", and most keys of a sync have
    one export; the store takes this instead of the whole
    judgement (merges, import models) for them. `tests/hub/test_conflicts_sole.py` holds
    it equal to the general judge.
    """
    return ExportVerdict(
        cluster_id=spec.service_reference.cluster_id,
        conflict=False,
        reasons=(),
        message=_no_conflict_message((spec,)),  # raises as judge does on a naive timestamp
        overridden_fields=(),
    )


# --- what the store keeps: conditions, import documents, the lone export --------------------


@dataclass(frozen=True)
class KeyVerdicts:
    """One key's judgement as the store stores it."""

    verdicts: Mapping[str, ExportVerdict]  # by cluster
    reasons: tuple[str, ...]  # the key's (`KeyJudgement.reasons`)
    import_texts: tuple[str, str]  # canonical ServiceImport spec and status


def judge_key(
    exports: Sequence[InternalServiceExportSpec],
    *,
    wires: Mapping[str, Mapping[str, Any]] | None = None,
) -> KeyVerdicts:
    """`judge` one key's exports (oldest first) into what the store keeps.

    `wires` holds `to_wire(spec)` by cluster where the caller has it already (a lone
    export's import is built from it). A lone export takes the fast path.
    """
    if len(exports) == 1:
        (spec,) = exports
        verdict = sole_verdict(spec)
        cluster = verdict.cluster_id
        wire = (wires or {}).get(cluster) or to_wire(spec)
        return KeyVerdicts({cluster: verdict}, (), sole_import_documents(wire, cluster))
    judgement = judge(exports)
    return KeyVerdicts(judgement.verdicts, judgement.reasons, import_documents(judgement))


def _canonical(value: Any) -> str:
    """The store's one text form of JSON (`hub.store.codec.canonical_json`).

    Imported on call: importing `hub.store` from here would import the store's writer,
    which imports this module.
    """
    from hub.store.codec import canonical_json as canonical

    return canonical(value)


def import_documents(judgement: KeyJudgement) -> tuple[str, str]:
    """Canonical spec and status JSON of a key's ServiceImport (states filled at read time)."""
    status = ServiceImportStatus(
        clusters=[ImportClusterStatus(cluster=c) for c in judgement.clusters],
        ports=list(judgement.port_clusters),
        conflicts=list(judgement.reasons),
        winning_cluster=judgement.winner,
    )
    return _canonical(to_wire(judgement.import_spec)), _canonical(to_wire(status))


# The ServiceImport spec fields a lone export gives as they are: (export wire name, import
# wire name), every property of the table; absent ones are left out, as `to_wire` leaves
# them out.
_SOLE_IMPORT_FIELDS: Final = tuple(pair for p in properties.PROPERTIES for pair in p.fields)


def sole_import_documents(spec_wire: Mapping[str, Any], cluster: str) -> tuple[str, str]:
    """`import_documents(judge([spec]))` from the lone export's `to_wire(spec)`.

    With one export the import is the export: its ports each backed by its cluster alone
    (one port set is trivially the union, so there is no PortConflict and every per-port
    cluster list is exact as `[cluster]`), its decided values, its families, its labels
    and annotations. Building the documents from the wire dict the writer has already
    dumped saves the judge's import models and two model dumps per key.
    """
    spec = {
        imported: spec_wire[exported]
        for exported, imported in _SOLE_IMPORT_FIELDS
        if exported in spec_wire
    }
    status = {
        "clusters": [{"cluster": cluster}],
        "ports": [{**port, "clusters": [cluster]} for port in spec_wire["ports"]],
        "conflicts": [],
        "winningCluster": cluster,
    }
    return _canonical(spec), _canonical(status)


def same_verdict(previous: Condition | None, condition: Condition) -> bool:
    """Whether a stored condition says what a new one says (status, reason, message):
    a re-judged export whose verdict reads the same keeps its revision."""
    return previous is not None and (previous.status, previous.reason, previous.message) == (
        condition.status,
        condition.reason,
        condition.message,
    )


# --- input checks -------------------------------------------------------------------------


def _check_input(exports: Sequence[InternalServiceExportSpec]) -> None:
    if not exports:
        raise ValueError("judge needs at least one export")
    first = exports[0].service_reference
    key = (first.namespace, first.name)
    seen: set[str] = set()
    previous: tuple[datetime, str] | None = None
    for index, spec in enumerate(exports):
        ref = spec.service_reference
        if (ref.namespace, ref.name) != key:
            raise ValueError(
                f"exports[{index}] is {ref.namespace}/{ref.name}, not {key[0]}/{key[1]}: "
                "judge takes one service key at a time"
            )
        if ref.cluster_id in seen:
            raise ValueError(f"exports[{index}]: cluster {ref.cluster_id!r} exports twice")
        seen.add(ref.cluster_id)
        current = precedence_key(spec)
        if previous is not None and current < previous:
            raise ValueError(
                f"exports[{index}] ({ref.cluster_id!r}) precedes exports[{index - 1}] "
                f"({previous[1]!r}): exports must come in precedence order "
                "(exportCreationTimestamp, clusterId)"
            )
        previous = current


# --- merging --------------------------------------------------------------------------------


def _merge_ip_families(
    exports: Sequence[InternalServiceExportSpec],
) -> tuple[list[IPFamily], list[str]]:
    """The import's ipFamilies and the clusters whose families were overridden."""
    allowed: list[IPFamily] | None = None  # None until the first constraining export
    losers: list[str] = []
    for spec in exports:
        if not spec.ip_families:
            continue  # an empty list places no constraint
        if allowed is None:
            allowed = list(spec.ip_families)
            continue
        narrowed = [f for f in allowed if f in spec.ip_families]
        if narrowed:
            allowed = narrowed
        else:
            losers.append(spec.service_reference.cluster_id)
    return (allowed or []), losers


def _merge_ports(
    exports: Sequence[InternalServiceExportSpec],
) -> tuple[
    list[tuple[ServicePort, list[str]]], dict[str, list[ServicePort]], dict[str, list[ServicePort]]
]:
    """The merged ports with the clusters declaring each, and by cluster: its ports left
    out, and the merged ports it does not declare (only clusters with any are keys)."""
    merged: list[tuple[ServicePort, list[str]]] = []
    by_name: dict[str, int] = {}
    by_number: dict[tuple[str, int], int] = {}
    rejected: dict[str, list[ServicePort]] = {}
    for spec in exports:
        cluster = spec.service_reference.cluster_id
        for port in spec.ports:
            same_name = by_name.get(port.name)
            same_number = by_number.get((port.protocol, port.port))
            if same_name is not None and same_name == same_number:
                held = merged[same_name][0]
                if held.app_protocol == port.app_protocol:
                    merged[same_name][1].append(cluster)  # identical: one more backend
                    continue
                # same name and number but another appProtocol: a clash on the name
                rejected.setdefault(cluster, []).append(port)
            elif same_name is not None or same_number is not None:
                # the name is taken by another (protocol, port), or the number by another name
                rejected.setdefault(cluster, []).append(port)
            else:
                by_name[port.name] = len(merged)
                by_number[(port.protocol, port.port)] = len(merged)
                merged.append((port, [cluster]))
    missing: dict[str, list[ServicePort]] = {}
    if len(exports) > 1:  # a lone export declares every merged port
        owner_sets = [(port, set(owners)) for port, owners in merged]
        for spec in exports:
            cluster = spec.service_reference.cluster_id
            lacking = [port for port, owners in owner_sets if cluster not in owners]
            if lacking:
                missing[cluster] = lacking
    return merged, rejected, missing


# --- messages -------------------------------------------------------------------------------


def _in_reason_order(reasons: Iterable[str]) -> tuple[str, ...]:
    present = set(reasons)
    return tuple(r for r in conditions.CONFLICT_REASONS if r in present)


def _in_field_order(fields: Iterable[str]) -> tuple[str, ...]:
    present = set(fields)
    return tuple(f for f in FIELD_ORDER if f in present)


def format_timestamp(moment: datetime) -> str:
    """RFC 3339 in UTC: milliseconds, or microseconds when the value has sub-ms precision.

    Never rounds: two timestamps that differ print differently, so a message never shows
    a tie that precedence did not see.
    """
    utc = moment.astimezone(UTC)
    spec = "milliseconds" if utc.microsecond % 1000 == 0 else "microseconds"
    return utc.replace(tzinfo=None).isoformat(timespec=spec) + "Z"


def _why_winner(exports: Sequence[InternalServiceExportSpec]) -> str:
    winner_time, winner_id = precedence_key(exports[0])
    why = f"{winner_id} wins as the oldest export, created {format_timestamp(winner_time)}"
    if len(exports) > 1:
        runner_time, runner_id = precedence_key(exports[1])
        if runner_time == winner_time:
            why += f" (tied with {runner_id}; the tie was broken by cluster id)"
    return why


def _describe_port(port: ServicePort) -> str:
    where = f"{port.port}/{port.protocol}"
    if port.app_protocol:
        where += f" {port.app_protocol}"
    return f"{port.name} ({where})" if port.name else f"unnamed ({where})"


def _ports_phrase(ports: Sequence[ServicePort]) -> str:
    """ "port a (1/TCP)" or "ports a (1/TCP), b (2/TCP) and 3 more": at most a few named."""
    named = ", ".join(_describe_port(p) for p in ports[:_MAX_PORTS_NAMED])
    if len(ports) > _MAX_PORTS_NAMED:
        named += f" and {len(ports) - _MAX_PORTS_NAMED} more"
    return f"{'port' if len(ports) == 1 else 'ports'} {named}"


def _fields_phrase(
    fields: Sequence[str], *, own: InternalServiceExportSpec, winner: InternalServiceExportSpec
) -> str:
    """`type (Headless here, ClusterSetIP in east), exportedLabels were`: each field, with
    both values when they are short words."""
    named = []
    for name in fields:
        read = _VALUED_FIELDS.get(name)
        if read is None:
            named.append(name)
        else:
            mine, theirs = read(own) or "unset", read(winner) or "unset"
            named.append(f"{name} ({mine} here, {theirs} in "
                         f"{winner.service_reference.cluster_id})")
    verb = "was" if len(fields) == 1 else "were"
    return f"{', '.join(named)} {verb}"


def _conflict_message(
    *,
    exports: Sequence[InternalServiceExportSpec],
    cluster: str,
    disputed: tuple[str, ...],
    own_fields: tuple[str, ...],
    rejected: list[ServicePort],
    missing: list[ServicePort],
) -> str:
    head = f"Clusters disagree on {', '.join(disputed)}: {_why_winner(exports)}."
    lacking = (
        f"does not declare the import's {_ports_phrase(missing)}, whose traffic goes only "
        "to clusters that do"
    )
    if cluster == exports[0].service_reference.cluster_id:
        if missing:
            return f"{head} This cluster is the winner and its values stand, but it {lacking}."
        return f"{head} This cluster is the winner; its values stand."
    decided = [f for f in own_fields if f != PORTS_FIELD]
    parts = []
    if decided:
        own = next(e for e in exports if e.service_reference.cluster_id == cluster)
        phrase = _fields_phrase(decided, own=own, winner=exports[0])
        parts.append(f"This cluster's {phrase} overridden by the winner's")
    if rejected:
        one = len(rejected) == 1
        clause = (
            f"{_ports_phrase(rejected)} clash{'es' if one else ''} with ports of older "
            f"exports and {'was' if one else 'were'} left out of the import"
        )
        parts.append(f"its {clause}" if parts else f"This cluster's {clause}")
    if missing:
        parts.append(f"it {lacking}" if parts else f"This cluster {lacking}")
    if parts:
        return f"{head} {'; '.join(parts)}."
    if PORTS_FIELD in disputed:
        return (
            f"{head} This cluster's values are compatible with the winner's and it declares "
            "every port of the import; other clusters do not."
        )
    return (
        f"{head} This cluster's values are compatible with the winner's; "
        "the conflict is between other clusters' exports."
    )


def _no_conflict_message(exports: Sequence[InternalServiceExportSpec]) -> str:
    # Deliberately no count of clusters: a cluster joining with a matching spec must not
    # rewrite every other export's condition (see the module docstring).
    winner_time, winner_id = precedence_key(exports[0])
    return (
        f"No conflicts: every exporting cluster's spec is compatible; {winner_id}'s export "
        f"is the oldest, created {format_timestamp(winner_time)}."
    )
