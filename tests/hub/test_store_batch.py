"""Group commit of single-export writes (hub/store/batch.py), on SQLite and PostgreSQL.

What a writer relies on whether or not its PUT shared a transaction: its own verdict and
revision, its own error (an unregistered cluster or a failing write fails only itself),
its own record's writes in arrival order, and a write that commits even when its caller
went away.
Slice writes share the same group commit (their own cases: test_store_endpointslices);
here, that the two kinds in flight together both commit.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from typing import Any

import pytest
from opentelemetry import trace

from hub.store import NotFound, Store
from hub.store import batch as batch_module
from hub.store.writer import Mutation
from shared.models import EndpointSliceExport
from tests.hub.test_store_support import at, conflict_of, make_export, open_store, port
from tests.hub.test_store_verdicts import assert_verdicts_match_fresh_judgement

CLUSTERS = [f"c{i:02d}" for i in range(16)]


@pytest.fixture
async def store(database_url: str) -> AsyncIterator[Store]:
    opened = await open_store(database_url)
    for name in CLUSTERS:
        await opened.clusters.register(name, {})
    try:
        yield opened
    finally:
        await opened.close()


def _batches(store: Store) -> int:
    return store.exports._batcher.batches


async def test_concurrent_puts_share_transactions_and_keep_their_own_verdicts(
    store: Store,
) -> None:
    # Four keys, four clusters each; cluster index 3 of every key exposes another port,
    # so each key conflicts and its oldest export (index 0) wins.
    writes = [
        (
            cluster,
            f"svc{k}",
            make_export(
                cluster,
                name=f"svc{k}",
                created=at(i),
                ports=[port(81 if i == 3 else 80, "http")],
            ),
        )
        for k in range(4)
        for i, cluster in enumerate(CLUSTERS[:4])
    ]
    before = _batches(store)
    results = await asyncio.gather(*(store.exports.put(c, e) for c, _, e in writes))

    assert _batches(store) - before < len(writes), "concurrent PUTs should share a batch"
    assert all(r.created and r.changed for r in results)
    revisions = [int(r.object.metadata.resource_version or 0) for r in results]
    assert len(set(revisions)) == len(revisions), "each write has its own revision"
    for k in range(4):
        imported = await store.imports.get("demo", f"svc{k}")
        assert imported.status.winning_cluster == CLUSTERS[0]
        assert imported.status.conflicts, "a port differs on one cluster"
    for cluster, name, _ in writes:
        stored = await store.exports.get(cluster, "demo", name)
        assert conflict_of(stored)[0] == "True"
        await assert_verdicts_match_fresh_judgement(store, name=name)


async def test_an_unregistered_cluster_fails_only_its_own_write(store: Store) -> None:
    answers = await asyncio.gather(
        store.exports.put("c00", make_export("c00", name="a")),
        store.exports.put("ghost", make_export("ghost", name="a")),
        store.exports.put("c01", make_export("c01", name="b")),
        store.exports.delete("ghost", "demo", "a"),
        return_exceptions=True,
    )
    assert not isinstance(answers[0], BaseException) and answers[0].created
    assert isinstance(answers[1], NotFound) and "'ghost' is not registered" in str(answers[1])
    assert not isinstance(answers[2], BaseException) and answers[2].created
    # A DELETE names the export it could not find, as it always has.
    assert isinstance(answers[3], NotFound) and "demo/a of cluster 'ghost'" in str(answers[3])
    assert {e.metadata.name for e in (await store.exports.list()).items} == {"a", "b"}


async def test_writes_of_one_record_commit_in_arrival_order(store: Store) -> None:
    versions = [make_export("c00", ports=[port(8000 + i, "http")]) for i in range(6)]
    results = await asyncio.gather(*(store.exports.put("c00", v) for v in versions))

    revisions = [int(r.object.metadata.resource_version or 0) for r in results]
    assert revisions == sorted(revisions) and len(set(revisions)) == 6
    assert [r.created for r in results] == [True, False, False, False, False, False]
    stored = await store.exports.get("c00", "demo", "web")
    assert stored.spec.ports[0].port == 8005

    # A PUT then a DELETE of the same record, queued together: the DELETE comes last.
    put, last = await asyncio.gather(
        store.exports.put("c01", make_export("c01", name="gone")),
        store.exports.delete("c01", "demo", "gone"),
    )
    assert put.created and last.metadata.name == "gone"
    with pytest.raises(NotFound):
        await store.exports.get("c01", "demo", "gone")


async def test_a_failing_write_fails_alone(store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    real = batch_module.write_exports
    poisoned_sizes: list[int] = []

    async def poisoned(conn: Any, ctx: Any, mutations: Sequence[Mutation], **kw: Any) -> Any:
        if any(m.name == "poison" for m in mutations):
            poisoned_sizes.append(len(mutations))
            raise RuntimeError("this export cannot be written")
        return await real(conn, ctx, mutations, **kw)

    monkeypatch.setattr(batch_module, "write_exports", poisoned)
    answers = await asyncio.gather(
        *(store.exports.put(c, make_export(c, name="fine")) for c in CLUSTERS[:4]),
        store.exports.put("c05", make_export("c05", name="poison")),
        *(store.exports.put(c, make_export(c, name="also-fine")) for c in CLUSTERS[:4]),
        return_exceptions=True,
    )
    assert max(poisoned_sizes) > 1, "the poisoned write should have shared a batch"
    assert poisoned_sizes[-1] == 1, "then been retried alone"
    failures = [a for a in answers if isinstance(a, BaseException)]
    assert len(failures) == 1 and "cannot be written" in str(failures[0])
    names = sorted(
        (e.spec.service_reference.cluster_id, e.metadata.name)
        for e in (await store.exports.list()).items
    )
    assert names == sorted(
        [(c, "fine") for c in CLUSTERS[:4]] + [(c, "also-fine") for c in CLUSTERS[:4]]
    )
    await assert_verdicts_match_fresh_judgement(store, name="fine")
    await assert_verdicts_match_fresh_judgement(store, name="also-fine")


async def test_a_caller_that_goes_away_neither_loses_its_write_nor_others(store: Store) -> None:
    others = [
        asyncio.create_task(store.exports.put(c, make_export(c, name="kept")))
        for c in CLUSTERS[1:5]
    ]
    leaving = asyncio.create_task(store.exports.put("c00", make_export("c00", name="kept")))
    await asyncio.sleep(0)  # every write queued
    leaving.cancel()
    results = await asyncio.gather(*others)
    assert all(r.created for r in results)
    with pytest.raises(asyncio.CancelledError):
        await leaving
    await store.exports.close()  # the queue drained
    kept = await store.exports.get("c00", "demo", "kept")
    assert kept.metadata.resource_version
    await assert_verdicts_match_fresh_judgement(store, name="kept")


async def test_each_transaction_reports_how_many_writes_it_carried(store: Store) -> None:
    sizes: list[float] = []
    store.instrument(
        tracer=trace.NoOpTracer(), resolution_seconds=lambda _: None, write_batch_size=sizes.append
    )
    await store.exports.put("c00", make_export("c00", name="alone"))
    assert sizes == [1]

    sizes.clear()
    await asyncio.gather(*(store.exports.put(c, make_export(c, name="many")) for c in CLUSTERS))
    assert sum(sizes) == len(CLUSTERS)
    assert len(sizes) < len(CLUSTERS)


async def test_export_and_slice_batches_in_flight_together_each_commit(store: Store) -> None:
    """The two kinds of group commit run side by side on the same keys (a slice write locks
    its export's key): both take clusters, keys, then the revision row, so neither waits
    on the other for ever, and every write gets its own revision."""
    for cluster in CLUSTERS[:8]:
        await store.exports.put(cluster, make_export(cluster, name="web"))
    slices = [
        store.endpointslices.put(
            cluster,
            EndpointSliceExport.model_validate(
                {
                    "metadata": {"name": f"web-{cluster}", "namespace": "demo"},
                    "spec": {
                        "serviceName": "web",
                        "addressType": "IPv4",
                        "ports": [{"name": "http", "port": 8080}],
                        "endpoints": [{"addresses": ["10.1.0.7"]}],
                    },
                }
            ),
        )
        for cluster in CLUSTERS[:8]
    ]
    exports = [
        store.exports.put(cluster, make_export(cluster, name="web", ports=[port(8000 + i, "http")]))
        for i, cluster in enumerate(CLUSTERS[:8])
    ]
    answers = await asyncio.wait_for(asyncio.gather(*slices, *exports), timeout=60)
    revisions = [int(a.object.metadata.resource_version or 0) for a in answers]
    assert len(set(revisions)) == len(answers)
    assert len((await store.endpointslices.list()).items) == 8
    await assert_verdicts_match_fresh_judgement(store, name="web")
