"""What a write's judgement changes (step 3 of `writer`): the records that take a revision
and the ServiceImport rows to store.

`mutations.plan` says what each affected key's exports will be; `judge_plan` judges them
(`conflicts.judge_key`, spanned and timed as one conflict resolution,
docs/reference.md#observability); then:

* `verdict_changes`: every record written takes a revision, and so does every other
  export of its key whose Conflict condition now reads differently (`same_verdict`):
  an unrelated cluster joining an agreeing key changes nobody else's record;
* `import_rows`: a key's ServiceImport is stored only when its spec or status text
  changed, or it is new.

All of it before any row is written, so each row is written once.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from hub.conflicts import KeyVerdicts, judge_key, same_verdict
from hub.store import codec
from hub.store.context import StoreInstruments
from hub.store.locks import KeyRow
from hub.store.mutations import Entry, Key, Plan, RecordId
from shared.models import Condition


def judge_plan(instruments: StoreInstruments, p: Plan) -> dict[Key, KeyVerdicts]:
    """Judge each affected key that keeps exports and whose specs change; spanned and timed
    (docs/reference.md#observability). A write of annotations alone judges nothing: no span, no
    sample."""
    affected = sorted(key for key in p.keys if key in p.judged)
    if not affected:
        return {}
    with instruments.resolving(affected) as span:
        judged = {
            key: judge_key(
                [e.spec for e in group], wires={e.rid[0]: e.wire for e in group if e.wire}
            )
            for key in affected
            if (group := p.keys[key])
        }
        span.set_attribute("mcsync.export_count", sum(len(p.keys[k]) for k in affected))
        span.set_attribute(
            "mcsync.conflicting_key_count", sum(bool(j.reasons) for j in judged.values())
        )
        if len(judged) == 1:
            (only,) = judged.values()
            span.set_attribute("mcsync.conflict", bool(only.reasons))
            span.set_attribute("mcsync.reasons", ",".join(only.reasons))
    return judged


@dataclass(frozen=True)
class Change:
    """A record that takes a revision: written, or re-judged into another verdict."""

    rid: RecordId
    type: str  # ADDED / MODIFIED / DELETED
    entry: Entry | None  # None for a withdrawal
    condition: Condition | None
    reasons: str  # the key's reasons when this export conflicts, else ""


def verdict_changes(
    p: Plan, judged: Mapping[Key, KeyVerdicts], now: datetime, *, order: Mapping[RecordId, int]
) -> list[Change]:
    """The records taking a revision: written ones in the mutations' order, then the
    re-judged ones by key."""
    changes = [Change(rid, "DELETED", None, None, "") for rid in p.withdrawn]
    for key, group in p.keys.items():
        if key not in judged:  # annotations alone: each written record keeps its verdict
            changes.extend(
                Change(
                    e.rid,
                    e.change,
                    e,
                    codec.condition_from_text(e.row["condition"]),
                    e.row["conflict_reasons"],
                )
                for e in group
                if e.change is not None and e.row is not None
            )
            continue
        for entry in group:
            verdicts = judged[key]
            verdict = verdicts.verdicts[entry.rid[0]]
            previous = (
                None if entry.row is None else codec.condition_from_text(entry.row["condition"])
            )
            condition = verdict.condition(
                key_reasons=verdicts.reasons,
                observed_generation=entry.spec.service_reference.generation,
                now=now,
                previous=previous,
            )
            if entry.change is not None or not same_verdict(previous, condition):
                reasons = ",".join(verdicts.reasons) if verdict.conflict else ""
                changes.append(
                    Change(entry.rid, entry.change or "MODIFIED", entry, condition, reasons)
                )
    changes.sort(key=lambda c: (order.get(c.rid, len(order)), c.rid[1], c.rid[2], c.rid[0]))
    return changes


def import_rows(
    judged: Mapping[Key, KeyVerdicts], before: Mapping[Key, KeyRow], now: datetime
) -> list[dict[str, Any]]:
    """The ServiceImport rows whose documents change (or that are new)."""
    upserts = []
    for key, verdicts in judged.items():
        spec_text, status_text = verdicts.import_texts
        stored = before.get(key)
        created_at = None if stored is None else stored["created_at"]
        if stored is not None and created_at is not None:
            if (stored["spec"], stored["status"]) == verdicts.import_texts:
                continue
        upserts.append(
            {
                "namespace": key[0],
                "name": key[1],
                "spec": spec_text,
                "status": status_text,
                "conflict": bool(verdicts.reasons),
                "resource_version": 0,  # its change row's revision, once allocated
                "created_at": created_at or now,
            }
        )
    return upserts
