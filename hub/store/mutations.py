"""What a write of InternalServiceExports means to do, and what it really changes.

Every change of an export record is a `Mutation`: a PUT (a spec, and annotations or None
to keep the stored ones), a withdrawal (no spec), or an annotation merge-patch under a
resourceVersion precondition (docs/reference.md#export-path). `plan` reads them against the rows the
writer found under its key locks and answers, without touching the database:

* each mutation's result, or the error that refuses it alone (`MutationResult.error`: a
  patch of a record that is not there, or whose resourceVersion moved);
* which records are really written (an identical re-PUT, a patch that changes nothing, a
  withdrawal of a record that is not there: nothing, no revision, no change row);
* every affected key's exports as they will be after the write, in precedence order
  (docs/reference.md#conflicts), ready for the judge: so the verdict is known BEFORE any row is
  written, and each row is written once, verdict and revision included.

Specs of a key's other exports are parsed from their stored text only when that key is
judged.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from hub.conflicts import precedence_key
from hub.store import codec
from hub.store.errors import Conflict, Invalid, NotFound, StoreError
from shared.models import InternalServiceExport, InternalServiceExportSpec, to_wire
from shared.validation import ANNOTATIONS_TOTAL_MAX, check_annotations

# A stored annotations text this short holds at most ANNOTATIONS_TOTAL_MAX bytes of keys
# and values (a character is at most 4 bytes of UTF-8, and the text holds every key and
# value whole): only a longer one is worth parsing to count.
SURELY_WITHIN = ANNOTATIONS_TOTAL_MAX // 4

Key = tuple[str, str]  # (namespace, name)
RecordId = tuple[str, str, str]  # (cluster_id, namespace, name)
StoredRow = Mapping[str, Any]  # an `exports` row as read, by column name


@dataclass(frozen=True)
class Mutation:
    """One intended change of one record."""

    cluster_id: str
    namespace: str
    name: str
    spec: InternalServiceExportSpec | None  # None: withdraw the export (unless `patch`)
    annotations: Mapping[str, str] | None = None  # None: keep the stored ones
    # A merge-patch of the stored annotations (a None value removes the key); the spec
    # stays as stored. Refused unless the record is at `resource_version`.
    patch: Mapping[str, str | None] | None = None
    resource_version: str | None = None

    @classmethod
    def annotate(
        cls,
        cluster_id: str,
        namespace: str,
        name: str,
        patch: Mapping[str, str | None],
        *,
        resource_version: str,
    ) -> Mutation:
        return cls(
            cluster_id, namespace, name, None, patch=patch, resource_version=resource_version
        )

    @property
    def record_id(self) -> RecordId:
        return (self.cluster_id, self.namespace, self.name)

    @property
    def key(self) -> Key:
        return (self.namespace, self.name)


@dataclass
class MutationResult:
    """What became of one mutation."""

    record: InternalServiceExport | None  # stored object (for a withdrawal: its last state)
    existed: bool  # the record existed before this write
    changed: bool  # the record itself took a new revision
    created: bool = False
    error: StoreError | None = None  # refused alone; nothing of it was written


@dataclass
class Entry:
    """One export of an affected key as it will be after the write."""

    rid: RecordId
    row: StoredRow | None  # as stored before the write; None for a new record
    spec_text: str
    annotations_text: str
    created_at: datetime
    change: str | None = None  # ADDED / MODIFIED when written; None: only re-judged
    columns: dict[str, Any] | None = None  # the spec columns to write (a PUT's)
    wire: dict[str, Any] | None = None  # to_wire(spec), when the write has it
    _spec: InternalServiceExportSpec | None = None

    @property
    def spec(self) -> InternalServiceExportSpec:
        if self._spec is None:
            self._spec = codec.spec_from_text(self.spec_text)
        return self._spec


@dataclass
class Plan:
    results: list[MutationResult]
    written: dict[RecordId, str] = field(default_factory=dict)  # record → change type
    withdrawn: dict[RecordId, StoredRow] = field(default_factory=dict)  # their last rows
    # Each affected key's exports after the write, in precedence order (empty: none left).
    keys: dict[Key, list[Entry]] = field(default_factory=dict)
    # Keys mutated that have no export after the write: their ServiceImport row goes.
    empty: list[Key] = field(default_factory=list)
    # Keys whose verdicts may change: an export added, withdrawn or given another spec. A
    # key written only in its annotations (the agent's docs/reference.md#export-path patch, a re-PUT
    # with new annotations) keeps its verdicts: the judge reads specs alone
    # (docs/reference.md#conflicts).
    judged: set[Key] = field(default_factory=set)


def _patched(stored_text: str, patch: Mapping[str, str | None]) -> dict[str, str]:
    patched = codec.annotations_from_text(stored_text)
    for name, value in patch.items():
        if value is None:
            patched.pop(name, None)
        else:
            patched[name] = value
    return patched


def not_found(cluster_id: str, namespace: str, name: str) -> NotFound:
    """The one wording of a missing export record (a patch here, a GET or DELETE too)."""
    return NotFound(f"InternalServiceExport {namespace}/{name} of cluster {cluster_id!r} not found")


def _refusal(m: Mutation, row: StoredRow | None) -> StoreError | None:
    """Why a patch is refused, if it is."""
    if row is None:
        return not_found(m.cluster_id, m.namespace, m.name)
    if str(row["resource_version"]) != m.resource_version:
        return Conflict(
            f"InternalServiceExport {m.namespace}/{m.name} of cluster {m.cluster_id!r} is at "
            f"resourceVersion {row['resource_version']}, not {m.resource_version!r}; "
            "read it again and retry"
        )
    return None


def annotations_refusal(text: str, field: str) -> Invalid | None:
    """Why annotations `text` (canonical JSON, as it would be stored) may not be stored:
    past Kubernetes' limits, as an importing cluster would count them
    (docs/reference.md#annotations). Every write checks what it would STORE, not only
    what its request carries: a merge patch adds to what is there, and a PUT without
    annotations keeps them. Cheap for every ordinary record (its text is short)."""
    if len(text) <= SURELY_WITHIN:
        return None
    try:
        check_annotations(codec.annotations_from_text(text), "annotations")
    except ValueError as exc:
        return Invalid(field, f"{exc}; the record would be stored so, which the hub refuses")
    return None


def plan(
    mutations: Sequence[Mutation],
    stored: Sequence[StoredRow],
    *,
    now: datetime,
    cluster_states: Mapping[str, str],
    answer_records: bool,
) -> Plan:
    """Read `mutations` (at most one per record) against `stored`, every export of their
    keys as the write found them under its locks."""
    rows = {(r["cluster_id"], r["namespace"], r["name"]): r for r in stored}
    out = Plan(results=[])
    entries: dict[RecordId, Entry] = {}
    for m in mutations:
        rid = m.record_id
        row = rows.get(rid)
        state = cluster_states.get(m.cluster_id)
        if m.patch is not None:
            error = _refusal(m, row)
            if error is not None or row is None:
                out.results.append(MutationResult(None, row is not None, False, error=error))
                continue
            text = codec.canonical_json(_patched(row["annotations"], m.patch))
            if text == row["annotations"]:
                unchanged = codec.export_model(row, cluster_state=state)
                out.results.append(MutationResult(unchanged, existed=True, changed=False))
                continue
            too_large = annotations_refusal(text, "metadata.annotations")
            if too_large is not None:
                out.results.append(MutationResult(None, True, False, error=too_large))
                continue
            entries[rid] = Entry(rid, row, row["spec"], text, row["created_at"], "MODIFIED")
            out.results.append(MutationResult(None, existed=True, changed=True))
        elif m.spec is None:
            if row is None:
                out.results.append(MutationResult(None, existed=False, changed=False))
                continue
            out.withdrawn[rid] = row
            out.written[rid] = "DELETED"  # answered with its last state by the writer
            out.results.append(MutationResult(None, existed=True, changed=True))
            continue
        else:
            wire = to_wire(m.spec)
            columns = codec.spec_columns(m.spec, wire)
            if m.annotations is not None:
                annotations = codec.canonical_json(dict(m.annotations))
            else:
                annotations = row["annotations"] if row is not None else "{}"
                # Kept as stored: stored too large by an older hub, it may not be kept
                # under a new spec (the PUT's own annotations were checked on arrival).
                kept = annotations_refusal(annotations, "metadata.annotations")
                if kept is not None and (row is None or columns["spec"] != row["spec"]):
                    out.results.append(MutationResult(None, row is not None, False, error=kept))
                    continue
            if row is not None and (columns["spec"], annotations) == (
                row["spec"],
                row["annotations"],
            ):
                # Idempotent re-PUT: nothing to write, no revision, no change row.
                record = (
                    codec.export_model(row, cluster_state=state, spec=m.spec)
                    if answer_records
                    else None
                )
                out.results.append(MutationResult(record, existed=True, changed=False))
                continue
            created = row["created_at"] if row is not None else now
            change = "MODIFIED" if row is not None else "ADDED"
            entries[rid] = Entry(
                rid, row, columns["spec"], annotations, created, change, columns, wire, m.spec
            )
            out.results.append(
                MutationResult(None, row is not None, changed=True, created=row is None)
            )
        out.written[rid] = entries[rid].change or "MODIFIED"

    affected = {(ns, n) for _, ns, n in out.written}
    for rid, row in rows.items():
        key = (rid[1], rid[2])
        if key in affected and rid not in entries and rid not in out.withdrawn:
            entries[rid] = Entry(rid, row, row["spec"], row["annotations"], row["created_at"])
    out.judged = {(ns, n) for _, ns, n in out.withdrawn} | {
        (rid[1], rid[2])
        for rid, entry in entries.items()
        if entry.row is None or entry.spec_text != entry.row["spec"]
    }
    out.keys = {key: [] for key in sorted(affected)}  # in key order: revisions follow it
    for rid, entry in entries.items():
        out.keys[(rid[1], rid[2])].append(entry)
    for group in out.keys.values():
        group.sort(key=lambda e: precedence_key(e.spec))
    mutated = {m.key for m in mutations}
    present = {(r["namespace"], r["name"]) for r in stored}
    out.empty = sorted(
        key for key in mutated if not out.keys.get(key) and (key in affected or key not in present)
    )
    return out
