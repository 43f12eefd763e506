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
key whose first marker after N is an ADDED was left out at N, a DELETED was let in), read
table first, markers second, so a flip committing between the two reads is seen as a
marker. Then every marker it streams updates that set, and a fleet-wide event of a key in
the set is skipped — a pure function of the history, whichever replica serves it.

Consistency: a key's selector is judged under the key's lock with every cluster's stored
properties; a properties change holds the import-selection lock exclusively
(`locks.lock_selection_exclusive`) while every key writer holds it shared, so the two never
interleave and the audience rows a properties change reads (a key's import and slices) are
the committed ones. On SQLite every writer is already alone.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError
from sqlalchemy import and_, delete, select
from sqlalchemy.ext.asyncio import AsyncConnection

from hub.store import codec
from hub.store.context import StoreContext
from hub.store.rows import Write
from hub.store.tables import changes, clusters, import_exclusions, import_selectors
from shared import constants
from shared.clusterselection import ImportClustersSelector, matches

__all__ = [
    "ANNOTATION_AUDIENCE",
    "IMPORT_CLUSTERS_FIELD",
    "excluded_at",
    "excluded_keys",
    "forget_cluster",
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


async def excluded_at(ctx: StoreContext, cluster: str, revision: int) -> set[Key]:
    """The keys `cluster` was left out of at `revision` (see the module doc): the table,
    then the cluster's markers after `revision`, each key's first one deciding."""
    async with ctx.read() as conn:
        now = await excluded_keys(conn, cluster)
        rows = await conn.execute(
            select(changes.c.namespace, changes.c.name, changes.c.type)
            .where(
                changes.c.cluster_id == cluster,
                changes.c.kind == constants.KIND_IMPORT,
                changes.c.revision > revision,
            )
            .order_by(changes.c.revision)
        )
        first: dict[Key, str] = {}
        for ns, name, kind in rows:
            first.setdefault((ns, name), kind)
    at = set(now)
    for key, kind in first.items():
        if kind == "ADDED":  # let in after `revision`: left out at it
            at.add(key)
        else:  # left out after it: let in at it
            at.discard(key)
    return at

