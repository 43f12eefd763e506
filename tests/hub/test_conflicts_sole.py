"""The lone-export fast path of the writer equals the general judge, text for text.

`conflicts.judge_key` judges a key with one export without `judge` (`sole_verdict`) and
builds its ServiceImport documents from the export's wire dict (`sole_import_documents`);
`write_exports` builds change rows from stored texts (`codec.export_text`) instead of
dumping a model.
Each must give exactly what the general path gives, or a sync would store other
verdicts, imports or history than a PUT of the same exports.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sqlalchemy import delete, select, update

from hub import conflicts
from hub.conflicts import import_documents, judge, sole_import_documents, sole_verdict
from hub.store import Store, codec
from hub.store.tables import REVISION_ROW_ID, changes, exports, revision, service_imports
from shared.models import (
    Condition,
    InternalServiceExport,
    InternalServiceExportSpec,
    ObjectMeta,
    to_wire,
)
from tests.hub.test_conflicts import CLUSTERS, at, fields_strategy, spec
from tests.hub.test_store_support import make_export
from tests.hub.test_store_verdicts import store as verdict_store

NOW = datetime(2026, 5, 4, 3, 2, 1, 123456, tzinfo=UTC)


@settings(max_examples=300)
@given(st.sampled_from(CLUSTERS), fields_strategy, st.integers(0, 3))
def test_sole_verdict_and_import_equal_the_judge(
    cluster: str, fields: dict[str, Any], seconds: int
) -> None:
    lone = spec(cluster, created=at(seconds), **fields)
    judgement = judge([lone])
    assert sole_verdict(lone) == judgement.verdicts[cluster]
    assert judgement.reasons == ()
    assert sole_import_documents(to_wire(lone), cluster) == import_documents(judgement)


annotation_maps = st.dictionaries(
    st.sampled_from(["team", "a.example/owner", "z"]),
    st.text(max_size=8),
    max_size=3,
)


@settings(max_examples=300)
@given(
    fields_strategy,
    annotation_maps,
    st.sampled_from(
        [datetime(2026, 1, 1, tzinfo=UTC), NOW, datetime(1999, 12, 31, 23, 59, 59, 1000, UTC)]
    ),
    st.text(max_size=20),
    st.booleans(),
    st.integers(1, 2**40),
)
def test_export_text_equals_the_dumped_model(
    fields: dict[str, Any],
    annotations: dict[str, str],
    created: datetime,
    message: str,
    conflict: bool,
    rev: int,
) -> None:
    lone = spec("alpha", **fields)
    condition = Condition(
        type="Conflict",
        status="True" if conflict else "False",
        reason="TypeConflict" if conflict else "NoConflicts",
        message=message,
        observed_generation=3,
        last_transition_time=NOW,
    )
    model = InternalServiceExport(
        metadata=ObjectMeta(
            name="web",
            namespace="demo",
            resource_version=str(rev),
            creation_timestamp=created,
            annotations=annotations,
        ),
        spec=lone,
    )
    model.status.conditions = [condition]
    model.status.cluster_state = "Ready"  # never in a change row
    annotations_text = codec.canonical_json(annotations)
    assert codec.export_text(
        namespace="demo",
        name="web",
        resource_version=rev,
        created_at=created,
        annotations_text=annotations_text,
        spec_text=codec.spec_text(lone),
        condition_text=codec.condition_to_text(condition),
    ) == codec.export_to_text(model)


# --- the store: a sync stores the same rows with and without the fast path -----------------


# The `store` fixture (alpha, beta and gamma registered) is the verdict tests' own.
store = verdict_store


def _general_judge_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """Route lone exports through `judge` too, as before the fast path."""

    def verdict(lone: InternalServiceExportSpec) -> Any:
        return judge([lone]).verdicts[lone.service_reference.cluster_id]

    def documents(wire: dict[str, Any], cluster: str) -> tuple[str, str]:
        return import_documents(judge([InternalServiceExportSpec.model_validate(wire)]))

    monkeypatch.setattr(conflicts, "sole_verdict", verdict)
    monkeypatch.setattr(conflicts, "sole_import_documents", documents)


def _scenario() -> list[tuple[str, list[InternalServiceExport]]]:
    def ex(cluster: str, name: str, **kw: Any) -> InternalServiceExport:
        return make_export(cluster, name=name, **kw)

    return [
        # lone exports of every shape
        (
            "alpha",
            [
                ex("alpha", "plain"),
                ex("alpha", "shared", annotations={"team": "web"}),
                ex(
                    "alpha",
                    "rich",
                    type="Headless",
                    ipFamilies=["IPv6"],
                    exportedLabels={"tier": "db"},
                    exportedAnnotations={"n": "\u00e9\n"},
                    sessionAffinity="ClientIP",
                    sessionAffinityConfig={"clientIP": {"timeoutSeconds": 60}},
                    internalTrafficPolicy="Local",
                    trafficDistribution="PreferClose",
                    ports=[
                        {"name": "a", "port": 1, "appProtocol": "http"},
                        {"name": "b", "port": 2, "protocol": "UDP"},
                    ],
                ),
                ex("alpha", "noports", ports=[]),
                ex("alpha", "union"),
            ],
        ),
        # a second exporter joins three keys (general judge), two of them in conflict: "rich"
        # on every decided field, "union" only on its port sets (the union, a PortConflict)
        (
            "beta",
            [
                ex("beta", "shared", created=at(5)),
                ex("beta", "rich", created=at(5)),
                ex("beta", "union", created=at(5), ports=[{"name": "https", "port": 443}]),
            ],
        ),
        # alpha changes and drops one: keys with two exports and lone ones re-judged
        (
            "alpha",
            [
                ex("alpha", "plain", ports=[{"name": "http", "port": 8080}]),
                ex("alpha", "shared", annotations={"team": "edge"}),
                ex("alpha", "noports", ports=[]),
                ex("alpha", "union"),
            ],
        ),
        # beta withdraws everything: its keys go back to a lone, unwritten export, and the
        # fast path clears their conflicts ("union": its port lists shrink to alpha's)
        ("beta", []),
        ("gamma", [ex("gamma", "plain", created=at(-5))]),
    ]


async def _run_and_dump(store: Store, monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    monkeypatch.setattr("hub.store.exports.utcnow", lambda: NOW)
    # The import feed's rows carry their write time (`mcsync.io/changed-at`): one clock.
    monkeypatch.setattr("hub.store.importchanges.utcnow", lambda: NOW)
    for cluster, items in _scenario():
        await store.exports.sync(cluster, items)
    async with store.engine.connect() as conn:
        dump = []
        for table, order in (
            (exports, (exports.c.cluster_id, exports.c.namespace, exports.c.name)),
            (service_imports, (service_imports.c.namespace, service_imports.c.name)),
            (changes, (changes.c.revision,)),
        ):
            dump.append([tuple(r) for r in (await conn.execute(select(table).order_by(*order)))])
    return dump


async def _wipe(store: Store) -> None:
    async with store.engine.begin() as conn:
        for table in (exports, service_imports, changes):
            await conn.execute(delete(table))
        await conn.execute(update(revision).where(revision.c.id == REVISION_ROW_ID).values(value=0))


async def test_sync_stores_the_same_rows_as_the_general_judge(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    fast = await _run_and_dump(store, monkeypatch)
    await _wipe(store)
    with monkeypatch.context() as patched:
        _general_judge_only(patched)
        general = await _run_and_dump(store, patched)
    assert fast == general
    assert fast[2], "the scenario wrote history"
    history = [dict(zip(changes.c.keys(), row, strict=True)) for row in fast[2]]
    # every export change row is the dump of its model, as `export_from_text` reads it back
    export_texts = [c["object"] for c in history if c["kind"] == "InternalServiceExport"]
    assert export_texts
    for text in export_texts:
        assert codec.export_to_text(codec.export_from_text(text)) == text
    # "union" went through a port-set conflict, and after beta left, the fast path's import
    # is alpha's export alone: no conflict, its one port served by alpha only
    assert any(
        (c["cluster_id"], c["name"]) == ("alpha", "union") and "PortConflict" in c["object"]
        for c in history
    )
    (union,) = [
        dict(zip(service_imports.c.keys(), row, strict=True))
        for row in fast[1]
        if row[:2] == ("demo", "union")
    ]
    assert not union["conflict"]
    assert json.loads(union["status"])["ports"] == [
        {"name": "http", "protocol": "TCP", "port": 80, "clusters": ["alpha"]}
    ]
