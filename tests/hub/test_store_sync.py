"""Full-state sync (docs/reference.md#rest-api, `PUT …/serviceexports`): upsert the set, withdraw
the rest."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from hub.store import NotFound, Store
from shared.models import InternalServiceExport
from tests.hub.test_store_support import at, conflict_of, make_export, opened_store


@pytest.fixture
async def store(database_url: str) -> AsyncIterator[Store]:
    async with opened_store(database_url, "alpha", "beta") as s:
        yield s


async def test_sync_counts_created_updated_unchanged_withdrawn(store: Store) -> None:
    await store.exports.put("alpha", make_export("alpha", name="keep"))
    await store.exports.put("alpha", make_export("alpha", name="change"))
    await store.exports.put("alpha", make_export("alpha", name="drop"))
    await store.exports.put("beta", make_export("beta", name="drop"))  # another cluster's

    result = await store.exports.sync(
        "alpha",
        [
            make_export("alpha", name="keep"),
            make_export("alpha", name="change", ports=[{"port": 9090}]),
            make_export("alpha", name="fresh"),
        ],
    )
    assert (result.created, result.updated, result.unchanged, result.withdrawn) == (1, 1, 1, 1)
    assert result.resource_version == str(await store.feed.current_revision())
    names = [e.metadata.name for e in (await store.exports.list(cluster_id="alpha")).items]
    assert names == ["change", "fresh", "keep"]
    # beta's export of the withdrawn key stays, and its key was re-judged
    assert [e.metadata.name for e in (await store.exports.list(cluster_id="beta")).items] == [
        "drop"
    ]
    assert (await store.imports.get("demo", "drop")).status.winning_cluster == "beta"

    again = await store.exports.sync(
        "alpha",
        [
            make_export("alpha", name="keep"),
            make_export("alpha", name="change", ports=[{"port": 9090}]),
            make_export("alpha", name="fresh"),
        ],
    )
    assert (again.created, again.updated, again.unchanged, again.withdrawn) == (0, 0, 3, 0)
    assert again.resource_version == result.resource_version


async def test_unchanged_resync_writes_nothing(store: Store) -> None:
    def wanted(**changes: dict[str, str]) -> list[InternalServiceExport]:
        return [
            make_export("alpha", name=f"svc{i}", annotations=changes.get(f"svc{i}"))
            for i in range(5)
        ]

    first = await store.exports.sync("alpha", wanted(svc0={"note": "a"}))
    revision = await store.feed.current_revision()
    exports_before = (await store.exports.list(cluster_id="alpha")).items
    imports_before = (await store.imports.list()).items

    # The same set again (new objects; annotations omitted or the stored ones): nothing
    # is written, no revision is taken, no change row is kept, no import changes.
    for body in (wanted(), wanted(svc0={"note": "a"})):
        again = await store.exports.sync("alpha", body)
        assert (again.created, again.updated, again.unchanged, again.withdrawn) == (0, 0, 5, 0)
        assert again.resource_version == first.resource_version == str(revision)
        assert await store.feed.changes_since(revision=revision) == []
        assert (await store.exports.list(cluster_id="alpha")).items == exports_before
        assert (await store.imports.list()).items == imports_before

    # Changed annotations alone are a change: one record, one revision.
    changed = await store.exports.sync("alpha", wanted(svc0={"note": "b"}))
    assert (changed.created, changed.updated, changed.unchanged) == (0, 1, 4)
    assert changed.resource_version == str(revision + 1)
    (event,) = await store.feed.changes_since(revision=revision)
    assert (event.type, event.object.metadata.name) == ("MODIFIED", "svc0")


async def test_sync_of_nothing_withdraws_everything(store: Store) -> None:
    for i in range(3):
        await store.exports.put("alpha", make_export("alpha", name=f"svc{i}"))
    result = await store.exports.sync("alpha", [])
    assert result.withdrawn == 3
    assert (await store.exports.list()).items == []
    assert (await store.imports.list()).items == []


async def test_sync_judges_keys_it_touches(store: Store) -> None:
    await store.exports.put("beta", make_export("beta", name="web", created=at(0)))
    await store.exports.sync("alpha", [make_export("alpha", name="web", type="Headless")])
    assert conflict_of(await store.exports.get("beta", "demo", "web"))[0] == "True"
    await store.exports.sync("alpha", [])
    assert conflict_of(await store.exports.get("beta", "demo", "web"))[0] == "False"


async def test_sync_refuses_bad_input(store: Store) -> None:
    with pytest.raises(NotFound, match="gamma"):
        await store.exports.sync("gamma", [])
    with pytest.raises(ValueError, match="twice"):
        await store.exports.sync("alpha", [make_export("alpha"), make_export("alpha")])
    with pytest.raises(ValueError, match="clusterId 'beta'"):
        await store.exports.sync("alpha", [make_export("beta")])
    assert (await store.exports.list()).items == []


@pytest.mark.slow
async def test_sync_of_two_thousand_exports(store: Store) -> None:
    wanted = [make_export("alpha", namespace=f"ns{i % 40}", name=f"svc{i}") for i in range(2000)]
    first = await store.exports.sync("alpha", wanted)
    assert (first.created, first.updated, first.unchanged, first.withdrawn) == (2000, 0, 0, 0)
    assert int(first.resource_version or 0) == 2 * 2000  # each export and its new import
    page = await store.exports.list(cluster_id="alpha", limit=10_000)
    assert len(page.items) == 2000

    # half stay, a quarter change, a quarter go
    second = await store.exports.sync(
        "alpha",
        [
            e
            if i % 4 < 2
            else make_export("alpha", namespace=f"ns{i % 40}", name=f"svc{i}", ports=[{"port": 81}])
            for i, e in enumerate(wanted)
            if i % 4 != 3
        ],
    )
    assert (second.created, second.updated, second.unchanged, second.withdrawn) == (
        0,
        500,
        1000,
        500,
    )
    assert len((await store.exports.list(cluster_id="alpha")).items) == 1500
    assert len((await store.imports.list()).items) == 1500


async def test_batches_in_flight_together_store_what_one_at_a_time_stores(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Small batches, so a sync runs several at once on PostgreSQL (`SYNC_PARALLEL`)."""
    monkeypatch.setattr("hub.store.exports.SYNC_BATCH", 2)
    await store.exports.sync(
        "beta", [make_export("beta", name=f"svc{i}", created=at(-1)) for i in range(0, 9, 2)]
    )
    start = await store.feed.current_revision()
    result = await store.exports.sync(
        "alpha",
        [
            make_export("alpha", name=f"svc{i}", type="Headless" if i % 4 == 0 else "ClusterSetIP")
            for i in range(9)
        ],
    )
    assert (result.created, result.updated, result.unchanged) == (9, 0, 0)
    events = await store.feed.changes_since(revision=start)
    # every alpha export once, and every beta export whose verdict flipped (svc0/4/8);
    # and every ServiceImport once, in the import feed
    imported = await store.import_feed.imports_since(start, 1000)
    assert len(events) == 9 + 3 and len(imported) == 9
    assert int(result.resource_version or 0) == start + len(events) + len(imported)
    assert sorted(
        [int(e.object.metadata.resource_version or 0) for e in events]
        + [row.revision for row in imported]
    ) == list(range(start + 1, start + 22))
    for i in range(9):
        alpha = await store.exports.get("alpha", "demo", f"svc{i}")
        expected = "True" if i % 4 == 0 and i % 2 == 0 else "False"
        assert conflict_of(alpha)[0] == expected, i
        imported = await store.imports.get("demo", f"svc{i}")
        assert imported.status.winning_cluster == ("beta" if i % 2 == 0 else "alpha")

    withdrawn = await store.exports.sync("alpha", [])
    assert withdrawn.withdrawn == 9
    for i in range(0, 9, 2):
        assert conflict_of(await store.exports.get("beta", "demo", f"svc{i}"))[0] == "False"
