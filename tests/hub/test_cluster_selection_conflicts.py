"""Cluster selection is a property of the Service decided by the winner
(docs/reference.md#cluster-selection): the judge's cases, the fleet-wide SQL query on both
databases, the import the hub derives, and the hub's 422 for a malformed value."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import pytest

from hub.conflicts import import_documents, judge, sole_import_documents
from hub.store import Store
from shared import conditions
from shared.models import to_wire
from tests.hub.test_api_support import ADMIN, Hub, export_body, export_path, running_hub
from tests.hub.test_conflicts import T0, at, spec
from tests.hub.test_store_support import make_export, opened_store

CSC = conditions.CLUSTER_SELECTORS_CONFLICT
EU = {"propertySelector": {"matchProperties": {"region": "eu"}}}
US = {"propertySelector": {"matchProperties": {"region": "us"}}}
# The canonical (wire) forms the hub stores and answers: defaults filled, keys sorted.
EU_WIRE = {"propertySelector": {"matchExpressions": [], "matchProperties": {"region": "eu"}}}
US_WIRE = {"propertySelector": {"matchExpressions": [], "matchProperties": {"region": "us"}}}
POLICY_DEFAULTS = {
    "failbackDelaySeconds": 30,
    "fallback": "AllClusters",
    "minReadyEndpoints": 1,
    "minReadyPercent": 0,
}

# (case, the winner's fields, the other export's fields, conflict?)
JUDGE_CASES: list[tuple[str, dict[str, Any], dict[str, Any], bool]] = [
    ("neither selects", {}, {}, False),
    ("the same selectors", {"clusterSelectors": [EU, US]}, {"clusterSelectors": [EU, US]}, False),
    (
        "the same policy, spelled with and without its defaults",
        {"clusterSelectors": [EU], "clusterSelection": {}},
        {"clusterSelectors": [EU], "clusterSelection": {"minReadyEndpoints": 1}},
        False,
    ),
    (
        "the same selector, its terms in another order",
        {"importClusters": {"matchProperties": {"a.io": "1", "b.io": "2"}}},
        {"importClusters": {"matchProperties": {"b.io": "2", "a.io": "1"}}},
        False,
    ),
    ("another order of preference", {"clusterSelectors": [EU, US]},
     {"clusterSelectors": [US, EU]}, True),
    ("selectors on one side only", {"clusterSelectors": [EU]}, {}, True),
    ("selectors on the other side only", {}, {"clusterSelectors": [EU]}, True),
    (
        "only the policy differs",
        {"clusterSelectors": [EU]},
        {"clusterSelectors": [EU], "clusterSelection": {"fallback": "None"}},
        True,
    ),
    (
        "only the importing clusters differ",
        {"importClusters": {"matchExpressions": [{"key": "region", "operator": "Exists"}]}},
        {"importClusters": {"matchExpressions": [{"key": "tier", "operator": "Exists"}]}},
        True,
    ),
    ("an empty policy is not an absent one", {}, {"clusterSelection": {}}, True),
]


@pytest.mark.parametrize(
    ("won", "lost", "conflict"), [c[1:] for c in JUDGE_CASES], ids=[c[0] for c in JUDGE_CASES]
)
def test_the_judge_decides_cluster_selection(
    won: dict[str, Any], lost: dict[str, Any], conflict: bool
) -> None:
    winner = spec("alpha", created=T0, **won)
    other = spec("beta", created=at(1), **lost)
    result = judge([winner, other])
    assert result.reasons == ((CSC,) if conflict else ())
    assert result.verdicts["alpha"].conflict is conflict
    assert result.verdicts["beta"].conflict is conflict
    if conflict:
        assert result.verdicts["beta"].overridden_fields == ("clusterSelectors",)
        assert "clusterSelectors" in result.verdicts["beta"].message
    # The winner's selection is the import's, field for field (absent stays absent).
    imported = to_wire(result.import_spec)
    exported = to_wire(winner)
    for field in ("clusterSelectors", "clusterSelection", "importClusters"):
        assert imported.get(field) == exported.get(field)


def test_conflict_reasons_join_in_their_fixed_order() -> None:
    result = judge(
        [
            spec("alpha", created=T0, clusterSelectors=[EU]),
            spec("beta", created=at(1), type="Headless", clusterSelectors=[US]),
        ]
    )
    assert result.reasons == ("ClusterSelectorsConflict", "TypeConflict")


@pytest.fixture
async def store(database_url: str) -> AsyncIterator[Store]:
    async with opened_store(database_url, "alpha", "beta", "gamma") as s:
        yield s


async def test_the_sql_query_compares_the_canonical_form(store: Store) -> None:
    await store.exports.put("alpha", make_export("alpha", created=at(0),
                                                 clusterSelectors=[EU], clusterSelection={}))
    # The same, spelled otherwise: no conflict.
    await store.exports.put(
        "beta",
        make_export("beta", created=at(1), clusterSelectors=[EU_WIRE],
                    clusterSelection={"failbackDelaySeconds": 30}),
    )
    assert (await store.conflicts.list()).items == []
    # Another order of preference, and no policy: a conflict, with both values answered.
    await store.exports.put("gamma", make_export("gamma", created=at(2),
                                                 clusterSelectors=[US, EU]))
    (item,) = (await store.conflicts.list()).items
    assert (item.cluster, item.winner) == ("gamma", "alpha")
    (disputed,) = item.properties
    assert (disputed.field, disputed.reason) == ("clusterSelectors", CSC)
    assert disputed.value == {"clusterSelectors": [US_WIRE, EU_WIRE]}
    assert disputed.decided_value == {
        "clusterSelectors": [EU_WIRE],
        "clusterSelection": POLICY_DEFAULTS,
    }
    for cluster in ("alpha", "beta", "gamma"):
        condition = (await store.exports.get(cluster, "demo", "web")).condition("Conflict")
        assert condition is not None and (condition.status, condition.reason) == ("True", CSC)
    imported = await store.imports.get("demo", "web")
    assert to_wire(imported.spec)["clusterSelectors"] == [EU_WIRE]
    assert to_wire(imported.spec)["clusterSelection"] == POLICY_DEFAULTS
    assert imported.status.conflicts == [CSC]
    # The winner withdraws: beta (the same as alpha) wins, gamma still differs.
    await store.exports.delete("alpha", "demo", "web")
    (item,) = (await store.conflicts.list()).items
    assert (item.cluster, item.winner) == ("gamma", "beta")


async def test_absent_is_absent_in_sql(store: Store) -> None:
    await store.exports.put("alpha", make_export("alpha", created=at(0)))
    await store.exports.put("beta", make_export("beta", created=at(1)))
    assert (await store.conflicts.list()).items == []
    await store.exports.put("gamma", make_export("gamma", created=at(2),
                                                 importClusters={"matchProperties": {"a": "b"}}))
    (item,) = (await store.conflicts.list()).items
    assert item.cluster == "gamma"
    assert item.properties[0].decided_value is None
    assert item.properties[0].value == {
        "importClusters": {"matchExpressions": [], "matchProperties": {"a": "b"}}
    }
    imported = await store.imports.get("demo", "web")
    assert "importClusters" not in to_wire(imported.spec)


@pytest.fixture
async def hub(database_url: str) -> AsyncIterator[Hub]:
    async with running_hub(database_url) as running:
        yield running


@pytest.mark.parametrize(
    ("fields", "named"),
    [
        ({"clusterSelectors": []}, "spec.clusterSelectors"),
        ({"clusterSelectors": [{}]}, "spec.clusterSelectors"),
        ({"clusterSelectors": [{"propertySelector": {}}]}, "spec.clusterSelectors"),
        ({"clusterSelection": {"minReadyPercent": 101}}, "spec.clusterSelection"),
        ({"clusterSelection": {"fallback": "Sometimes"}}, "spec.clusterSelection"),
        (
            {"importClusters": {"matchProperties": {"region": "@SameAsImporter@"}}},
            "spec.importClusters",
        ),
    ],
    ids=["empty-list", "no-criterion", "empty-selector", "percent", "fallback", "importer"],
)
async def test_a_malformed_selection_is_422_naming_the_field(
    hub: Hub, fields: dict[str, Any], named: str
) -> None:
    east = (await hub.register("east"))["east"]
    before = await hub.client.get("/api/v1/serviceexports", headers=ADMIN)
    answer = await hub.client.put(export_path("east"), json=export_body("east", **fields),
                                  headers=east)
    assert answer.status_code == 422, answer.text
    status = answer.json()
    assert status["reason"] == "Invalid"
    causes = [c.get("field", "") for c in status["details"]["causes"]]
    assert any(cause.startswith(named) for cause in causes), causes
    after = await hub.client.get("/api/v1/serviceexports", headers=ADMIN)
    assert after.json()["items"] == before.json()["items"] == []


async def test_the_import_and_the_conflicts_api_carry_the_selection(hub: Hub) -> None:
    headers = await hub.register("east", "west")
    policy = {"fallback": "None", "failbackDelaySeconds": 0}
    assert (await hub.put("east", headers["east"], clusterSelectors=[EU],
                          clusterSelection=policy)).status_code == 201
    assert (await hub.put("west", headers["west"], created="2026-03-01T09:31:00Z",
                          clusterSelectors=[US])).status_code == 201
    imported = (await hub.client.get("/api/v1/serviceimports/demo/web", headers=ADMIN)).json()
    assert imported["spec"]["clusterSelectors"] == [EU_WIRE]
    assert imported["spec"]["clusterSelection"] == {**POLICY_DEFAULTS, **policy}
    assert "importClusters" not in imported["spec"]
    assert imported["status"]["conflicts"] == [CSC]
    listing = (await hub.client.get("/api/v1/conflicts", headers=ADMIN)).json()
    (item,) = listing["items"]
    assert item["cluster"] == "west"
    assert item["properties"] == [
        {
            "field": "clusterSelectors",
            "reason": CSC,
            "value": {"clusterSelectors": [US_WIRE]},
            "decidedValue": {
                "clusterSelectors": [EU_WIRE],
                "clusterSelection": {**POLICY_DEFAULTS, **policy},
            },
        }
    ]
    assert json.dumps(item)  # plain JSON all the way down


def test_a_lone_exports_import_carries_its_selection_as_the_judge_builds_it() -> None:
    lone = spec("alpha", clusterSelectors=[EU, US], clusterSelection={"fallback": "None"},
                importClusters={"matchProperties": {"tier": "gold"}})
    assert sole_import_documents(to_wire(lone), "alpha") == import_documents(judge([lone]))
    assert json.loads(sole_import_documents(to_wire(lone), "alpha")[0])["clusterSelectors"] == [
        EU_WIRE, US_WIRE
    ]
