"""Step 5 of `writer`: each change, stamped with its revision, as the rows to write once.

By the time a write gets here everything is decided: the plan (`mutations`) says which
records change and how, the judge (`verdicts`) says each one's condition, and the
revisions are taken (`locks.take_revisions`). What is left is bookkeeping, kept apart so
that `writer.write_exports` reads as the plan and nothing else:

* `stamp`: each change's `exports` row, whole (to insert, to update with a new spec, or
  to stamp with a new verdict only), and its change row for the feed. The change row's
  text is built from the texts at hand (`codec.export_text`), byte for byte what dumping
  the record's model would give, without building it;
* `answer`: each changed record's result gets its stored object, with its cluster's
  read-time state, for the caller to answer with.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from hub.store import codec
from hub.store.mutations import Entry, Mutation, Plan
from hub.store.revisions import ChangeRecord
from hub.store.rows import PENDING_REVISION
from hub.store.verdicts import Change
from shared.models import (
    Condition,
    InternalServiceExport,
    InternalServiceExportStatus,
    ObjectMeta,
)

Row = dict[str, Any]


@dataclass
class StampedRows:
    """What a write stores for its changes, each row whole, verdict and revision included."""

    history: list[tuple[int, ChangeRecord]] = field(default_factory=list)  # (revision, row)
    inserts: list[Row] = field(default_factory=list)  # new records
    updates: list[Row] = field(default_factory=list)  # records with a new spec or annotations
    stamps: list[Row] = field(default_factory=list)  # records re-judged: a new verdict only


def stamp(
    p: Plan,
    changes: Sequence[Change],
    first: int,
    *,
    answer_records: bool,
    pending: bool = False,
) -> StampedRows:
    """Each change's rows, the changes taking revisions `first`, `first + 1`, … in order.

    With `answer_records=False` no model is built for a changed record (a sync only counts
    its results, and a model per record was a tenth of its time). `pending`: the revisions
    are not taken yet (`locks.take_revisions_and_write`): `first` counts from 1, each text
    holds `PENDING_REVISION` where its revision goes, and `settle` gives the models
    theirs once taken."""
    out = StampedRows()
    for rev, change in enumerate(changes, start=first):
        cid, ns, name = change.rid
        shown: int | str = PENDING_REVISION if pending else rev
        entry, condition = change.entry, change.condition
        if entry is None or condition is None:  # a withdrawal keeps the record's last state
            gone = codec.export_model(p.withdrawn[change.rid])
            gone.metadata.resource_version = str(shown)
            record = ChangeRecord("DELETED", cid, ns, name, gone)
            if pending:  # its text now, with the mark; the model gets its revision later
                record = dataclasses.replace(record, text=record.object_text())
            out.history.append((rev, record))
            continue
        condition_text = codec.condition_to_text(condition)
        row_id = {"cluster_id": cid, "namespace": ns, "name": name}
        verdict = {
            "annotations": entry.annotations_text,
            "condition": condition_text,
            "conflict": condition.status == "True",
            "conflict_reasons": change.reasons,
            "resource_version": rev,
        }
        if entry.row is None:
            out.inserts.append(
                {**row_id, **(entry.columns or {}), **verdict, "created_at": entry.created_at}
            )
        elif entry.columns is not None:
            out.updates.append({**row_id, **entry.columns, **verdict})
        else:
            out.stamps.append({**row_id, **verdict})
        text = codec.export_text(
            namespace=ns,
            name=name,
            resource_version=shown,
            created_at=entry.created_at,
            annotations_text=entry.annotations_text,
            spec_text=entry.spec_text,
            condition_text=condition_text,
        )
        model = _model(entry, condition, rev) if answer_records else None
        out.history.append((rev, ChangeRecord(change.type, cid, ns, name, model, text=text)))
    return out


def settle(history: Sequence[tuple[int, ChangeRecord]], before: int) -> None:
    """The models of `stamp(…, pending=True)`'s history with their revisions, now taken:
    `before` is the revision before the first the write took."""
    for rev, record in history:
        if record.object is not None:
            record.object.metadata.resource_version = str(before + rev)


def _model(entry: Entry, condition: Condition, rev: int) -> InternalServiceExport:
    """The record as stored, built without validation: its name and namespace come from a
    validated request or row, its spec is a validated model, its annotations are stored
    canonical text, its condition the judge's (validating them again was a tenth of a
    group-committed PUT's store CPU)."""
    return InternalServiceExport.model_construct(
        metadata=ObjectMeta.model_construct(
            name=entry.rid[2],
            namespace=entry.rid[1],
            resource_version=str(rev),
            creation_timestamp=entry.created_at,
            annotations=codec.annotations_from_text(entry.annotations_text),
        ),
        spec=entry.spec,
        status=InternalServiceExportStatus.model_construct(conditions=[condition]),
    )


def answer(
    mutations: Sequence[Mutation],
    p: Plan,
    history: Sequence[tuple[int, ChangeRecord]],
    states: Mapping[str, str],
) -> None:
    """Give each changed record's result its stored object, with its cluster's state."""
    stored = {(c.cluster_id, c.namespace, c.name): c.object for _, c in history}
    for m, result in zip(mutations, p.results, strict=True):
        obj = stored.get(m.record_id)
        if not result.changed or obj is None:
            continue
        state = states.get(m.cluster_id)
        if state is not None:
            # The answer's own status, the rest shared: the history's object (read by
            # the feed) must not carry a read-time state, and a deep copy of the whole
            # record was 15 % of a PUT's CPU (bench/put_throughput profile).
            status = obj.status.model_copy(update={"cluster_state": state})
            obj = obj.model_copy(update={"status": status})
        result.record = obj
