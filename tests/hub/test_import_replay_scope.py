"""A scoped import watch's replay reads its scope's history only, cut in SQL
(docs/reference.md#scope-and-limits, docs/reference.md#fleet-scale), on both databases.

Every agent's import watch re-opens from a resourceVersion every few minutes, and all of a
killed replica's at once; the fleet has written in every namespace since. What a cluster
with `spec.importNamespaces` relies on: a re-open from an old revision gets exactly its
scope's events, in revision order, without a gap or a duplicate where the replay hands
over to the live feed (its pages are cut to the scope, so a short page must still mean
"everything of the scope up to where the live feed took over"), and the position a watch
was left at (its last BOOKMARK) resumes exactly; `*` globs cut as `shared.scope` reads
them; rows of no namespace are kept; a revision the history no longer holds is still a
410; `mcsync.io/import-clusters` still judges what the cut replay hands it. The store's
read is checked directly too: not one row outside the scope.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest
from sqlalchemy import insert

from hub.store import Gone, Store
from hub.store.importfeed import ImportRow, like_pattern, prefix_range
from hub.store.revisions import allocate_revisions
from hub.store.tables import changes
from shared import constants, scope
from tests.hub.test_api_support import (
    ADMIN,
    READER,
    Hub,
    bearer,
    port,
    running_hub,
    serving,
    watch_events,
)
from tests.hub.test_store_support import make_export, opened_store
from tests.hub.test_store_support import port as store_port
from tests.hub.test_watch_direct import RawWatch
from tests.hub.test_watch_fanout import until

DEADLINE = 60.0  # generous: a slow shared machine must not fail these
SCOPE = ["team-a", "shop-*"]
INSIDE = ["team-a", "shop-1", "shop-22"]
# Outside, each close to the scope: a longer name than its plain name, names that share the
# glob's first letters but not its prefix, one that holds the prefix but does not start
# with it, and one far away.
OUTSIDE = ["team-ab", "shopping", "shop", "xshop-1", "other"]


def in_scope(namespace: str) -> bool:
    """What the watch must hold: `shared.scope`'s reading of SCOPE, and rows of no
    namespace."""
    return not namespace or scope.allows(SCOPE, namespace)


async def _register(hub: Hub, name: str, **spec: Any) -> str:
    body: dict[str, Any] = {"metadata": {"name": name}}
    if spec:
        body["spec"] = spec
    answer = await hub.client.post("/api/v1/clusters", json=body, headers=ADMIN)
    assert answer.status_code == 201, answer.text
    token: str = answer.json()["token"]
    return token


async def _churn(hub: Hub, east: dict[str, str], rounds: range) -> None:
    """Each round changes every key: three Services in each namespace outside the scope,
    one in each inside it (so most of the history is of other namespaces)."""
    for number in rounds:
        for namespace in [*OUTSIDE, *INSIDE]:
            names = ["web"] if namespace in INSIDE else ["web", "api", "db"]
            for name in names:
                answer = await hub.put(
                    "east", east, namespace=namespace, name=name, ports=[port(number + 1, "p")]
                )
                assert answer.is_success, answer.text


async def _expected(hub: Hub, after: int) -> list[tuple[int, str, str, str, str]]:
    """The scope's changes after `after`, from the fleet's unscoped history read (the
    shared reader's, unchanged by the scope) cut in Python."""
    rows = await hub.store.import_feed.imports_since(after, 100_000)
    return [
        (row.revision, row.type, row.kind, row.namespace, _name(row.event().object))
        for row in rows
        if in_scope(row.namespace)
    ]


def _name(obj: Any) -> str:
    name: str = obj.metadata.name
    return name


def _seen(watch: RawWatch) -> list[tuple[int, str, str, str, str]]:
    return [
        (
            int(e["object"]["metadata"]["resourceVersion"]),
            e["type"],
            e["object"]["kind"],
            e["object"]["metadata"]["namespace"],
            e["object"]["metadata"]["name"],
        )
        for e in watch.events
    ]


async def _current(hub: Hub) -> int:
    return await hub.store.import_feed.current_revision()


async def _caught_up(watch: RawWatch, revision: int) -> None:
    """Until a BOOKMARK at `revision` or later: the watch has sent everything of its scope
    up to there (a BOOKMARK carries its position, `hub.api.watch`)."""
    await until(
        lambda: any(int(b) >= revision for b in watch.bookmarks),
        f"a BOOKMARK at {revision} or later",
    )


async def test_a_scoped_watch_reopened_from_an_old_revision_gets_exactly_its_scope(
    database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Pages of 4: the replay reads many cut pages, full and short, in one re-open.
    monkeypatch.setattr("hub.api.watch.PAGE_SIZE", 4)
    async with running_hub(database_url, watch_bookmark_seconds=0.3) as hub:
        east = bearer(await _register(hub, "east"))
        west = await _register(hub, "west", importNamespaces=SCOPE)
        start = await _current(hub)
        await _churn(hub, east, range(4))

        async with serving(hub.app) as url:
            first = RawWatch()
            second = RawWatch()
            try:
                await first.open(
                    url,
                    f"/api/v1/clusters/west/imports?watch=true&resourceVersion={start}"
                    "&timeoutSeconds=120",
                    west,
                )
                first.start()
                # Changes go on while the watch replays: some reach it by the replay, the
                # rest by the live feed.
                await _churn(hub, east, range(4, 7))
                reached = await _current(hub)
                await _caught_up(first, reached)
                expected = await _expected(hub, start)
                assert len(expected) >= 3 * 7
                assert _seen(first) == expected
                assert {namespace for _, _, _, namespace, _ in expected} == set(INSIDE)

                # Resume from where it was left (its last BOOKMARK), after more changes.
                left_at = max(int(b) for b in first.bookmarks)
                await first.close()
                await _churn(hub, east, range(7, 9))
                await second.open(
                    url,
                    f"/api/v1/clusters/west/imports?watch=true&resourceVersion={left_at}"
                    "&timeoutSeconds=120",
                    west,
                )
                second.start()
                reached = await _current(hub)
                await _caught_up(second, reached)
                rest = await _expected(hub, left_at)
                assert rest and _seen(second) == rest
            finally:
                await first.close()
                await second.close()


async def test_a_scoped_watch_from_before_the_pruned_history_is_410(database_url: str) -> None:
    async with running_hub(database_url, history_limit=2) as hub:
        east = bearer(await _register(hub, "east"))
        west = bearer(await _register(hub, "west", importNamespaces=SCOPE))
        start = await _current(hub)
        for number in range(1, 8):
            await hub.put("east", east, namespace="team-a", ports=[port(number, "p")])
            await hub.put("east", east, namespace="other", ports=[port(number, "p")])
        answer = await hub.client.get(
            f"/api/v1/clusters/west/imports?watch=true&resourceVersion={start}&timeoutSeconds=1",
            headers=west,
        )
        assert answer.status_code == 410
        assert answer.json()["reason"] == "Gone"


async def test_import_clusters_still_judges_a_scoped_replay(database_url: str) -> None:
    region = "region.topology.mcsync.io"
    async with running_hub(database_url, watch_bookmark_seconds=0.3) as hub:
        east = bearer(await _register(hub, "east"))
        west = bearer(await _register(hub, "west", importNamespaces=["demo"]))
        for headers, cluster, value in ((east, "east", "eu"), (west, "west", "us")):
            answer = await hub.client.put(
                f"/api/v1/clusters/{cluster}/properties",
                json={"properties": {region: value}},
                headers=headers,
            )
            assert answer.status_code == 200, answer.text
        start = await _current(hub)
        eu_only = {"matchProperties": {region: "eu"}}
        us_only = {"matchProperties": {region: "us"}}
        # Left out (west is in us), then let in, each among changes of other namespaces.
        await _churn(hub, east, range(2))
        put = await hub.put("east", east, importClusters=eu_only)
        assert put.status_code == 201, put.text
        await _churn(hub, east, range(2, 4))
        put = await hub.put("east", east, importClusters=us_only)
        assert put.status_code == 200, put.text
        await _churn(hub, east, range(4, 6))
        answer = await hub.client.get(
            f"/api/v1/clusters/west/imports?watch=true&resourceVersion={start}&timeoutSeconds=1",
            headers=READER,
        )
        assert answer.status_code == 200, answer.text
        events = [
            (e["type"], e["object"]["kind"], e["object"]["metadata"]["namespace"])
            for e in watch_events(answer.text)
            if e["type"] != "BOOKMARK"
        ]
        # "Not yours" once (a DELETED of what west never had), then the key whole.
        assert events == [
            ("DELETED", constants.KIND_IMPORT, "demo"),
            ("ADDED", constants.KIND_IMPORT, "demo"),
        ]


# --- the store's read ---------------------------------------------------------------------


async def _row_of_no_namespace(store: Store) -> int:
    """A history row whose namespace is '' (the import feed writes none today; the replay
    keeps such a row, as `hub.api.importscope` always judged it)."""
    async with store._ctx.write() as conn:
        revision = await allocate_revisions(conn, count=1, history_limit=100_000)
        await conn.execute(
            insert(changes).values(
                revision=revision,
                cluster_id="",
                namespace="",
                name="nowhere",
                type="MODIFIED",
                object="{}",
                kind=constants.KIND_IMPORT,
            )
        )
    return revision


def _key(row: ImportRow) -> tuple[int, str, str]:
    return row.revision, row.kind, row.namespace


async def _pages(store: Store, after: int, limit: int, patterns: Sequence[str]) -> list[ImportRow]:
    rows: list[ImportRow] = []
    while page := await store.import_feed.imports_since(after, limit, scope=patterns):
        rows += page
        after = page[-1].revision
        if len(page) < limit:
            break
    return rows


async def test_the_scoped_history_read_holds_no_row_outside_the_scope(database_url: str) -> None:
    async with opened_store(database_url, "alpha") as store:
        start = await store.import_feed.current_revision()
        for number in range(3):
            for namespace in [*OUTSIDE, *INSIDE]:
                await store.exports.put(
                    "alpha",
                    make_export("alpha", namespace=namespace, ports=[store_port(number + 1, "p")]),
                )
            if number == 1:
                nowhere = await _row_of_no_namespace(store)
        fleet = await store.import_feed.imports_since(start, 10_000)
        scoped = await store.import_feed.imports_since(start, 10_000, scope=SCOPE)

        assert all(in_scope(row.namespace) for row in scoped)
        assert scoped == [row for row in fleet if in_scope(row.namespace)]
        assert {row.namespace for row in scoped} == {"", *INSIDE}
        assert nowhere in [row.revision for row in scoped]
        # Paged from any point, the pages are the same rows.
        assert await _pages(store, start, 2, SCOPE) == scoped
        middle = scoped[len(scoped) // 2].revision
        assert await _pages(store, middle, 3, SCOPE) == [r for r in scoped if r.revision > middle]
        # A glob of `*` alone holds everything; an empty scope only the rows of no namespace.
        assert [_key(r) for r in await _pages(store, start, 5, ["*"])] == [_key(r) for r in fleet]
        assert [r.revision for r in await _pages(store, start, 5, [])] == [nowhere]
        # A glob with no literal prefix (no range to read by) cuts the same.
        suffix = await store.import_feed.imports_since(start, 10_000, scope=["*-1"])
        assert [r.namespace for r in suffix] == [
            r.namespace for r in fleet if not r.namespace or r.namespace.endswith("-1")
        ]
        assert {"shop-1", "xshop-1"} <= {r.namespace for r in suffix}


def test_a_glob_is_escaped_for_like_and_bounded_by_its_prefix() -> None:
    assert like_pattern("team-*") == "team-%"
    assert like_pattern("a%b_c/d*") == "a/%b/_c//d%"
    assert prefix_range("shop-*") == ("shop-", "shop.")
    assert prefix_range("a*b*") == ("a", "b")
    assert prefix_range("*-prod") is None


async def test_a_scoped_read_from_before_the_pruned_history_is_gone(database_url: str) -> None:
    async with opened_store(database_url, "alpha", history_limit=2) as store:
        start = await store.import_feed.current_revision()
        for number in range(1, 6):
            await store.exports.put(
                "alpha", make_export("alpha", namespace="other", ports=[store_port(number)])
            )
        with pytest.raises(Gone):
            await store.import_feed.imports_since(start, 10, scope=SCOPE)
