"""`Store.conflicts`: the window-function query over the decided-property columns answers,
fleet-wide, which exports differ from their key's winner on which property — on SQLite and
PostgreSQL alike, and in agreement with the verdicts the judge stored."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from hub.store import Store
from shared.models import ExportConflict
from tests.hub.test_store_support import at, make_export, opened_store, port

CLUSTERS = ("alpha", "beta", "gamma")


@pytest.fixture
async def store(database_url: str) -> AsyncIterator[Store]:
    async with opened_store(database_url, *CLUSTERS) as s:
        yield s


@dataclass(frozen=True)
class Put:
    """One export to PUT: its cluster, its age (seconds after T0) and spec fields."""

    cluster: str
    created: float = 0
    name: str = "web"
    spec: dict[str, Any] = field(default_factory=dict)


# (field, value, decided value) per reported cluster; the wire form (absent = None).
Expected = dict[str, list[tuple[str, Any, Any]]]

CASES: list[tuple[str, list[Put], Expected]] = [
    ("all agree", [Put("alpha"), Put("beta", 5), Put("gamma", 9)], {}),
    (
        "the younger export loses type",
        [Put("alpha"), Put("beta", 5, spec={"type": "Headless"})],
        {"beta": [("type", "Headless", "ClusterSetIP")]},
    ),
    (
        "the oldest wins, whatever its name",
        [Put("alpha", 5, spec={"sessionAffinity": "ClientIP"}), Put("beta")],
        {"alpha": [("sessionAffinity", "ClientIP", "None")]},
    ),
    (
        "a tie goes to the first cluster id",
        [Put("beta", spec={"internalTrafficPolicy": "Local"}), Put("alpha")],
        {"beta": [("internalTrafficPolicy", "Local", None)]},
    ),
    (
        "every property lost is named, in the judge's order",
        [
            Put("alpha", spec={"exportedLabels": {"tier": "web"}}),
            Put(
                "beta",
                3,
                spec={
                    "trafficDistribution": "PreferClose",
                    "exportedLabels": {"tier": "api"},
                    "exportedAnnotations": {"owner": "team-b"},
                },
            ),
        ],
        {
            "beta": [
                ("trafficDistribution", "PreferClose", None),
                ("exportedLabels", {"tier": "api"}, {"tier": "web"}),
                ("exportedAnnotations", {"owner": "team-b"}, {}),
            ]
        },
    ),
    (
        "maps compare by content, not by key order",
        [
            Put("alpha", spec={"exportedLabels": {"a": "1", "b": "2"}}),
            Put("beta", 1, spec={"exportedLabels": {"b": "2", "a": "1"}}),
        ],
        {},
    ),
    (
        "no session affinity config, an empty one and an empty clientIP are the same",
        [
            Put("alpha"),
            Put("beta", 1, spec={"sessionAffinityConfig": {}}),
            Put("gamma", 2, spec={"sessionAffinityConfig": {"clientIP": {}}}),
        ],
        {},
    ),
    (
        "the client-IP timeout is compared",
        [
            Put("alpha", spec={"sessionAffinityConfig": {"clientIP": {"timeoutSeconds": 100}}}),
            Put("beta", 1, spec={"sessionAffinityConfig": {"clientIP": {"timeoutSeconds": 200}}}),
            Put("gamma", 2, spec={"sessionAffinityConfig": {"clientIP": {"timeoutSeconds": 100}}}),
        ],
        {
            "beta": [
                (
                    "sessionAffinityConfig",
                    {"clientIP": {"timeoutSeconds": 200}},
                    {"clientIP": {"timeoutSeconds": 100}},
                )
            ]
        },
    ),
    (
        "ports and IP families are merged, not decided: not listed",
        [
            Put("alpha", spec={"ports": [port(80, "http")], "ipFamilies": ["IPv4"]}),
            Put("beta", 1, spec={"ports": [port(81, "http")], "ipFamilies": ["IPv6"]}),
        ],
        {},
    ),
    (
        "keys are judged apart",
        [Put("alpha"), Put("beta", 1, name="api", spec={"type": "Headless"}), Put("gamma", 2)],
        {},
    ),
]


def _as_expected(items: list[ExportConflict]) -> Expected:
    return {
        item.cluster: [(p.field, p.value, p.decided_value) for p in item.properties]
        for item in items
    }


@pytest.mark.parametrize(("puts", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
async def test_disagreements_with_the_decided_values(
    store: Store, puts: list[Put], expected: Expected
) -> None:
    for put in puts:
        await store.exports.put(
            put.cluster,
            make_export(put.cluster, name=put.name, created=at(put.created), **put.spec),
        )
    page = await store.conflicts.list()
    assert _as_expected(page.items) == expected
    assert all(item.winner not in expected for item in page.items)
    assert int(page.resource_version) > 0 and page.continue_token is None
    # The judge stored the same disagreements: each property's reason is the export's.
    for item in page.items:
        export = await store.exports.get(item.cluster, item.namespace, item.name)
        condition = export.condition("Conflict")
        assert condition is not None and condition.status == "True"
        assert {p.reason for p in item.properties} <= set(condition.reason.split(","))


async def _fleet(store: Store) -> None:
    """Three keys; in each, beta (younger) differs from alpha; gamma agrees in `web`."""
    for name in ("api", "db", "web"):
        await store.exports.put("alpha", make_export("alpha", name=name, created=at(0)))
        await store.exports.put(
            "beta", make_export("beta", name=name, created=at(1), type="Headless")
        )
    await store.exports.put("gamma", make_export("gamma", name="web", created=at(2)))


async def test_filters_keep_the_winner_of_another_cluster(store: Store) -> None:
    await _fleet(store)
    keys = [(i.name, i.cluster, i.winner) for i in (await store.conflicts.list()).items]
    assert keys == [("api", "beta", "alpha"), ("db", "beta", "alpha"), ("web", "beta", "alpha")]
    # Only beta's rows, still judged against alpha; alpha and gamma agree with themselves.
    only_beta = await store.conflicts.list(cluster_id="beta", name="db")
    assert [(i.name, i.winner) for i in only_beta.items] == [("db", "alpha")]
    assert (await store.conflicts.list(cluster_id="gamma")).items == []
    assert (await store.conflicts.list(namespace="other")).items == []


async def test_pages_follow_continue_tokens(store: Store) -> None:
    await _fleet(store)
    seen: list[str] = []
    token = None
    for _ in range(5):
        page = await store.conflicts.list(limit=2, continue_token=token)
        seen += [i.name for i in page.items]
        token = page.continue_token
        if token is None:
            break
    assert seen == ["api", "db", "web"]


async def test_a_bad_token_or_limit_is_refused(store: Store) -> None:
    with pytest.raises(ValueError, match="continue token"):
        await store.conflicts.list(continue_token="garbage")
    await store.exports.put("alpha", make_export("alpha", name="api"))
    await store.exports.put("alpha", make_export("alpha", name="db"))
    token = (await store.exports.list(limit=1)).continue_token
    assert token is not None
    with pytest.raises(ValueError, match="conflicts listing"):
        await store.conflicts.list(continue_token=token)
    with pytest.raises(ValueError, match="limit"):
        await store.conflicts.list(limit=0)
