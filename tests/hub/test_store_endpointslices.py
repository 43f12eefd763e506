"""EndpointSliceExports and the import feed in the store, on SQLite and PostgreSQL
(docs/reference.md#import-path, #rest-api, #change-feeds): put / unchanged / replace / delete, 409
for a Service not exported, withdrawal with the export (DELETE, sync, deregistration) in the same
transaction, each recorded slice cut to the ports its source serves, and slices re-sent when a key's
per-port cluster lists change."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Sequence
from typing import Any

import pytest
from sqlalchemy import func, select

from hub.store import Conflict, Gone, NotFound, Store
from hub.store import endpointslices as endpointslices_module
from hub.store.feed import event_line
from hub.store.importfeed import ImportRow
from hub.store.importview import importer_view, served_ports
from hub.store.tables import changes, endpoint_slices, service_imports
from shared.models import EndpointSliceExport, ServiceImport
from tests.hub.test_store_support import at, make_export, open_store, port, register

HTTP = port(80, "http")
METRICS = port(9090, "metrics")


def make_slice(
    name: str = "web-abcde",
    *,
    namespace: str = "demo",
    service: str = "web",
    ports: list[dict[str, Any]] | None = None,
    addresses: tuple[str, ...] = ("10.1.0.7",),
    **spec: Any,
) -> EndpointSliceExport:
    """An EndpointSliceExport as an agent sends it (target ports under the Service port names)."""
    return EndpointSliceExport.model_validate(
        {
            "metadata": {"name": name, "namespace": namespace},
            "spec": {
                "serviceName": service,
                "addressType": "IPv4",
                "ports": ports if ports is not None else [{"name": "http", "port": 8080}],
                "endpoints": [
                    {"addresses": [address], "conditions": {"ready": True}} for address in addresses
                ],
                **spec,
            },
        }
    )


@pytest.fixture
async def store(database_url: str) -> AsyncIterator[Store]:
    s = await open_store(database_url)
    await register(s, "alpha", "beta")
    try:
        yield s
    finally:
        await s.close()


async def count(store: Store, table: Any) -> int:
    async with store.engine.connect() as conn:
        return int((await conn.execute(select(func.count()).select_from(table))).scalar_one())


async def import_events(store: Store, after: int) -> list[tuple[str, str, str, list[str] | None]]:
    """(type, kind, name, slice port names) of each import-feed change after `after`."""
    out = []
    for row in await store.import_feed.imports_since(after, 1000):
        event = row.event()
        obj = event.object
        names = None
        if isinstance(obj, EndpointSliceExport):
            names = [p.name for p in obj.spec.ports]
        assert isinstance(obj, ServiceImport | EndpointSliceExport)
        out.append((event.type, obj.kind, obj.metadata.name, names))
    return out


async def test_put_creates_then_unchanged_writes_nothing_then_replaces(store: Store) -> None:
    await store.exports.put("alpha", make_export("alpha"))
    start = await store.feed.current_revision()

    created = await store.endpointslices.put("alpha", make_slice())
    assert created.created and created.changed
    assert created.object.spec.cluster_id == "alpha"  # filled in from the cluster written under
    revision = await store.feed.current_revision()
    assert created.object.metadata.resource_version == str(revision) != str(start)
    rows = await count(store, changes)

    again = await store.endpointslices.put("alpha", make_slice())
    assert not again.created and not again.changed
    assert again.object == created.object
    assert await store.feed.current_revision() == revision
    assert await count(store, changes) == rows

    replaced = await store.endpointslices.put("alpha", make_slice(addresses=("10.1.0.8",)))
    assert not replaced.created and replaced.changed
    assert int(replaced.object.metadata.resource_version or 0) > revision
    assert replaced.object.metadata.creation_timestamp == created.object.metadata.creation_timestamp
    assert (await store.endpointslices.get("alpha", "demo", "web-abcde")) == replaced.object
    assert [e[:3] for e in await import_events(store, start)] == [
        ("ADDED", "EndpointSliceExport", "web-abcde"),
        ("MODIFIED", "EndpointSliceExport", "web-abcde"),
    ]


async def test_slice_of_a_service_not_exported_is_a_conflict_and_stores_nothing(
    store: Store,
) -> None:
    await store.exports.put("beta", make_export("beta"))  # beta exports it, alpha does not
    revision = await store.feed.current_revision()
    with pytest.raises(Conflict, match="'alpha' does not export Service demo/web"):
        await store.endpointslices.put("alpha", make_slice())
    with pytest.raises(Conflict, match="does not export Service demo/other"):
        await store.endpointslices.put("beta", make_slice(service="other"))
    assert await count(store, endpoint_slices) == 0
    assert await count(store, service_imports) == 1  # no lock row left for demo/other
    assert await store.feed.current_revision() == revision


async def test_bad_cluster_input_is_refused(store: Store) -> None:
    await store.exports.put("alpha", make_export("alpha"))
    with pytest.raises(NotFound, match="gamma"):
        await store.endpointslices.put("gamma", make_slice())
    with pytest.raises(ValueError, match="clusterId 'beta'"):
        await store.endpointslices.put("alpha", make_slice(clusterId="beta"))
    assert await count(store, endpoint_slices) == 0


async def test_delete_withdraws_and_answers_the_last_state(store: Store) -> None:
    await store.exports.put("alpha", make_export("alpha"))
    put = await store.endpointslices.put("alpha", make_slice())
    gone = await store.endpointslices.delete("alpha", "demo", "web-abcde")
    assert gone.spec == put.object.spec
    assert int(gone.metadata.resource_version or 0) > int(put.object.metadata.resource_version or 0)
    with pytest.raises(NotFound, match="web-abcde"):
        await store.endpointslices.delete("alpha", "demo", "web-abcde")
    with pytest.raises(NotFound, match="web-abcde"):
        await store.endpointslices.get("alpha", "demo", "web-abcde")


async def test_withdrawing_the_export_withdraws_its_slices_in_the_same_commit(
    store: Store,
) -> None:
    await store.exports.put("alpha", make_export("alpha"))
    await store.exports.put("beta", make_export("beta"))
    await store.endpointslices.put("alpha", make_slice("web-a1"))
    await store.endpointslices.put("alpha", make_slice("web-a2"))
    await store.endpointslices.put("beta", make_slice("web-b1"))
    before = await store.feed.current_revision()

    withdrawn = await store.exports.delete("alpha", "demo", "web")

    # alpha's slices went, beta's stayed; all in the one commit that withdrew the export:
    # its revisions are the slices', the import's, alpha's withdrawal and beta's re-judged
    # verdict, one after the other (the export rows last)
    assert [s.metadata.name for s in (await store.endpointslices.list()).items] == ["web-b1"]
    rows = await store.import_feed.imports_since(before, 100)
    assert [r.revision for r in rows] == list(range(before + 1, before + 4))
    assert withdrawn.metadata.resource_version == str(before + 4)
    events = await import_events(store, before)
    assert [e[:3] for e in events[:2]] == [
        ("DELETED", "EndpointSliceExport", "web-a1"),
        ("DELETED", "EndpointSliceExport", "web-a2"),
    ]
    assert events[2][:2] == ("MODIFIED", "ServiceImport")
    assert await store.feed.current_revision() - before == len(events) + 2  # + alpha, beta


async def test_the_last_export_going_takes_slices_and_import_along(store: Store) -> None:
    await store.exports.put("alpha", make_export("alpha"))
    await store.endpointslices.put("alpha", make_slice())
    before = await store.feed.current_revision()
    await store.exports.delete("alpha", "demo", "web")
    assert [e[:3] for e in await import_events(store, before)] == [
        ("DELETED", "EndpointSliceExport", "web-abcde"),
        ("DELETED", "ServiceImport", "web"),
    ]
    assert await count(store, endpoint_slices) == 0
    assert (await store.import_feed.list_imports()).items == []


async def test_an_export_sync_withdrawal_withdraws_its_slices(store: Store) -> None:
    await store.exports.sync("alpha", [make_export("alpha"), make_export("alpha", name="api")])
    await store.endpointslices.put("alpha", make_slice("web-a1"))
    await store.endpointslices.put("alpha", make_slice("api-a1", service="api"))
    result = await store.exports.sync("alpha", [make_export("alpha", name="api")])
    assert result.withdrawn == 1
    assert [s.metadata.name for s in (await store.endpointslices.list()).items] == ["api-a1"]


async def test_deregistering_the_cluster_withdraws_its_slices(store: Store) -> None:
    await store.exports.put("alpha", make_export("alpha"))
    await store.exports.put("beta", make_export("beta"))
    await store.endpointslices.put("alpha", make_slice("web-a1"))
    await store.endpointslices.put("beta", make_slice("web-b1"))
    await store.clusters.delete("alpha")
    assert [
        (s.spec.cluster_id, s.metadata.name) for s in (await store.endpointslices.list()).items
    ] == [("beta", "web-b1")]
    with pytest.raises(NotFound):
        await store.endpointslices.put("alpha", make_slice("web-a1"))


async def test_recorded_slices_carry_only_the_ports_their_source_serves(store: Store) -> None:
    # alpha serves http and metrics; beta declares http only: the import's per-port lists
    # say metrics is alpha's alone, so beta's slice (stale, still listing metrics) is cut.
    await store.exports.put("alpha", make_export("alpha", created=at(0), ports=[HTTP, METRICS]))
    await store.exports.put("beta", make_export("beta", created=at(5), ports=[HTTP]))
    both = [{"name": "http", "port": 8080}, {"name": "metrics", "port": 9100}]
    start = await store.feed.current_revision()
    stored = await store.endpointslices.put("beta", make_slice("web-b1", ports=both))
    await store.endpointslices.put("alpha", make_slice("web-a1", ports=both))

    # stored as sent; recorded and listed as imported
    assert [p.name for p in stored.object.spec.ports] == ["http", "metrics"]
    assert [e[2:] for e in await import_events(store, start)] == [
        ("web-b1", ["http"]),
        ("web-a1", ["http", "metrics"]),
    ]
    listed = (await store.import_feed.list_imports()).items
    assert [(item.kind, item.metadata.name) for item in listed] == [
        ("ServiceImport", "web"),
        ("EndpointSliceExport", "web-a1"),
        ("EndpointSliceExport", "web-b1"),
    ]
    cut = {
        i.metadata.name: [p.name for p in i.spec.ports] for i in listed if i.kind != "ServiceImport"
    }  # type: ignore[union-attr]
    assert cut == {"web-a1": ["http", "metrics"], "web-b1": ["http"]}


async def test_a_source_serving_none_of_the_ports_contributes_no_slice(store: Store) -> None:
    # beta's http clashes with alpha's (same name, another port): beta serves no port.
    await store.exports.put("alpha", make_export("alpha", created=at(0), ports=[HTTP]))
    await store.exports.put("beta", make_export("beta", created=at(5), ports=[port(81, "http")]))
    start = await store.feed.current_revision()
    await store.endpointslices.put("beta", make_slice("web-b1"))
    assert [e[:3] for e in await import_events(store, start)] == [
        ("DELETED", "EndpointSliceExport", "web-b1")
    ]
    names = [i.metadata.name for i in (await store.import_feed.list_imports()).items]
    assert names == ["web"]
    assert [s.metadata.name for s in (await store.endpointslices.list()).items] == ["web-b1"]


async def test_slices_are_re_sent_when_the_per_port_lists_change(store: Store) -> None:
    await store.exports.put("alpha", make_export("alpha", created=at(0), ports=[HTTP, METRICS]))
    await store.exports.put("beta", make_export("beta", created=at(5), ports=[HTTP]))
    both = [{"name": "http", "port": 8080}, {"name": "metrics", "port": 9100}]
    await store.endpointslices.put("alpha", make_slice("web-a1", ports=both))
    await store.endpointslices.put(
        "beta", make_slice("web-b1", ports=[{"name": "http", "port": 8080}])
    )

    # beta's http moves to another port number: it clashes and serves no port any more;
    # its slice is re-sent as gone, alpha's (whose ports did not change) is not re-sent.
    before = await store.feed.current_revision()
    await store.exports.put("beta", make_export("beta", created=at(5), ports=[port(81, "http")]))
    events = await import_events(store, before)
    assert [e for e in events if e[1] == "EndpointSliceExport"] == [
        ("DELETED", "EndpointSliceExport", "web-b1", [])
    ]
    assert [e[:2] for e in events if e[1] == "ServiceImport"] == [("MODIFIED", "ServiceImport")]
    # the import's MODIFIED precedes the slice it re-sends
    assert events[0][1] == "ServiceImport"

    # beta agrees again: its slice is back
    before = await store.feed.current_revision()
    await store.exports.put("beta", make_export("beta", created=at(5), ports=[HTTP]))
    events = await import_events(store, before)
    assert [e for e in events if e[1] == "EndpointSliceExport"] == [
        ("ADDED", "EndpointSliceExport", "web-b1", ["http"])
    ]
    again = await store.endpointslices.get("beta", "demo", "web-b1")
    assert again.metadata.resource_version == str(
        (await store.import_feed.imports_since(before, 100))[-1].revision
    )

    # alpha stops serving metrics: its slice is re-sent with http only
    before = await store.feed.current_revision()
    await store.exports.put("alpha", make_export("alpha", created=at(0), ports=[HTTP]))
    events = await import_events(store, before)
    assert [e for e in events if e[1] == "EndpointSliceExport"] == [
        ("MODIFIED", "EndpointSliceExport", "web-a1", ["http"])
    ]

    # a re-PUT of an export that changes no per-port list re-sends nothing
    before = await store.feed.current_revision()
    await store.exports.put(
        "alpha", make_export("alpha", created=at(0), ports=[HTTP], resource_version="7")
    )
    assert [e for e in await import_events(store, before) if e[1] == "EndpointSliceExport"] == []


async def test_the_export_feed_carries_exports_only(store: Store) -> None:
    await store.exports.put("alpha", make_export("alpha"))
    await store.endpointslices.put("alpha", make_slice())
    for events in (
        await store.feed.changes_since(revision=0),
        await store.feed.changes_since(revision=0, cluster_id="alpha"),
    ):
        assert [e.object.kind for e in events] == ["InternalServiceExport"]
    assert [r.cluster_id for r in await store.import_feed.imports_since(0, 10)] == ["", "alpha"]


async def test_import_rows_page_in_revision_order_and_encode_once(store: Store) -> None:
    await store.exports.put("alpha", make_export("alpha"))
    await store.endpointslices.put("alpha", make_slice("web-a1"))
    await store.endpointslices.put("alpha", make_slice("web-a2"))
    rows = await store.import_feed.imports_since(0, 10)
    assert [r.revision for r in rows] == sorted(r.revision for r in rows)
    first: list[ImportRow] = await store.import_feed.imports_since(0, 2)
    rest = await store.import_feed.imports_since(first[-1].revision, 10)
    assert [*first, *rest] == rows
    for row in rows:
        # the bytes every watcher gets: the same event the model would encode
        assert json.loads(row.line()) == json.loads(event_line(row.event()))
        assert row.line().endswith(b"\n")


async def test_import_rows_older_than_the_history_are_gone(database_url: str) -> None:
    store = await open_store(database_url, history_limit=3)
    try:
        await register(store, "alpha")
        for i in range(6):
            await store.exports.put("alpha", make_export("alpha", name=f"svc{i}"))
        with pytest.raises(Gone, match="relist"):
            await store.import_feed.imports_since(0, 10)
    finally:
        await store.close()


async def test_slice_sync_upserts_and_withdraws_the_rest(store: Store) -> None:
    await store.exports.sync("alpha", [make_export("alpha"), make_export("alpha", name="api")])
    first = await store.endpointslices.sync(
        "alpha", [make_slice("web-1"), make_slice("web-2"), make_slice("api-1", service="api")]
    )
    assert (first.created, first.updated, first.unchanged, first.withdrawn) == (3, 0, 0, 0)
    assert first.resource_version == str(await store.feed.current_revision())
    revision = await store.feed.current_revision()

    same = await store.endpointslices.sync(
        "alpha", [make_slice("web-1"), make_slice("web-2"), make_slice("api-1", service="api")]
    )
    assert (same.created, same.updated, same.unchanged, same.withdrawn) == (0, 0, 3, 0)
    assert await store.feed.current_revision() == revision

    second = await store.endpointslices.sync(
        "alpha", [make_slice("web-1", addresses=("10.9.9.9",)), make_slice("web-3")]
    )
    assert (second.created, second.updated, second.unchanged, second.withdrawn) == (1, 1, 0, 2)
    names = [s.metadata.name for s in (await store.endpointslices.list(cluster_id="alpha")).items]
    assert names == ["web-1", "web-3"]


async def test_slice_sync_refuses_bad_input_before_writing(store: Store) -> None:
    await store.exports.put("alpha", make_export("alpha"))
    with pytest.raises(Conflict, match="demo/nope"):
        await store.endpointslices.sync(
            "alpha", [make_slice("web-1"), make_slice("x-1", service="nope")]
        )
    with pytest.raises(ValueError, match="twice"):
        await store.endpointslices.sync("alpha", [make_slice("web-1"), make_slice("web-1")])
    with pytest.raises(NotFound, match="gamma"):
        await store.endpointslices.sync("gamma", [])
    assert await count(store, endpoint_slices) == 0


async def test_a_slice_moving_to_another_service_leaves_the_old_imports(store: Store) -> None:
    await store.exports.sync("alpha", [make_export("alpha"), make_export("alpha", name="api")])
    await store.endpointslices.put("alpha", make_slice("shared-1"))
    before = await store.feed.current_revision()
    moved = await store.endpointslices.put("alpha", make_slice("shared-1", service="api"))
    assert moved.changed and moved.object.spec.service_name == "api"
    assert [e[:3] for e in await import_events(store, before)] == [
        ("DELETED", "EndpointSliceExport", "shared-1"),
        ("ADDED", "EndpointSliceExport", "shared-1"),
    ]
    assert [s.spec.service_name for s in (await store.endpointslices.list()).items] == ["api"]


async def test_list_filters_and_pages(store: Store) -> None:
    for cluster in ("alpha", "beta"):
        await store.exports.sync(
            cluster, [make_export(cluster), make_export(cluster, name="api", namespace="other")]
        )
        await store.endpointslices.sync(
            cluster,
            [
                make_slice(f"web-{cluster}-1"),
                make_slice(f"web-{cluster}-2"),
                make_slice(f"api-{cluster}", service="api", namespace="other"),
            ],
        )
    everything = (await store.endpointslices.list()).items
    assert [(s.metadata.namespace, s.spec.service_name, s.spec.cluster_id) for s in everything] == [
        ("demo", "web", "alpha"),
        ("demo", "web", "alpha"),
        ("demo", "web", "beta"),
        ("demo", "web", "beta"),
        ("other", "api", "alpha"),
        ("other", "api", "beta"),
    ]
    only = await store.endpointslices.list(namespace="demo", service_name="web", cluster_id="beta")
    assert [s.metadata.name for s in only.items] == ["web-beta-1", "web-beta-2"]
    assert (await store.endpointslices.list(service_name="nope")).items == []

    pages, token = [], None
    while True:
        page = await store.endpointslices.list(limit=4, continue_token=token)
        pages.append(page.items)
        token = page.continue_token
        if token is None:
            break
    assert [len(p) for p in pages] == [4, 2]
    assert [s for p in pages for s in p] == everything
    with pytest.raises(ValueError, match="continue"):
        await store.endpointslices.list(continue_token="garbage")
    assert await store.endpointslices.count() == 6


async def test_import_list_pages_through_imports_and_slices(store: Store) -> None:
    for cluster in ("alpha", "beta"):
        await store.exports.sync(
            cluster, [make_export(cluster), make_export(cluster, name="api", namespace="other")]
        )
        await store.endpointslices.sync(
            cluster,
            [
                make_slice(f"web-{cluster}"),
                make_slice(f"api-{cluster}", service="api", namespace="other"),
            ],
        )
    full = await store.import_feed.list_imports()
    assert full.resource_version == str(await store.feed.current_revision())
    assert [(i.kind, i.metadata.name) for i in full.items] == [
        ("ServiceImport", "web"),
        ("EndpointSliceExport", "web-alpha"),
        ("EndpointSliceExport", "web-beta"),
        ("ServiceImport", "api"),
        ("EndpointSliceExport", "api-alpha"),
        ("EndpointSliceExport", "api-beta"),
    ]
    for limit in (1, 2, 4):
        items, token = [], None
        while True:
            page = await store.import_feed.list_imports(limit=limit, continue_token=token)
            assert len(page.items) <= limit
            items.extend(page.items)
            token = page.continue_token
            if token is None:
                break
        assert items == full.items
    with pytest.raises(ValueError, match="continue"):
        await store.import_feed.list_imports(continue_token="garbage")


async def test_slice_writes_racing_the_export_withdrawal_leave_no_orphan(
    database_url: str,
) -> None:
    """Two stores (two hub replicas) over one database: slice PUTs race the withdrawal of
    their export. Each PUT either lands before the withdrawal (and goes with it) or is
    refused with Conflict; no slice outlives its export, nothing answers another error."""
    first = await open_store(database_url)
    second = await Store.open(database_url)
    try:
        await register(first, "alpha")
        for round_ in range(3):
            await first.exports.put("alpha", make_export("alpha"))

            async def put(i: int, round_: int = round_) -> str:
                store = first if i % 2 else second
                try:
                    await store.endpointslices.put("alpha", make_slice(f"web-{round_}-{i}"))
                except Conflict:
                    return "refused"
                return "stored"

            async def withdraw() -> str:
                await asyncio.sleep(0.005)
                await second.exports.delete("alpha", "demo", "web")
                return "withdrawn"

            outcomes = await asyncio.gather(*(put(i) for i in range(12)), withdraw())
            assert set(outcomes) <= {"stored", "refused", "withdrawn"}
            assert await count(first, endpoint_slices) == 0
    finally:
        await second.close()
        await first.close()


@pytest.mark.parametrize(
    ("ports", "served", "imported", "kept"),
    [
        # a slice without ports (a Service without ports) has nothing to cut
        ([], None, True, []),
        # the Service's one unnamed port: the name "" matches
        ([{"port": 8080}], frozenset({""}), True, [""]),
        ([{"name": "http", "port": 8080}], frozenset({"http"}), True, ["http"]),
        # cut to the names served; matched by name, not by number (slices carry target ports)
        (
            [{"name": "http", "port": 8080}, {"name": "metrics", "port": 9100}],
            frozenset({"metrics"}),
            True,
            ["metrics"],
        ),
        # the source serves none of its ports: not imported at all
        ([{"name": "http", "port": 8080}], frozenset({"grpc"}), False, []),
        ([{"name": "http", "port": 8080}], None, False, []),
    ],
)
def test_importer_view_cuts_ports_by_name(
    ports: list[dict[str, Any]], served: frozenset[str] | None, imported: bool, kept: list[str]
) -> None:
    spec = {"serviceName": "web", "addressType": "IPv4", "ports": ports, "endpoints": []}
    got, view = importer_view(spec, served)
    assert got is imported
    assert [p.get("name", "") for p in view["ports"]] == kept
    assert {k: v for k, v in view.items() if k != "ports"} == {
        k: v for k, v in spec.items() if k != "ports"
    }


def test_served_ports_reads_the_per_port_cluster_lists() -> None:
    status = {
        "ports": [
            {"name": "http", "port": 80, "protocol": "TCP", "clusters": ["alpha", "beta"]},
            {"name": "metrics", "port": 9090, "protocol": "TCP", "clusters": ["alpha"]},
        ]
    }
    assert served_ports(json.dumps(status)) == {
        "alpha": frozenset({"http", "metrics"}),
        "beta": frozenset({"http"}),
    }
    assert served_ports(None) == {}


# --- group commit of single-slice writes (hub/store/batch.py's GroupCommit) ------------------


async def test_concurrent_slice_writes_commit_together_each_with_its_own_revision(
    store: Store,
) -> None:
    await store.exports.put("alpha", make_export("alpha"))
    await store.exports.put("beta", make_export("beta"))
    await store.endpointslices.put("alpha", make_slice("web-old"))
    start = await store.feed.current_revision()
    batches = store.endpointslices._batcher.batches

    writes = [
        *(store.endpointslices.put("alpha", make_slice(f"web-a{i}")) for i in range(6)),
        *(store.endpointslices.put("beta", make_slice(f"web-b{i}")) for i in range(6)),
        store.endpointslices.put("alpha", make_slice("web-old")),  # unchanged: no revision
        store.endpointslices.delete("alpha", "demo", "web-old"),  # same slice: later batch
    ]
    *puts, unchanged, deleted = await asyncio.gather(*writes)

    assert 0 < store.endpointslices._batcher.batches - batches < len(writes), "none shared"
    revisions = [int(p.object.metadata.resource_version or 0) for p in puts]
    assert all(p.created and p.changed for p in puts)
    assert len(set(revisions)) == len(puts) and min(revisions) > start
    assert not unchanged.changed and int(unchanged.object.metadata.resource_version or 0) <= start
    assert deleted.metadata.name == "web-old"
    newest = await store.feed.current_revision()
    assert newest == start + len(puts) + 1  # one revision per change, none for the unchanged
    for answer in puts:
        cluster = answer.object.spec.cluster_id
        assert cluster is not None
        stored = await store.endpointslices.get(cluster, "demo", answer.object.metadata.name)
        assert stored == answer.object  # the answer is the row, its revision included
    events = await import_events(store, start)
    assert sorted(name for _, _, name, _ in events) == sorted(
        [p.object.metadata.name for p in puts] + ["web-old"]
    )
    assert events[-1][:3] == ("DELETED", "EndpointSliceExport", "web-old")


async def test_a_slice_refused_in_a_shared_batch_is_refused_alone(store: Store) -> None:
    """An unexported Service (409) and an unregistered cluster (404) are answered per write;
    the slices batched with them commit, and the refused ones leave nothing behind."""
    await store.exports.put("alpha", make_export("alpha"))
    await store.exports.put("beta", make_export("beta"))
    imports_before = await count(store, service_imports)
    batches = store.endpointslices._batcher.batches

    answers = await asyncio.gather(
        store.endpointslices.put("alpha", make_slice("web-1")),
        store.endpointslices.put("alpha", make_slice("nope-1", service="nope")),
        store.endpointslices.put("beta", make_slice("web-2")),
        store.endpointslices.put("ghost", make_slice("web-3")),
        store.endpointslices.delete("ghost", "demo", "web-3"),
        store.endpointslices.put("beta", make_slice("web-4")),
        return_exceptions=True,
    )

    assert 0 < store.endpointslices._batcher.batches - batches < len(answers)
    ok_1, nope, ok_2, ghost, ghost_delete, ok_4 = answers
    assert isinstance(nope, Conflict) and "'alpha' does not export Service demo/nope" in str(nope)
    assert isinstance(ghost, NotFound) and "'ghost' is not registered" in str(ghost)
    assert isinstance(ghost_delete, NotFound) and "demo/web-3 of cluster 'ghost'" in str(
        ghost_delete
    )
    stored = {
        (s.spec.cluster_id, s.metadata.name) for s in (await store.endpointslices.list()).items
    }
    assert stored == {("alpha", "web-1"), ("beta", "web-2"), ("beta", "web-4")}
    for answer in (ok_1, ok_2, ok_4):
        assert not isinstance(answer, BaseException) and answer.created
    assert await count(store, service_imports) == imports_before  # no lock row for demo/nope


async def test_a_failing_slice_write_fails_alone(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = endpointslices_module.write_slices
    poisoned_sizes: list[int] = []

    async def poisoned(conn: Any, ctx: Any, mutations: Sequence[Any], **kw: Any) -> Any:
        if any(m.name == "poison" for m in mutations):
            poisoned_sizes.append(len(mutations))
            raise RuntimeError("this slice cannot be written")
        return await real(conn, ctx, mutations, **kw)

    await store.exports.put("alpha", make_export("alpha"))
    await store.exports.put("beta", make_export("beta"))
    monkeypatch.setattr(endpointslices_module, "write_slices", poisoned)
    fine = [(c, f"fine-{c}-{i}") for c in ("alpha", "beta") for i in range(4)]
    answers = await asyncio.gather(
        *(store.endpointslices.put(c, make_slice(n)) for c, n in fine[:4]),
        store.endpointslices.put("alpha", make_slice("poison")),
        *(store.endpointslices.put(c, make_slice(n)) for c, n in fine[4:]),
        return_exceptions=True,
    )

    assert max(poisoned_sizes) > 1, "the poisoned write should have shared a batch"
    assert poisoned_sizes[-1] == 1, "then been retried alone"
    failures = [a for a in answers if isinstance(a, BaseException)]
    assert len(failures) == 1 and "cannot be written" in str(failures[0])
    stored = {
        (s.spec.cluster_id, s.metadata.name) for s in (await store.endpointslices.list()).items
    }
    assert stored == set(fine)
    revisions = [
        int(a.object.metadata.resource_version or 0)
        for a in answers
        if not isinstance(a, BaseException)
    ]
    assert len(set(revisions)) == len(fine)
