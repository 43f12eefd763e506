"""Two hub replicas on one PostgreSQL behind round-robin, 50 clusters racing to export one
service with different specs (docs/reference.md#conflicts: "two hub replicas racing on one key end
with the same single winner, no deadlock, no 5xx"; docs/reference.md#change-feeds: every replica's
watch sees every change).

PostgreSQL only, inherently: replicas share state only through PostgreSQL (row locks on
the key's ServiceImport row, LISTEN/NOTIFY for the feed). Real processes on loopback.

1. 50 clusters register; each opens a watch on its own exports, alternately on replica A
   and B, from the revision after registration.
2. All 50 PUT the same key `demo/web` at once, round-robin over the replicas, each with
   its own port number (all but the winner's left out of the import: a PortConflict on
   every export), some `Headless` (a TypeConflict), creation timestamps with ties (so
   the cluster id breaks some).
3. The winner withdraws through the other replica: every other export is re-judged.

Checked: every request answered 2xx within the deadline (no deadlock, no 5xx); both
replicas answer byte-identical ServiceImport and export listings; the winner is the
oldest export (ties by cluster id); every stored verdict equals a fresh judgement; and
each cluster's watch delivered exactly the revisions the change history holds for that
cluster's record, in order.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import select

from hub.store import Store
from hub.store.tables import changes
from tests.e2e.test_hub_process import HubProcess
from tests.hub.test_api_support import at, export_body, port
from tests.reliability.support import (
    Figures,
    RecordProperty,
    assert_fleet_consistent,
    hub_running,
    wait_until,
)

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.reliability]

ADMIN_TOKEN = "replicas-admin-token-0123456789abcdef"
ADMIN = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
CLUSTERS = [f"c{i:02d}" for i in range(50)]
DEADLINE = 120.0


@pytest.fixture
def replicas(database_url: str, tmp_path: Path) -> Iterator[tuple[HubProcess, HubProcess]]:
    env = {"MCSYNC_ADMIN_TOKEN": ADMIN_TOKEN}
    with (
        hub_running(database_url, tmp_path, env) as a,
        hub_running(database_url, tmp_path, env) as b,
    ):
        yield a, b


def racing_body(index: int, cluster: str) -> dict[str, Any]:
    return export_body(
        cluster,
        created=at(100 - index // 2),  # pairs share a timestamp: the cluster id decides
        ports=[port(8000 + index, "http")],
        type="Headless" if index % 7 == 0 else "ClusterSetIP",
    )


class Watcher:
    """One cluster's watch stream; records each event's (type, resourceVersion)."""

    def __init__(self, url: str, cluster: str, token: str) -> None:
        self.url, self.cluster, self.token = url, cluster, token
        self.events: list[tuple[str, int]] = []
        self.opened = asyncio.Event()

    async def run(self, client: httpx.AsyncClient, revision: str) -> None:
        async with client.stream(
            "GET",
            f"{self.url}/api/v1/clusters/{self.cluster}/serviceexports"
            f"?watch=true&resourceVersion={revision}&timeoutSeconds=110",
            headers={"Authorization": f"Bearer {self.token}"},
        ) as stream:
            assert stream.status_code == 200, await stream.aread()
            self.opened.set()
            async for line in stream.aiter_lines():
                event = json.loads(line)
                assert event["type"] != "ERROR", event
                if event["type"] != "BOOKMARK":
                    rv = int(event["object"]["metadata"]["resourceVersion"])
                    self.events.append((event["type"], rv))


async def history_by_cluster(store: Store, after: int) -> dict[str, list[int]]:
    async with store.engine.connect() as conn:
        rows = await conn.execute(
            select(changes.c.revision, changes.c.cluster_id)
            .where(changes.c.revision > after)
            .order_by(changes.c.revision)
        )
        history: dict[str, list[int]] = {}
        for row in rows:
            history.setdefault(row.cluster_id, []).append(int(row.revision))
        return history


async def _race(database_url: str, a: HubProcess, b: HubProcess, figures: Figures) -> None:
    deadline = time.monotonic() + DEADLINE
    replicas = [a.url, b.url]
    limits = httpx.Limits(max_connections=200, max_keepalive_connections=200)
    async with httpx.AsyncClient(timeout=60, limits=limits) as client:
        tokens: dict[str, str] = {}
        for index, cluster in enumerate(CLUSTERS):
            answer = await client.post(f"{replicas[index % 2]}/api/v1/clusters",
                                       json={"metadata": {"name": cluster}}, headers=ADMIN)
            assert answer.status_code == 201, answer.text
            tokens[cluster] = answer.json()["token"]
        listing = await client.get(f"{a.url}/api/v1/serviceexports", headers=ADMIN)
        start = listing.json()["metadata"]["resourceVersion"]
        watchers = [Watcher(replicas[i % 2], c, tokens[c]) for i, c in enumerate(CLUSTERS)]
        watching = [asyncio.create_task(w.run(client, start)) for w in watchers]
        async with asyncio.timeout(60):
            await asyncio.gather(*(w.opened.wait() for w in watchers))

        # Round 1: all 50 at once, round-robin over the replicas.
        started = time.monotonic()
        answers = await asyncio.gather(*(
            client.put(
                f"{replicas[(i + 1) % 2]}/api/v1/clusters/{c}/serviceexports/demo/web",
                json=racing_body(i, c), headers={"Authorization": f"Bearer {tokens[c]}"},
            )
            for i, c in enumerate(CLUSTERS)
        ))
        figures["race_seconds"] = round(time.monotonic() - started, 2)
        codes = sorted({r.status_code for r in answers})
        figures["race_answers"] = codes
        assert codes == [201], [r.text for r in answers if r.status_code != 201][:3]

        imports = [
            (await client.get(f"{url}/api/v1/serviceimports/demo/web", headers=ADMIN)).json()
            for url in replicas
        ]
        assert imports[0] == imports[1], "the replicas disagree about the ServiceImport"
        # Oldest timestamp: indexes 48 and 49 (at(76)); the tie goes to the smaller id.
        winner = imports[0]["status"]["winningCluster"]
        figures["winner"] = winner
        assert winner == "c48", imports[0]["status"]
        exports = [
            (await client.get(f"{url}/api/v1/serviceexports?namespace=demo", headers=ADMIN))
            .json()["items"]
            for url in replicas
        ]
        assert exports[0] == exports[1], "the replicas disagree about the exports"
        figures["exports_in_conflict"] = sum(
            1 for e in exports[0]
            for c in e["status"]["conditions"] if c["type"] == "Conflict" and c["status"] == "True"
        )

        # Round 2: the winner withdraws through the other replica; everyone is re-judged.
        withdrawn = await client.delete(
            f"{b.url}/api/v1/clusters/{winner}/serviceexports/demo/web",
            headers={"Authorization": f"Bearer {tokens[winner]}"},
        )
        assert withdrawn.status_code == 200, withdrawn.text
        after = (await client.get(f"{a.url}/api/v1/serviceimports/demo/web", headers=ADMIN))
        figures["winner_after_withdrawal"] = after.json()["status"]["winningCluster"]
        assert figures["winner_after_withdrawal"] == "c49"

        store = await Store.open(database_url)
        try:
            figures["keys_judged"] = await assert_fleet_consistent(store, "demo")
            history = await history_by_cluster(store, int(start))
        finally:
            await store.close()

        def caught_up() -> bool:
            return all(
                [rv for _, rv in w.events] == history.get(w.cluster, []) for w in watchers
            )

        try:
            await wait_until(caught_up, deadline=deadline, what="every watcher saw every change")
        finally:
            for task in watching:
                task.cancel()
            await asyncio.gather(*watching, return_exceptions=True)
        figures["watch_events"] = sum(len(w.events) for w in watchers)
        figures["changes_in_history"] = sum(len(v) for v in history.values())


@pytest.mark.parametrize("backend", ["postgresql"], indirect=True)
def test_two_replicas_fifty_clusters_one_key(
    database_url: str, replicas: tuple[HubProcess, HubProcess], record_property: RecordProperty
) -> None:
    figures = Figures("two replicas, 50 clusters, one key", record_property)
    asyncio.run(_race(database_url, *replicas, figures))
    figures.report()
    for hub in replicas:
        assert "unexpected error" not in hub.log()
        assert hub.stop() == 0, hub.log()[-3000:]
