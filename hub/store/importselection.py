"""Export to a subset: which clusters' import feeds leave a key out
(`mcsync.io/import-clusters`, docs/reference.md#cluster-selection).

A key's ServiceImport may name its importers with one property selector (the winner's,
`spec.importClusters`). A cluster whose reported properties do not match it gets no
ServiceImport, derived Service or slices for that key: the hub leaves the key out of that
cluster's import list and watch. Two tables hold the state (migration 0007):
`import_selectors` (the keys that have a selector) and `import_exclusions` ((cluster, key)
for every cluster such a selector leaves out; a cluster that never reported properties is
judged as having none).

Two writes change it, each in its own transaction, and each records what the changed
clusters' feeds must see as *audience* rows of the import feed (rows meant for one cluster:
the object carries `mcsync.io/audience: <cluster>`, and a ServiceImport row's `cluster_id`
is that cluster, so a watch finds its own with the history's index):

* a key's selector changes (an export write; `judge_key`, called by
  `importchanges.follow_exports` under the key's lock): every cluster is judged against the
  new selector — O(clusters), for a change that is rare;
* a cluster's properties change (`judge_cluster`, `clusterproperties`): that cluster is
  judged against every key that has a selector — O(keys with a selector), never the fleet.

A cluster left out of a key gets, for it: a DELETED of each slice it held, then a DELETED
of the ServiceImport (the *marker*: from it on, the watch skips the key's events). Let in,
it gets an ADDED of the ServiceImport (the marker) and of each slice, as they are now.
The agent then adds or removes its objects as for any import. Only the changed clusters'
feeds carry these rows: cost O(affected clusters times the key's slices).

The import watch of cluster C (`hub.api.importselection`) starts from the keys C is left
out of *at its start revision N*: the table's rows, corrected by C's markers after N (a
key whose first marker after N is an ADDED was left out at N, a DELETED was let in), both
read in one statement (`import_watch_start`, with C's import scope and the revision
counter), so one snapshot: a flip committed by then is in the table and among the markers,
and the markers undo it. Then every marker it streams updates that set, and a fleet-wide
event of a key in the set is skipped — a pure function of the history, whichever replica
serves it.

Consistency: a key's selector is judged under the key's lock with every cluster's stored
properties; a properties change holds the import-selection lock exclusively
(`locks.lock_selection_exclusive`) while every key writer holds it shared, so the two never
interleave and the audience rows a properties change reads (a key's import and slices) are
the committed ones. On SQLite every writer is already alone.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError
from sqlalchemy import (
    BigInteger,
    Integer,
    String,
    Text,
    and_,
    bindparam,
    cast,
    delete,
    literal_column,
    null,
    select,
    union_all,
)
from sqlalchemy.ext.asyncio import AsyncConnection

from hub.store import codec
from hub.store.context import StoreContext
from hub.store.rows import Write
from hub.store.tables import (
    REVISION_ROW_ID,
    changes,
    clusters,
    import_exclusions,
    import_selectors,
)
from hub.store.tables import revision as revision_table
from hub.store.usage import scope_patterns
from shared import constants
from shared.clusterselection import ImportClustersSelector, matches

__all__ = [
    "ANNOTATION_AUDIENCE",
    "IMPORT_CLUSTERS_FIELD",
    "ImportWatchStart",
    "excluded_keys",
    "forget_cluster",
    "import_watch_start",
    "judge_cluster",
    "judge_key",
    "judge_new_cluster",
    "selected",
    "selector_of",
]

Key = tuple[str, str]

# The ServiceImport spec's field holding the winner's `mcsync.io/import-clusters`.
IMPORT_CLUSTERS_FIELD = "importClusters"
# On an audience row's object: the one cluster whose import feed carries it.
ANNOTATION_AUDIENCE = "mcsync.io/audience"


def selector_of(spec_text: str | None) -> ImportClustersSelector | None:
    """The import-clusters selector of a stored ServiceImport spec (None: every cluster
    imports). A selector the hub cannot read (it was validated when stored) counts as
    absent, so a key is never hidden by mistake."""
    if not spec_text or f'"{IMPORT_CLUSTERS_FIELD}"' not in spec_text:
        return None  # every write asks: most specs are not even parsed
    raw = json.loads(spec_text).get(IMPORT_CLUSTERS_FIELD)
    if raw is None:
        return None
    try:
        return ImportClustersSelector.model_validate(raw)
    except ValidationError:
        return None


def _selector_text(selector: ImportClustersSelector | None) -> str | None:
    if selector is None:
        return None
    return codec.canonical_json(selector.model_dump(mode="json", by_alias=True))


def selected(selector: ImportClustersSelector, properties: Mapping[str, str] | None) -> bool:
    """Whether a cluster with `properties` (None: never reported, judged as none) imports."""
    return matches(selector, properties or {}, {})


async def _properties_of_clusters(conn: AsyncConnection) -> dict[str, dict[str, str]]:
    rows = await conn.execute(
        select(clusters.c.name, clusters.c.properties).where(clusters.c.deleting.is_(False))
    )
    return {name: (json.loads(text) if text else {}) for name, text in rows}


async def _excluded_clusters(conn: AsyncConnection, key: Key) -> set[str]:
    rows = await conn.execute(
        select(import_exclusions.c.cluster_id).where(
            import_exclusions.c.namespace == key[0], import_exclusions.c.name == key[1]
        )
    )
    return {r[0] for r in rows}


async def excluded_keys(conn: AsyncConnection, cluster: str) -> set[Key]:
    """The keys `cluster` is left out of now (its primary-key range)."""
    rows = await conn.execute(
        select(import_exclusions.c.namespace, import_exclusions.c.name).where(
            import_exclusions.c.cluster_id == cluster
        )
    )
    return {(ns, name) for ns, name in rows}


async def judge_key(
    conn: AsyncConnection,
    ctx: StoreContext,
    key: Key,
    *,
    before: str | None,
    after: str | None,
) -> tuple[set[str], set[str]]:
    """A key's ServiceImport spec goes from `before` to `after` (None: absent). Stores the
    key's selector and exclusions; answers (clusters now left out, clusters now let in).
    Nothing is read when neither spec has a selector (the common case). A key that goes
    away forgets its rows and flips nobody: its DELETED reaches every watch, which then
    forgets it too."""
    old, new = selector_of(before), selector_of(after)
    if old is None and new is None:
        return set(), set()
    if after is None:
        await conn.execute(delete(import_selectors).where(_key_is(import_selectors, key)))
        await conn.execute(delete(import_exclusions).where(_key_is(import_exclusions, key)))
        return set(), set()
    if _selector_text(old) == _selector_text(new):
        return set(), set()
    was = await _excluded_clusters(conn, key)
    now: set[str] = set()
    if new is not None:
        properties = await _properties_of_clusters(conn)
        now = {c for c, values in properties.items() if not selected(new, values)}
    writes = [
        Write.delete(import_exclusions, [(c, *key) for c in sorted(was - now)]),
        Write("insert", import_exclusions,
              [{"cluster_id": c, "namespace": key[0], "name": key[1]} for c in sorted(now - was)]),
    ]
    if new is None:
        await conn.execute(delete(import_selectors).where(_key_is(import_selectors, key)))
    else:
        writes.append(Write("upsert", import_selectors, [
            {"namespace": key[0], "name": key[1], "selector": _selector_text(new)}
        ]))
    await ctx.rows.write(conn, writes)
    return now - was, was - now


async def judge_cluster(
    conn: AsyncConnection, ctx: StoreContext, cluster: str, properties: Mapping[str, str]
) -> tuple[set[Key], set[Key]]:
    """`cluster`'s properties are now `properties`: stores its exclusions; answers (keys
    now left out, keys now let in). Call under `locks.lock_selection_exclusive`. Reads the
    keys that have a selector, never the others."""
    rows = await conn.execute(select(import_selectors))
    wanted = {
        (r["namespace"], r["name"])
        for r in rows.mappings()
        if not selected(ImportClustersSelector.model_validate_json(r["selector"]), properties)
    }
    was = await excluded_keys(conn, cluster)
    await ctx.rows.write(conn, [
        Write.delete(import_exclusions, [(cluster, *k) for k in sorted(was - wanted)]),
        Write("insert", import_exclusions,
              [{"cluster_id": cluster, "namespace": k[0], "name": k[1]}
               for k in sorted(wanted - was)]),
    ])
    return wanted - was, was - wanted


async def judge_new_cluster(conn: AsyncConnection, ctx: StoreContext, cluster: str) -> None:
    """A cluster just registered has reported no properties: it is left out of every key
    whose selector needs one. Its feed holds nothing yet, so no audience row is needed."""
    await judge_cluster(conn, ctx, cluster, {})


async def forget_cluster(conn: AsyncConnection, cluster: str) -> None:
    """A deregistered cluster's exclusions go with it."""
    await conn.execute(delete(import_exclusions).where(import_exclusions.c.cluster_id == cluster))


def _key_is(table: Any, key: Key) -> Any:
    return and_(table.c.namespace == key[0], table.c.name == key[1])


def _corrected(now: set[Key], markers: list[tuple[Key, str]]) -> set[Key]:
    """The keys left out at a revision: those left out `now`, corrected by the markers
    after that revision (in revision order), each key's first marker deciding."""
    first: dict[Key, str] = {}
    for key, kind in markers:
        first.setdefault(key, kind)
    at = set(now)
    for key, kind in first.items():
        if kind == "ADDED":  # let in after the revision: left out at it
            at.add(key)
        else:  # left out after it: let in at it
            at.discard(key)
    return at


@dataclass(frozen=True)
class ImportWatchStart:
    """What a cluster's import watch starts from (`import_watch_start`)."""

    # The cluster's `spec.importNamespaces` (None: absent, or no such cluster;
    # docs/reference.md#scope-and-limits).
    scope: list[str] | None
    # The watch's start revision: the one it was asked for, else the current one.
    revision: int
    # The keys the cluster is left out of at `revision` (docs/reference.md#cluster-selection).
    excluded: set[Key]


# What an import watch starts from, in ONE statement (`import_watch_start`): a UNION ALL
# of the cluster's import scope (part 0), the revision counter (1), the cluster's rows of
# the exclusions table (2) and, when the watch names its start revision, the cluster's
# markers after it (3). One statement reads one snapshot on both databases, so the table
# and the markers are read together: a flip is in both or in neither, and the markers
# correct the table back to the start revision either way. A watch from now starts at
# the counter read in that same snapshot, after which no marker has committed yet.
_PART_SCOPE, _PART_REVISION, _PART_EXCLUDED, _PART_MARKER = range(4)


def _no(kind: Any) -> Any:
    return cast(null(), kind)


def _watch_start_query(*, markers: bool) -> Any:
    # NULLs cast to the plain types: PostgreSQL takes no COLLATE inside a CAST, and a
    # NULL of the default collation unites with the columns' "C" without a conflict.
    text, key, kind, number = Text(), String(), String(), BigInteger()
    parts = [
        select(
            literal_column(str(_PART_SCOPE), Integer).label("part"),
            clusters.c.import_namespaces.label("scope"),
            _no(key).label("namespace"),
            _no(key).label("name"),
            _no(kind).label("type"),
            _no(number).label("revision"),
        ).where(clusters.c.name == bindparam("cluster")),
        select(
            literal_column(str(_PART_REVISION), Integer),
            _no(text),
            _no(key),
            _no(key),
            _no(kind),
            revision_table.c.value,
        ).where(revision_table.c.id == REVISION_ROW_ID),
        select(
            literal_column(str(_PART_EXCLUDED), Integer),
            _no(text),
            import_exclusions.c.namespace,
            import_exclusions.c.name,
            _no(kind),
            _no(number),
        ).where(import_exclusions.c.cluster_id == bindparam("cluster")),
    ]
    if markers:
        parts.append(
            select(
                literal_column(str(_PART_MARKER), Integer),
                _no(text),
                changes.c.namespace,
                changes.c.name,
                changes.c.type,
                changes.c.revision,
            ).where(
                changes.c.cluster_id == bindparam("cluster"),
                changes.c.kind == constants.KIND_IMPORT,
                changes.c.revision > bindparam("after"),
            )
        )
    return union_all(*parts)


_WATCH_FROM_NOW = _watch_start_query(markers=False)
_WATCH_FROM_REVISION = _watch_start_query(markers=True)


async def import_watch_start(
    ctx: StoreContext, cluster: str, revision: int | None
) -> ImportWatchStart:
    """What the import watch of `cluster` from `revision` (None: from now) starts from,
    read in ONE statement (`_watch_start_query`): every agent holds an import watch and
    re-opens it when its timeout ends or its replica is lost (docs/reference.md#fleet-scale),
    and each read transaction costs a replica a pool checkout, its ping and its end, and
    each statement its execution, besides what the database does."""
    parameters: dict[str, Any] = {"cluster": cluster}
    if revision is None:
        statement = _WATCH_FROM_NOW
    else:
        statement, parameters["after"] = _WATCH_FROM_REVISION, revision
    scope_text: str | None = None
    counter = 0
    now: set[Key] = set()
    markers: list[tuple[int, Key, str]] = []
    async with ctx.read() as conn:
        for part, scope_row, ns, name, kind, number in await conn.execute(statement, parameters):
            if part == _PART_SCOPE:
                scope_text = scope_row
            elif part == _PART_REVISION:
                counter = int(number)
            elif part == _PART_EXCLUDED:
                now.add((ns, name))
            else:
                markers.append((int(number), (ns, name), kind))
    start = counter if revision is None else revision
    markers.sort()
    return ImportWatchStart(
        scope=scope_patterns(scope_text),
        revision=start,
        excluded=_corrected(now, [(key, kind) for _, key, kind in markers]),
    )
