"""Conversions between the wire models of `shared.models` and the store's rows.

JSON goes into the database in one canonical form (sorted keys, compact separators, the
camelCase wire shape with nulls left out), so equal values are equal strings: SQL can
compare a decided property with the winner's, and an idempotent re-PUT is recognised by
comparing text.

Read-time facts (a cluster's Ready/Stale state) are *not* stored; they are filled in
here from the cluster's last heartbeat when a row is turned back into a model.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import datetime
from typing import Any

import orjson
from pydantic import TypeAdapter

from hub.store.clusterstate import export_cluster_state
from shared import constants, properties
from shared.models import (
    Condition,
    InternalServiceExport,
    InternalServiceExportSpec,
    InternalServiceExportStatus,
    ObjectMeta,
    ServiceImportStatus,
    to_wire,
)

_CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False)
_ORJSON_CANONICAL = orjson.OPT_SORT_KEYS


def canonical_json(value: Any) -> str:
    """The one text form of a JSON value the store writes.

    The text is the stdlib's `json` with sorted keys, compact separators and no ASCII
    escaping: every stored spec, annotation and condition already has this form, and an
    export is recognised as unchanged by comparing text, so the form must never drift.
    orjson writes the same bytes for every value the store holds (strings, ints of at most
    64 bits, bools, null, lists, string-keyed dicts; `tests/hub/test_codec.py` checks every
    code point and the key order) at a tenth of the cost, which a 10,000-export sync pays
    six times per export. Floats are the one JSON type whose spelling differs between the
    two (`1e+16` against `1e16`), and no wire model has a float. What orjson refuses (a
    lone surrogate, a larger int, a non-string key, nesting past 254 levels) goes to the
    stdlib encoder, which decides as it always did.
    """
    try:
        return orjson.dumps(value, option=_ORJSON_CANONICAL).decode()
    except TypeError:  # orjson.JSONEncodeError is a TypeError
        return _CANONICAL.encode(value)


# The `exports` columns that hold the spec: the precedence timestamp, each property of the
# one table (`shared.properties`) in its own column, and the whole spec.
SPEC_COLUMNS: tuple[str, ...] = (
    "export_creation_timestamp",
    *(p.column for p in properties.PROPERTIES),
    "spec",
)


def property_column(prop: properties.ImportProperty, wire: Mapping[str, Any]) -> str | None:
    """What `prop`'s column holds for an export spec's wire dict: the word, or the
    canonical JSON of its value; NULL (None) for an absent value where the column allows."""
    value = prop.wire_value(wire)
    if prop.storage is properties.Storage.WORD:
        return None if value is None else str(value)
    if value is None and prop.storage is properties.Storage.JSON_OR_NULL:
        return None
    return canonical_json(value)


# (column, export wire field or None for a property of several, stored as a word, its
# absent value): the table read once, so that each write reads a wire dict's fields
# without a call per property (`spec_columns` runs once per written export).
_PLAN: tuple[tuple[properties.ImportProperty, str, str | None, bool, Any], ...] = tuple(
    (
        prop,
        prop.column,
        prop.export_names[0] if len(prop.export_names) == 1 else None,
        prop.storage is properties.Storage.WORD,
        prop.absent,
    )
    for prop in properties.PROPERTIES
)


def spec_columns(
    spec: InternalServiceExportSpec, wire: dict[str, Any] | None = None
) -> dict[str, Any]:
    """The `exports` columns that hold the spec: each property of the table, the whole.

    `wire` is `to_wire(spec)` when the caller has it already (the writer keeps it for a
    lone export's ServiceImport): dumping a spec costs as much as all the texts.
    """
    if wire is None:
        wire = to_wire(spec)
    columns: dict[str, Any] = {
        "export_creation_timestamp": spec.service_reference.export_creation_timestamp,
    }
    for prop, column, name, word, absent in _PLAN:
        if name is None:
            columns[column] = property_column(prop, wire)
            continue
        value = wire.get(name)
        if word:
            columns[column] = value if value is not None else absent
        else:
            columns[column] = canonical_json(absent if value is None else value)
    columns["spec"] = canonical_json(wire)
    return columns


def spec_text(spec: InternalServiceExportSpec) -> str:
    """The `spec` column of `spec_columns` alone (what an unchanged re-PUT compares)."""
    return canonical_json(to_wire(spec))


def condition_from_text(text: str | None) -> Condition | None:
    return None if text is None else Condition.model_validate_json(text)


def condition_to_text(condition: Condition) -> str:
    return canonical_json(to_wire(condition))


def annotations_from_text(text: str | None) -> dict[str, str]:
    return dict(json.loads(text)) if text else {}


def export_model(
    row: Mapping[Any, Any],
    *,
    cluster_state: str | None = None,
    spec: InternalServiceExportSpec | None = None,
) -> InternalServiceExport:
    """The InternalServiceExport of an `exports` row (`spec` when already parsed)."""
    condition = condition_from_text(row["condition"])
    return InternalServiceExport(
        metadata=stored_meta(
            name=row["name"],
            namespace=row["namespace"],
            resource_version=str(row["resource_version"]),
            creation_timestamp=row["created_at"],
            annotations=annotations_from_text(row["annotations"]),
        ),
        spec=spec if spec is not None else spec_from_text(row["spec"]),
        status=InternalServiceExportStatus(
            conditions=[condition] if condition is not None else [],
            cluster_state=cluster_state,
        ),
    )


def stored_meta(*, annotations: dict[str, str], **fields: Any) -> ObjectMeta:
    """The metadata of a stored record, its annotations taken as stored, not judged again.

    What the hub stores now is within Kubernetes' limits (every write checks what it
    would store), but an older hub stored an annotation merge patch without checking the
    merged result: such a record must still be read, listed, watched and withdrawn
    (the startup check reports it, `oversized_exports`), not fail every read with it."""
    meta = ObjectMeta(**fields)
    meta.annotations = annotations  # assignment is not validated (no validate_assignment)
    return meta


def spec_from_text(text: str) -> InternalServiceExportSpec:
    return InternalServiceExportSpec.model_validate_json(text)


def export_to_text(export: InternalServiceExport) -> str:
    """The JSON a `changes` row keeps (without the read-time cluster state)."""
    wire = to_wire(export)
    wire.get("status", {}).pop("clusterState", None)
    return canonical_json(wire)


_TIMESTAMP: TypeAdapter[datetime] = TypeAdapter(datetime)


def export_text(
    *,
    namespace: str,
    name: str,
    resource_version: int | str,
    created_at: datetime,
    annotations_text: str | None,
    spec_text: str,
    condition_text: str,
) -> str:
    """`export_to_text` of the export these stored texts make, without building it.

    The same text byte for byte (`tests/hub/test_codec.py`): `spec_text`,
    `annotations_text` and `condition_text` are canonical already, and canonical text
    nests verbatim inside a canonical document (keys sorted at every depth), so they go
    in as orjson fragments instead of being parsed into models and dumped again, once per
    changed record.
    """
    metadata: dict[str, Any] = {
        "name": name,
        "namespace": namespace,
        "resourceVersion": str(resource_version),
        "creationTimestamp": _TIMESTAMP.dump_python(created_at, mode="json"),
    }
    try:
        return orjson.dumps(
            {
                "apiVersion": constants.API_VERSION,
                "kind": constants.KIND_EXPORT,
                "metadata": {**metadata, "annotations": orjson.Fragment(annotations_text or "{}")},
                "spec": orjson.Fragment(spec_text),
                "status": {"conditions": [orjson.Fragment(condition_text)]},
            },
            option=_ORJSON_CANONICAL,
        ).decode()
    except TypeError:  # what orjson refuses, the stdlib writes (see canonical_json)
        return canonical_json(
            {
                "apiVersion": constants.API_VERSION,
                "kind": constants.KIND_EXPORT,
                "metadata": {**metadata, "annotations": annotations_from_text(annotations_text)},
                "spec": json.loads(spec_text),
                "status": {"conditions": [json.loads(condition_text)]},
            }
        )


def export_from_text(text: str, *, cluster_state: str | None = None) -> InternalServiceExport:
    """A history row's record (its annotations as stored, `stored_meta`)."""
    document = json.loads(text)
    metadata = document.get("metadata") or {}
    annotations = metadata.pop("annotations", None)
    export = InternalServiceExport.model_validate(document)
    if annotations is not None:
        export.metadata.annotations = dict(annotations)
    if cluster_state is not None:
        export.status.cluster_state = cluster_state
    return export


def import_status_with_states(status_text: str, states: Mapping[str, str]) -> ServiceImportStatus:
    """The stored ServiceImport status with each cluster's read-time state filled in."""
    status = ServiceImportStatus.model_validate_json(status_text)
    for entry in status.clusters:
        entry.state = export_cluster_state(states.get(entry.cluster, "Ready"))
    return status
