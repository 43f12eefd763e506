"""The one table of ServiceImport properties drives the judge, the codec, the agent's held
import and the words people read: each test iterates the table, so a row added without
what it needs (a sample of two differing values here, a column, a held attribute, words)
fails here rather than quietly in one of the places derived from it."""

from __future__ import annotations

from typing import Any

import pytest

from cli import conflictpage
from hub.conflicts import judge
from hub.store import codec
from hub.store.tables import exports
from member.imports.importspec import HeldImport
from shared import conditions, properties
from shared.models import (
    ExportConflict,
    InternalServiceExport,
    ObjectMeta,
    PropertyConflict,
    ServiceImport,
    ServiceImportSpec,
    to_wire,
)
from tests.hub.test_conflicts import T0, at, spec

EU = {"propertySelector": {"matchExpressions": [], "matchProperties": {"region": "eu"}}}

# Two values of each decided property that differ (the winner's first), in wire form.
SAMPLES: dict[str, tuple[Any, Any]] = {
    "type": ("ClusterSetIP", "Headless"),
    "sessionAffinity": ("None", "ClientIP"),
    "sessionAffinityConfig": (
        {"clientIP": {"timeoutSeconds": 100}},
        {"clientIP": {"timeoutSeconds": 200}},
    ),
    "internalTrafficPolicy": ("Cluster", "Local"),
    "trafficDistribution": (None, "PreferClose"),
    "exportedLabels": ({"tier": "web"}, {"tier": "api"}),
    "exportedAnnotations": ({}, {"owner": "team-b"}),
    "clusterSelectors": (
        {"clusterSelectors": [EU]},
        {
            "clusterSelectors": [EU],
            "clusterSelection": {
                "failbackDelaySeconds": 30,
                "fallback": "None",
                "minReadyEndpoints": 1,
                "minReadyPercent": 0,
            },
            "importClusters": {
                "matchExpressions": [{"key": "region", "operator": "Exists", "values": []}],
                "matchProperties": {},
            },
        },
    ),
}


def sample_fields(prop: properties.ImportProperty, value: Any) -> dict[str, Any]:
    """The wire fields of an export spec that give `prop` the wire `value`."""
    if value is None:
        return {}
    if len(prop.fields) == 1:
        return {prop.fields[0][0]: value}
    return dict(value)


DECIDED = [pytest.param(p, id=p.name) for p in properties.DECIDED]


def test_every_decided_row_has_a_sample() -> None:
    assert set(SAMPLES) == {p.name for p in properties.DECIDED}


def test_the_reasons_are_the_tables() -> None:
    assert set(conditions.CONFLICT_REASONS) == {p.reason for p in properties.PROPERTIES}
    assert len({p.name for p in properties.PROPERTIES}) == len(properties.PROPERTIES)
    assert len({p.column for p in properties.PROPERTIES}) == len(properties.PROPERTIES)


@pytest.mark.parametrize("prop", DECIDED)
def test_each_row_yields_its_reason_and_the_winners_value(
    prop: properties.ImportProperty,
) -> None:
    won, lost = SAMPLES[prop.name]
    result = judge(
        [
            spec("alpha", created=T0, **sample_fields(prop, won)),
            spec("beta", created=at(1), **sample_fields(prop, lost)),
        ]
    )
    assert result.reasons == (prop.reason,)
    assert result.verdicts["beta"].overridden_fields == (prop.name,)
    assert result.verdicts["alpha"].overridden_fields == ()
    assert prop.name in result.verdicts["beta"].message
    # The winner's value is the import's.
    assert prop.import_value(result.import_spec) == (
        prop.absent if won is None else won
    )


@pytest.mark.parametrize("prop", DECIDED)
def test_equal_values_never_conflict(prop: properties.ImportProperty) -> None:
    for value in SAMPLES[prop.name]:
        result = judge(
            [
                spec("alpha", created=T0, **sample_fields(prop, value)),
                spec("beta", created=at(1), **sample_fields(prop, value)),
            ]
        )
        assert result.reasons == ()


@pytest.mark.parametrize("prop", [pytest.param(p, id=p.name) for p in properties.PROPERTIES])
def test_each_row_has_its_column_stored_as_declared(prop: properties.ImportProperty) -> None:
    column = exports.c[prop.column]
    assert column.nullable == prop.nullable
    assert prop.column in codec.SPEC_COLUMNS
    sample = SAMPLES.get(prop.name, (None, None))[1]
    stored = codec.spec_columns(spec("alpha", **sample_fields(prop, sample)))[prop.column]
    if prop.storage is properties.Storage.WORD:
        assert stored == sample
    elif sample is None and prop.storage is properties.Storage.JSON_OR_NULL:
        assert stored is None
    elif sample is not None:
        assert stored == codec.canonical_json(sample)


@pytest.mark.parametrize("prop", DECIDED)
def test_the_agent_holds_each_row_as_declared(prop: properties.ImportProperty) -> None:
    value = SAMPLES[prop.name][1]
    import_fields = {
        imported: (value if len(prop.fields) == 1 else value.get(exported))
        for exported, imported in prop.fields
    }
    item = ServiceImport(
        metadata=ObjectMeta(name="web", namespace="demo"),
        spec=ServiceImportSpec.model_validate(
            {k: v for k, v in import_fields.items() if v is not None}
        ),
    )
    held = HeldImport.of(item)
    for (exported, _), attribute in zip(prop.fields, prop.import_attributes, strict=True):
        own = value if len(prop.fields) == 1 else value.get(exported)
        kept = getattr(held, attribute)
        if prop.held is properties.Held.PAIRS:
            assert dict(kept) == own
        elif prop.held is properties.Held.JSON:
            assert kept == (None if own is None else codec.canonical_json(own).encode())
        else:
            assert kept == own


@pytest.mark.parametrize("prop", DECIDED)
def test_the_conflict_page_names_each_row_and_what_sets_it(
    prop: properties.ImportProperty,
) -> None:
    won, lost = SAMPLES[prop.name]
    specs = [
        spec("alpha", created=T0, **sample_fields(prop, won)),
        spec("beta", created=at(1), **sample_fields(prop, lost)),
    ]
    result = judge(specs)
    item = ServiceImport(metadata=ObjectMeta(name="web", namespace="demo"),
                         spec=result.import_spec)
    item.status.conflicts = list(result.reasons)
    facts = conflictpage.ConflictFacts(
        item=item,
        exports=[
            InternalServiceExport(metadata=ObjectMeta(name="web", namespace="demo"), spec=s)
            for s in specs
        ],
        disputes=[
            ExportConflict(
                namespace="demo", name="web", cluster="beta", winner="alpha",
                properties=[PropertyConflict(field=prop.name, reason=prop.reason,
                                             value=prop.value(specs[1]),
                                             decided_value=prop.value(specs[0]))],
            )
        ],
    )
    text = conflictpage.page(facts)
    assert f"{prop.name} ({prop.reason})" in text
    assert prop.setter in text


def test_the_words_for_the_console_are_the_tables() -> None:
    words = properties.words_document()
    assert words["reasons"] == {p.reason: p.words for p in properties.PROPERTIES}
    assert [p["name"] for p in words["properties"]] == [p.name for p in properties.PROPERTIES]
    assert all(p["label"] and p["setter"] for p in words["properties"])


def test_a_lone_exports_import_has_every_row() -> None:
    """`sole_import_documents` copies each row's fields (export name → import name)."""
    lone = spec("alpha", **{k: v for k, (_, v) in SAMPLES.items() if v is not None
                            and len(properties.by_name(k).fields) == 1})
    imported = to_wire(judge([lone]).import_spec)
    for prop in properties.DECIDED:
        assert prop.import_wire_value(imported) == prop.wire_value(to_wire(lone))
