"""Text for people and scripts, made from the shared models: cells, detail, JSON, YAML.

Every function here is pure: models (and a `now`, so ages are testable) in, text out. No
HTTP, no clock, no printing — the commands (`cli.cmd`) decide what to fetch and where the
text goes. That keeps the look of the CLI testable with plain model instances.

Tables follow `kubectl get`: upper-case headers, columns left-aligned and separated by
three spaces, `<none>` for an empty cell, ages exactly as kubectl prints them (`45s`,
`3m12s`, `5h`, `2d3h`, `120d`). Which columns a list shows is its command's, declared as
a list of columns (`cli.columns`); the cell formats they share are here. JSON and YAML are
the objects exactly as the hub sends them (`shared.models.to_wire`), so they parse back
into the same models.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from pydantic import BaseModel

from cli import jsonpath
from cli.terminal import json_safe, yaml_dump
from shared.conditions import CONFLICT, TRUE
from shared.models import (
    Condition,
    Endpoint,
    EndpointPort,
    EndpointSliceExport,
    ImportPortStatus,
    InternalServiceExport,
    MemberCluster,
    ServiceImport,
    ServicePort,
    VersionInfo,
    WireModel,
    to_wire,
)
from shared.timefmt import format_millis, human_duration
from shared.version import __version__

NONE = "<none>"
COLUMN_GAP = "   "
EMPTY_MESSAGE = "No resources found."
MAX_LISTED_CLUSTERS = 3

Cells = tuple[str, ...]


@dataclass(frozen=True)
class Table:
    """Headers and rows of strings; `format_table` lays them out."""

    headers: Cells
    rows: tuple[Cells, ...]

    def widths(self) -> tuple[int, ...]:
        return tuple(
            max([len(self.headers[i]), *(len(row[i]) for row in self.rows)])
            for i in range(len(self.headers))
        )


def format_row(cells: Sequence[str], widths: Sequence[int]) -> str:
    """One line: each cell padded to its column's width; a longer cell pushes the rest."""
    padded = [cell.ljust(width) for cell, width in zip(cells, widths, strict=False)]
    padded.extend(cells[len(widths):])
    return COLUMN_GAP.join(padded).rstrip()


def format_table(table: Table, *, headers: bool = True) -> str:
    """The header line (unless `headers` is false: `--no-headers`) and one line per row,
    aligned; ends with a newline (nothing at all for no lines)."""
    widths = table.widths()
    lines = [format_row(table.headers, widths)] if headers else []
    lines.extend(format_row(row, widths) for row in table.rows)
    return "".join(line + "\n" for line in lines)


def listing_output(table: Table, *, headers: bool = True) -> tuple[str, str]:
    """(stdout, stderr) of a listing: the table, or `No resources found.` on stderr only,
    so that a pipe reading stdout sees nothing rather than a sentence."""
    if not table.rows:
        return "", EMPTY_MESSAGE + "\n"
    return format_table(table, headers=headers), ""


def name_of(obj: BaseModel) -> str:
    """`-o name`: KIND/REF, the REF being what `mcsync get KIND` takes (`export/east/demo/
    web`), so a script can feed one command's names to the next."""
    if isinstance(obj, MemberCluster):
        return f"cluster/{obj.metadata.name}"
    if isinstance(obj, InternalServiceExport):
        ref = obj.spec.service_reference
        return f"export/{ref.cluster_id}/{ref.namespace}/{ref.name}"
    if isinstance(obj, ServiceImport):
        return f"import/{obj.metadata.namespace}/{obj.metadata.name}"
    if isinstance(obj, EndpointSliceExport):
        return (f"endpointslice/{obj.spec.cluster_id}/{obj.metadata.namespace}/"
                f"{obj.metadata.name}")
    raise TypeError(f"no name form for {type(obj).__name__}")


# --- cell formats ---------------------------------------------------------------------


def age(moment: datetime | None, *, now: datetime) -> str:
    """The age of `moment` at `now` as kubectl prints it (`human_duration`)."""
    if moment is None:
        return NONE
    return human_duration((now - moment).total_seconds())


def timestamp(moment: datetime | None) -> str:
    return format_millis(moment) if moment is not None else NONE


def ports(items: Iterable[ServicePort | ImportPortStatus]) -> str:
    """`80/TCP,443/TCP`, as `kubectl get service` shows PORT(S)."""
    text = ",".join(f"{p.port}/{p.protocol}" for p in items)
    return text or NONE


def names(items: Sequence[str], *, limit: int = MAX_LISTED_CLUSTERS) -> str:
    """`a,b,c` or, past `limit`, `a,b,c + 2 more...` (kubectl's ENDPOINTS style)."""
    if not items:
        return NONE
    shown = ",".join(items[:limit])
    rest = len(items) - limit
    return f"{shown} + {rest} more..." if rest > 0 else shown


def labels(values: Mapping[str, str] | None) -> str:
    if not values:
        return NONE
    return ",".join(f"{key}={values[key]}" for key in sorted(values))


def or_none(value: object) -> str:
    return NONE if value is None or value == "" else str(value)


def conflict_condition(export: InternalServiceExport) -> Condition | None:
    return export.condition(CONFLICT)


# --- endpoint slices (cells of `cli.cmd.endpoints`) ---------------------------------


def is_ready(endpoint: Endpoint) -> bool:
    """Kubernetes' reading of `conditions.ready`: unset means ready (EndpointSlice API)."""
    return endpoint.conditions.ready is not False


def endpoint_counts(item: EndpointSliceExport) -> str:
    """`ready/total`, as `kubectl get deployment` shows READY."""
    endpoints = item.spec.endpoints
    return f"{sum(1 for e in endpoints if is_ready(e))}/{len(endpoints)}"


def endpoint_ports(items: Iterable[EndpointPort]) -> str:
    """`80/TCP,53/UDP`; a port left unset (all ports) reads `<unset>`, as in kubectl."""
    text = ",".join(
        f"{p.port if p.port is not None else '<unset>'}/{p.protocol}" for p in items
    )
    return text or NONE


# --- conflicts ------------------------------------------------------------------------


@dataclass(frozen=True)
class ConflictView:
    """One conflicting service as `mcsync conflicts` shows it."""

    namespace: str
    name: str
    winner: str | None
    reasons: tuple[str, ...]
    losing_clusters: tuple[str, ...]
    since: datetime | None
    exports: int


def _precedence(export: InternalServiceExport) -> tuple[datetime, str]:
    """docs/reference.md#conflicts order: oldest exportCreationTimestamp first, ties by
    clusterId."""
    ref = export.spec.service_reference
    return ref.export_creation_timestamp, ref.cluster_id


def conflict_views(
    imports: Iterable[ServiceImport], exports: Iterable[InternalServiceExport]
) -> list[ConflictView]:
    """Join conflicting imports with their exports (one listing of each, no query per key).

    The import says who won and which fields are disputed; the exports say since when
    (the oldest `lastTransitionTime` of a `Conflict=True` condition of the key). Where the
    import omits the winner or its clusters, the exports stand in, ordered as
    docs/reference.md#conflicts orders them.
    """
    by_key: dict[tuple[str, str], list[InternalServiceExport]] = {}
    for export in exports:
        ref = export.spec.service_reference
        by_key.setdefault((ref.namespace, ref.name), []).append(export)
    views = []
    for item in imports:
        if not item.status.conflicts:
            continue
        key = (item.metadata.namespace or "", item.metadata.name)
        ordered = sorted(by_key.get(key, []), key=_precedence)
        winner = item.status.winning_cluster or (
            ordered[0].spec.service_reference.cluster_id if ordered else None
        )
        clusters = [c.cluster for c in item.status.clusters] or [
            e.spec.service_reference.cluster_id for e in ordered
        ]
        since_candidates = [
            c.last_transition_time
            for c in (conflict_condition(e) for e in ordered)
            if c is not None and c.status == TRUE and c.last_transition_time is not None
        ]
        views.append(
            ConflictView(
                namespace=key[0],
                name=key[1],
                winner=winner,
                reasons=tuple(item.status.conflicts),
                losing_clusters=tuple(c for c in clusters if c != winner),
                since=min(since_candidates, default=None),
                exports=len(clusters),
            )
        )
    return views


# --- detail (the default of `mcsync get`) ----------------------------------------------


def _fields(pairs: Sequence[tuple[str, str]]) -> list[str]:
    width = max(len(label) for label, _ in pairs) + 1
    return [f"{(label + ':').ljust(width)}  {value}" for label, value in pairs]


def _indented(table: Table, indent: str = "  ") -> list[str]:
    return [indent + line for line in format_table(table).splitlines()]


def _conditions_table(conditions: Sequence[Condition], *, now: datetime) -> Table:
    return Table(
        ("TYPE", "STATUS", "REASON", "AGE", "MESSAGE"),
        tuple(
            (c.type, c.status, c.reason, age(c.last_transition_time, now=now), c.message)
            for c in conditions
        ),
    )


def _port_lines(items: Sequence[ServicePort]) -> str:
    if not items:
        return NONE
    return ", ".join(
        f"{p.name + ' ' if p.name else ''}{p.port}/{p.protocol}"
        + (f" ({p.app_protocol})" if p.app_protocol else "")
        for p in items
    )


def describe_export(export: InternalServiceExport, *, now: datetime) -> str:
    """A `kubectl describe`-like page of one export: the facts an operator asks first."""
    spec = export.spec
    ref = spec.service_reference
    state = export.status.cluster_state
    lines = _fields(
        [
            ("Name", export.metadata.name),
            ("Namespace", export.metadata.namespace or ref.namespace),
            ("Cluster", ref.cluster_id + (f" ({state})" if state else "")),
            ("Type", spec.type),
            ("Ports", _port_lines(spec.ports)),
            ("Session affinity", spec.session_affinity),
            ("IP families", ",".join(spec.ip_families) or NONE),
            ("Exported labels", labels(spec.exported_labels)),
            ("Exported annotations", labels(spec.exported_annotations)),
            ("Export created", timestamp(ref.export_creation_timestamp)),
            ("Exported since", timestamp(ref.exported_since)),
            ("Service", f"uid {ref.uid or NONE}, resourceVersion {ref.resource_version}"),
            ("Resource version", or_none(export.metadata.resource_version)),
            ("Age", age(export.metadata.creation_timestamp, now=now)),
            ("Annotations", labels(export.metadata.annotations)),
        ]
    )
    lines.append("Conditions:")
    if export.status.conditions:
        lines.extend(_indented(_conditions_table(export.status.conditions, now=now)))
    else:
        lines.append(f"  {NONE}")
    return "\n".join(lines) + "\n"


def describe_cluster(cluster: MemberCluster, *, now: datetime) -> str:
    """A `kubectl describe`-like page of one member cluster."""
    status = cluster.status
    lines = _fields(
        [
            ("Name", cluster.metadata.name),
            ("State", status.state),
            ("Last heartbeat", timestamp(status.last_heartbeat_time)
             + (f" ({age(status.last_heartbeat_time, now=now)} ago)"
                if status.last_heartbeat_time else "")),
            ("Agent version", or_none(status.agent_version)),
            ("Exports", str(status.export_count)),
            ("Conflicts", str(status.conflict_count)),
            ("Imports", "<none>" if status.imported_services is None
             else f"{status.imported_services} ServiceImports, "
                  f"{status.imported_endpoints or 0} endpoints"),
            ("Endpoints", "withdrawn: the fleet sends it no traffic until its next heartbeat"
             if status.endpoints_withdrawn else "served"),
            ("Labels", labels(cluster.metadata.labels)),
            ("Export scope", _scope(cluster.spec.export_namespaces)),
            ("Import scope", _scope(cluster.spec.import_namespaces)),
            *(
                [("Properties", "<not reported yet>" if status.properties is None else NONE)]
                if not status.properties
                else []
            ),
            ("Registered", timestamp(cluster.metadata.creation_timestamp)),
            ("Age", age(cluster.metadata.creation_timestamp, now=now)),
            *([] if status.conditions else [("Conditions", NONE)]),
        ]
    )
    # WithdrawalHeld (docs/reference.md#failover): what to do is in its message
    if status.conditions:
        lines.append("Conditions:")
        lines.extend(_indented(_conditions_table(status.conditions, now=now)))
    lines.extend(_properties(status.properties))
    return "\n".join(lines) + "\n"


def _properties(properties: Mapping[str, str] | None) -> list[str]:
    """The cluster's ClusterProperty objects (docs/reference.md#cluster-properties), one
    `name=value` a line by name; a value is shown as JSON when it holds a character a
    terminal would act on, so a property can never rewrite the page around it."""
    if not properties:
        return []  # said among the fields
    out = ["Properties:"]
    for name in sorted(properties):
        value = properties[name]
        shown = value if value.isprintable() else json.dumps(value)
        out.append(f"  {name}={shown}")
    return out


def _scope(patterns: list[str] | None) -> str:
    """A cluster's scope list (docs/reference.md#scope-and-limits) as `describe` shows it."""
    if patterns is None:
        return "every namespace"
    return ", ".join(patterns) if patterns else "no namespace"


def describe_import(item: ServiceImport, *, now: datetime) -> str:
    """A `kubectl describe`-like page of one ServiceImport: who exports it, which ports."""
    spec, status = item.spec, item.status
    lines = _fields(
        [
            ("Name", item.metadata.name),
            ("Namespace", or_none(item.metadata.namespace)),
            ("Type", spec.type),
            ("Ports", _port_lines(spec.ports)),
            ("Session affinity", spec.session_affinity),
            ("IP families", ",".join(spec.ip_families) or NONE),
            ("Labels", labels(spec.labels)),
            ("Winning cluster", or_none(status.winning_cluster)),
            ("Conflicts", ",".join(status.conflicts) or NONE),
            ("Resource version", or_none(item.metadata.resource_version)),
            ("Age", age(item.metadata.creation_timestamp, now=now)),
        ]
    )
    lines.append("Clusters:")
    if status.clusters:
        lines.extend(
            _indented(
                Table(
                    ("CLUSTER", "STATE"),
                    tuple((c.cluster, or_none(c.state)) for c in status.clusters),
                )
            )
        )
    else:
        lines.append(f"  {NONE}")
    lines.append("Port clusters:")
    if status.ports:
        lines.extend(
            _indented(
                Table(
                    ("NAME", "PORT", "CLUSTERS"),
                    tuple(
                        (or_none(p.name), f"{p.port}/{p.protocol}", ",".join(p.clusters) or NONE)
                        for p in status.ports
                    ),
                )
            )
        )
    else:
        lines.append(f"  {NONE}")
    return "\n".join(lines) + "\n"


# --- version --------------------------------------------------------------------------

CLIENT_VERSION = __version__


class VersionReport(WireModel):
    """`mcsync version -o json|yaml`: this client's version and the hub's answer."""

    client_version: str
    server: VersionInfo | None = None


# --- machine formats ------------------------------------------------------------------


def to_json(model: BaseModel) -> str:
    """Indented JSON of the object as the hub sends it; ends with a newline."""
    return json_safe(json.dumps(to_wire(model), indent=2, ensure_ascii=False)) + "\n"


def to_json_line(model: BaseModel) -> str:
    """One compact line (for watch streams: one object per line)."""
    return json_safe(json.dumps(to_wire(model), separators=(",", ":"), ensure_ascii=False)) + "\n"


def event_json_line(event_type: str, model: BaseModel) -> str:
    """One watch event as a compact line, `{"type": …, "object": …}`, for any object (a
    MemberCluster included, which the hub's WatchEvent does not carry)."""
    event = {"type": event_type, "object": to_wire(model)}
    return json_safe(json.dumps(event, separators=(",", ":"), ensure_ascii=False)) + "\n"


def event_yaml(event_type: str, model: BaseModel) -> str:
    """One watch event as a YAML document (with its `---`)."""
    event: Any = {"type": event_type, "object": to_wire(model)}
    return "---\n" + yaml_dump(event)


def to_jsonpath(template: str, model: BaseModel) -> str:
    """`-o jsonpath=…` of the object as the hub sends it (LookupError: a path names
    nothing)."""
    return jsonpath.render(jsonpath.parse(template), to_wire(model))


def to_yaml(model: BaseModel) -> str:
    """YAML of the object as the hub sends it (strings that look like dates stay quoted)."""
    data: Any = to_wire(model)
    return yaml_dump(data)
