"""Verdicts decided inside the store's write transactions (docs/reference.md#conflicts), on both
databases.

The judge itself is tested case by case elsewhere (hub/conflicts.py); here the question is
whether the store feeds it the right exports, in precedence order, and keeps every
export's stored verdict and the ServiceImport equal to a fresh judgement of the key.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from sqlalchemy import select

from hub.conflicts import judge
from hub.store import NotFound, Store
from hub.store.tables import changes
from shared import constants
from tests.hub.test_store_support import (
    at,
    conflict_of,
    make_export,
    opened_store,
    port,
)


@pytest.fixture
async def store(database_url: str) -> AsyncIterator[Store]:
    async with opened_store(database_url, "alpha", "beta", "gamma") as s:
        yield s


async def assert_verdicts_match_fresh_judgement(
    store: Store, namespace: str = "demo", name: str = "web"
) -> None:
    """Every stored verdict of the key equals a judge() of the key's current exports."""
    stored = (await store.exports.list(namespace=namespace, name=name)).items
    ordered = sorted(
        stored,
        key=lambda e: (
            e.spec.service_reference.export_creation_timestamp,
            e.spec.service_reference.cluster_id,
        ),
    )
    judgement = judge([e.spec for e in ordered])
    for export in stored:
        verdict = judgement.verdicts[export.spec.service_reference.cluster_id]
        condition = export.condition("Conflict")
        assert condition is not None
        assert condition.status == ("True" if verdict.conflict else "False")
        assert condition.message == verdict.message
    imported = await store.imports.get(namespace, name)
    assert imported.status.winning_cluster == judgement.winner
    assert imported.status.conflicts == list(judgement.reasons)
    assert [c.cluster for c in imported.status.clusters] == list(judgement.clusters)
    assert imported.status.ports == judgement.port_clusters
    assert imported.spec.ports == judgement.import_spec.ports


async def changes_between(
    store: Store, after: int, *, kind: str | None = constants.KIND_EXPORT
) -> list[tuple[int, str, str]]:
    """The change rows after revision `after`: the exports' by default (the history holds
    other kinds too), every kind with `kind=None`."""
    query = select(changes.c.revision, changes.c.cluster_id, changes.c.type).where(
        changes.c.revision > after
    )
    if kind is not None:
        query = query.where(changes.c.kind == kind)
    async with store.engine.connect() as conn:
        rows = await conn.execute(query.order_by(changes.c.revision))
        return [(r.revision, r.cluster_id, r.type) for r in rows]


async def test_two_clusters_agreeing_have_no_conflict(store: Store) -> None:
    await store.exports.put("alpha", make_export("alpha", created=at(0)))
    result = await store.exports.put("beta", make_export("beta", created=at(5)))
    assert conflict_of(result.object) == ("False", "NoConflicts")
    assert conflict_of(await store.exports.get("alpha", "demo", "web")) == ("False", "NoConflicts")
    imported = await store.imports.get("demo", "web")
    assert imported.status.winning_cluster == "alpha"
    assert [c.cluster for c in imported.status.clusters] == ["alpha", "beta"]
    assert imported.status.conflicts == []
    await assert_verdicts_match_fresh_judgement(store)


async def test_clash_marks_every_export_and_convergence_clears_all(store: Store) -> None:
    await store.exports.put("alpha", make_export("alpha", created=at(0)))
    await store.exports.put("beta", make_export("beta", created=at(5)))
    before = await store.feed.current_revision()

    clash = await store.exports.put("gamma", make_export("gamma", created=at(9), type="Headless"))
    assert conflict_of(clash.object)[0] == "True"
    assert "TypeConflict" in conflict_of(clash.object)[1]
    for cluster in ("alpha", "beta"):
        status, reason = conflict_of(await store.exports.get(cluster, "demo", "web"))
        assert status == "True" and "TypeConflict" in reason
    # one commit: gamma's new record and the two re-judged records, consecutive revisions
    assert [(c, t) for _, c, t in await changes_between(store, before)] == [
        ("gamma", "ADDED"),
        ("alpha", "MODIFIED"),
        ("beta", "MODIFIED"),
    ]
    assert (await store.imports.get("demo", "web")).status.conflicts == ["TypeConflict"]
    assert len((await store.imports.list(conflict=True)).items) == 1
    await assert_verdicts_match_fresh_judgement(store)

    # gamma converges: everyone is cleared
    fixed = await store.exports.put("gamma", make_export("gamma", created=at(9)))
    assert conflict_of(fixed.object) == ("False", "NoConflicts")
    for cluster in ("alpha", "beta"):
        assert conflict_of(await store.exports.get(cluster, "demo", "web"))[0] == "False"
    assert (await store.imports.get("demo", "web")).status.conflicts == []
    await assert_verdicts_match_fresh_judgement(store)


async def test_winner_withdrawal_rejudges_the_rest_in_one_commit(store: Store) -> None:
    # alpha (oldest) decides Headless; beta and gamma agree with each other, not with alpha
    await store.exports.put("alpha", make_export("alpha", created=at(0), type="Headless"))
    await store.exports.put("beta", make_export("beta", created=at(5)))
    await store.exports.put("gamma", make_export("gamma", created=at(9)))
    assert conflict_of(await store.exports.get("beta", "demo", "web"))[0] == "True"
    before = await store.feed.current_revision()

    await store.exports.delete("alpha", "demo", "web")

    rows = await changes_between(store, before)
    assert [(c, t) for _, c, t in rows] == [
        ("alpha", "DELETED"),
        ("beta", "MODIFIED"),
        ("gamma", "MODIFIED"),
    ]
    # one commit: its revisions (the export rows' and any other kind's) follow one another
    every_kind = [r for r, _, _ in await changes_between(store, before, kind=None)]
    assert every_kind == list(range(before + 1, await store.feed.current_revision() + 1))
    assert {r for r, _, _ in rows} <= set(every_kind)
    for cluster in ("beta", "gamma"):
        assert conflict_of(await store.exports.get(cluster, "demo", "web")) == (
            "False",
            "NoConflicts",
        )
    assert (await store.imports.get("demo", "web")).status.winning_cluster == "beta"
    await assert_verdicts_match_fresh_judgement(store)


async def test_ties_on_timestamp_go_to_the_smaller_cluster_id(store: Store) -> None:
    await store.exports.put("gamma", make_export("gamma", created=at(0), type="Headless"))
    await store.exports.put("beta", make_export("beta", created=at(0)))
    imported = await store.imports.get("demo", "web")
    assert imported.status.winning_cluster == "beta"
    assert imported.spec.type == "ClusterSetIP"
    await assert_verdicts_match_fresh_judgement(store)


async def test_timestamps_in_other_offsets_order_by_instant(store: Store) -> None:
    from datetime import timedelta, timezone

    east = timezone(timedelta(hours=5))
    # beta's export is older in absolute time although its wall-clock text is later
    await store.exports.put("alpha", make_export("alpha", created=at(60)))
    await store.exports.put(
        "beta", make_export("beta", created=at(0).astimezone(east), type="Headless")
    )
    assert (await store.imports.get("demo", "web")).status.winning_cluster == "beta"
    await assert_verdicts_match_fresh_judgement(store)


async def test_service_import_lives_from_first_to_last_export(store: Store) -> None:
    with pytest.raises(NotFound, match="demo/web"):
        await store.imports.get("demo", "web")
    await store.exports.put(
        "alpha", make_export("alpha", created=at(0), ports=[port(80, "http"), port(443, "https")])
    )
    await store.exports.put("beta", make_export("beta", created=at(5), ports=[port(80, "http")]))

    imported = await store.imports.get("demo", "web")
    assert imported.metadata.namespace == "demo" and imported.metadata.name == "web"
    per_port = {p.port: p.clusters for p in imported.status.ports}
    assert per_port == {80: ["alpha", "beta"], 443: ["alpha"]}
    assert sorted(p.port for p in imported.spec.ports) == [80, 443]
    # beta does not declare 443: the key has a PortConflict, the import keeps the union
    assert imported.status.conflicts == ["PortConflict"]
    listed = await store.imports.list()
    assert [(i.metadata.namespace, i.metadata.name) for i in listed.items] == [("demo", "web")]

    await store.exports.delete("alpha", "demo", "web")
    imported = await store.imports.get("demo", "web")
    assert [c.cluster for c in imported.status.clusters] == ["beta"]
    assert {p.port: p.clusters for p in imported.status.ports} == {80: ["beta"]}
    assert imported.status.conflicts == []
    assert conflict_of(await store.exports.get("beta", "demo", "web")) == ("False", "NoConflicts")

    await store.exports.delete("beta", "demo", "web")
    with pytest.raises(NotFound):
        await store.imports.get("demo", "web")
    assert (await store.imports.list()).items == []


async def test_union_of_ports_with_a_port_conflict_on_every_export(store: Store) -> None:
    # The MCS conformance suite's "should expose the union of the constituent service ports
    # and raise a conflict" (Required), through the store's write transactions.
    tcp, udp, stcp = port(42, "tcp"), port(42, "udp", "UDP"), port(142, "stcp", "SCTP")
    await store.exports.put("alpha", make_export("alpha", created=at(0), ports=[tcp, udp]))
    before = await store.feed.current_revision()
    await store.exports.put("beta", make_export("beta", created=at(5), ports=[tcp, stcp]))

    # one commit: beta's new record and alpha re-judged into the conflict
    assert [(c, t) for _, c, t in await changes_between(store, before)] == [
        ("beta", "ADDED"),
        ("alpha", "MODIFIED"),
    ]
    for cluster in ("alpha", "beta"):
        assert conflict_of(await store.exports.get(cluster, "demo", "web")) == (
            "True",
            "PortConflict",
        )
    imported = await store.imports.get("demo", "web")
    assert [(p.name, p.protocol, p.port, p.clusters) for p in imported.status.ports] == [
        ("tcp", "TCP", 42, ["alpha", "beta"]),
        ("udp", "UDP", 42, ["alpha"]),
        ("stcp", "SCTP", 142, ["beta"]),
    ]
    assert [(p.name, p.port) for p in imported.spec.ports] == [
        ("tcp", 42),
        ("udp", 42),
        ("stcp", 142),
    ]
    assert imported.status.conflicts == ["PortConflict"]
    assert [i.metadata.name for i in (await store.imports.list(conflict=True)).items] == ["web"]
    await assert_verdicts_match_fresh_judgement(store)

    # beta declares alpha's ports in another order: the same set, so no conflict, and every
    # port is served by both
    await store.exports.put("beta", make_export("beta", created=at(5), ports=[udp, tcp]))
    for cluster in ("alpha", "beta"):
        assert conflict_of(await store.exports.get(cluster, "demo", "web")) == (
            "False",
            "NoConflicts",
        )
    imported = await store.imports.get("demo", "web")
    assert [(p.name, p.clusters) for p in imported.status.ports] == [
        ("tcp", ["alpha", "beta"]),
        ("udp", ["alpha", "beta"]),
    ]
    assert imported.status.conflicts == []
    await assert_verdicts_match_fresh_judgement(store)


async def test_keys_are_judged_independently(store: Store) -> None:
    await store.exports.put("alpha", make_export("alpha", name="web", created=at(0)))
    await store.exports.put("beta", make_export("beta", name="web", type="Headless"))
    await store.exports.put("beta", make_export("beta", name="api"))
    await store.exports.put("alpha", make_export("alpha", namespace="other", name="web"))
    assert conflict_of(await store.exports.get("beta", "demo", "api"))[0] == "False"
    assert conflict_of(await store.exports.get("alpha", "other", "web"))[0] == "False"
    assert conflict_of(await store.exports.get("beta", "demo", "web"))[0] == "True"
    page = await store.imports.list(conflict=True)
    assert [(i.metadata.namespace, i.metadata.name) for i in page.items] == [("demo", "web")]
    first = await store.imports.list(limit=2)
    assert first.continue_token is not None
    rest = await store.imports.list(limit=2, continue_token=first.continue_token)
    assert [i.metadata.name for i in first.items + rest.items] == ["api", "web", "web"]
    assert rest.continue_token is None


async def test_verdict_unchanged_by_unrelated_update_keeps_transition_time(store: Store) -> None:
    await store.exports.put("alpha", make_export("alpha", created=at(0)))
    first = await store.exports.get("alpha", "demo", "web")
    before = await store.feed.current_revision()
    await store.exports.put("beta", make_export("beta", created=at(5)))
    # beta's arrival does not change alpha's verdict: alpha is not rewritten
    assert [(c, t) for _, c, t in await changes_between(store, before)] == [("beta", "ADDED")]
    again = await store.exports.get("alpha", "demo", "web")
    assert again.metadata.resource_version == first.metadata.resource_version
    assert again.condition("Conflict") == first.condition("Conflict")
