"""PostgreSQL goes away under load (docs/reference.md#failover): 503 with Retry-After, never 500;
the hub recovers by itself; nothing acknowledged is lost; watches hear changes again.

PostgreSQL only, inherently: the outage is made with PostgreSQL's own tools, scoped to
the test's own database, because the server is shared with other tests and must never be
stopped. Two kinds of fault, while simulated agents stream exports and a reader lists:

1. *Connections cut*: `pg_terminate_backend` on every backend of the test database,
   several times — the hub's pooled connections and its LISTEN connection die mid-use.
2. *Database down*: `ALTER DATABASE … ALLOW_CONNECTIONS false` plus termination, held for
   `OUTAGE_SECONDS`: no connection can be made at all, as during a server restart. Then
   connections are allowed again.

A real agent (`python -m member`) with 10 exports runs through it too, half of them
created while the database is down: afterwards all are `Ready=True/Exported`, each
counted once in its histogram. A watch held across both faults (resumed from its last
revision whenever it ends, as the agent's feed does) must have seen every acknowledged
export of its cluster. The hub process is never restarted (its pid is checked).
SQLite's equivalent outage is covered in tests/hub/test_api_outage.py.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import asyncpg
import httpx
import pytest

from hub.store import Store
from tests.conftest import postgres_admin_url
from tests.e2e.test_hub_process import HubProcess
from tests.hub.test_api_support import export_body
from tests.kube.fixtures import KubeCluster
from tests.member.agent_support import AgentFactory
from tests.member.test_agent_resilience import CLUSTER, histogram_count
from tests.reliability.support import (
    Figures,
    HubTarget,
    LoadAgent,
    RecordProperty,
    assert_fleet_consistent,
    create_real_exports,
    exports_of,
    hub_running,
    real_agent_converged,
    start_real_agent,
    wait_until,
)

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.reliability]

ADMIN_TOKEN = "outage-admin-token-0123456789abcdef"
READER_TOKEN = "outage-reader-token-0123456789abcdef"
CLUSTERS = 3
PER_CLUSTER = 300
CUT_ROUNDS = 5
OUTAGE_SECONDS = 6.0
REAL_EXPORTS = 10
DEADLINE = 180.0


@pytest.fixture
def hub(database_url: str, tmp_path: Path) -> Iterator[HubProcess]:
    env = {
        "MCSYNC_ADMIN_TOKEN": ADMIN_TOKEN,
        "MCSYNC_READER_TOKEN": READER_TOKEN,
        "MCSYNC_RETRY_AFTER_SECONDS": "2",
    }
    with hub_running(database_url, tmp_path, env) as process:
        yield process


async def _terminate_backends(admin: asyncpg.Connection, database: str) -> int:
    """Cut every connection to `database` (only the test's own database)."""
    killed = await admin.fetch(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
        "WHERE datname = $1 AND pid <> pg_backend_pid()",
        database,
    )
    return len(killed)


async def _reader(url: str, codes: Counter[int], stop: asyncio.Event) -> None:
    headers = {"Authorization": f"Bearer {READER_TOKEN}"}
    async with httpx.AsyncClient(timeout=30) as client:
        while not stop.is_set():
            for path in ("/api/v1/serviceexports?namespace=load&limit=50", "/readyz"):
                answer = await client.get(url + path, headers=headers)
                codes[answer.status_code] += 1
                if answer.status_code == 503:
                    assert answer.headers.get("Retry-After") == "2", answer.headers
                    assert answer.json()["reason"] == "ServiceUnavailable"
            await asyncio.sleep(0.05)


class FollowingWatch:
    """A watch held across the outage, resumed from its last revision whenever it ends —
    as the agent's feed does. Records every export name it saw ADDED or MODIFIED."""

    def __init__(self, url: str, token: str, cluster: str) -> None:
        self.url, self.token, self.cluster = url, token, cluster
        self.names: set[str] = set()
        self.revision = "0"
        self.resumes = 0
        self.ends: Counter[str] = Counter()

    async def run(self, stop: asyncio.Event) -> None:
        headers = {"Authorization": f"Bearer {self.token}"}
        async with httpx.AsyncClient(timeout=60) as client:
            while not stop.is_set():
                try:
                    async with client.stream(
                        "GET",
                        f"{self.url}/api/v1/clusters/{self.cluster}/serviceexports"
                        f"?watch=true&resourceVersion={self.revision}&timeoutSeconds=30",
                        headers=headers,
                    ) as stream:
                        if stream.status_code != 200:
                            self.ends[f"HTTP {stream.status_code}"] += 1
                            assert stream.status_code == 503, await stream.aread()
                            await asyncio.sleep(0.2)
                            continue
                        end = "clean"
                        async for line in stream.aiter_lines():
                            event = json.loads(line)
                            if event["type"] == "ERROR":
                                # The outage reached the stream: a 503 Status ends it, the
                                # client resumes from the last revision it saw.
                                assert event["object"]["code"] == 503, event
                                end = "ERROR 503"
                                break
                            self.revision = event["object"]["metadata"]["resourceVersion"]
                            if event["type"] in ("ADDED", "MODIFIED"):
                                self.names.add(event["object"]["metadata"]["name"])
                        self.ends[end] += 1
                except httpx.TransportError as exc:  # a stream cut mid-way: resume
                    self.ends[type(exc).__name__] += 1
                self.resumes += 1


async def _watch_hears_a_write(url: str, token: str, cluster: str) -> None:
    headers = {"Authorization": f"Bearer {token}"}
    async with httpx.AsyncClient(timeout=60) as client:
        listing = await client.get(f"{url}/api/v1/clusters/{cluster}/serviceexports?limit=1",
                                   headers=headers)
        revision = listing.json()["metadata"]["resourceVersion"]
        async with client.stream(
            "GET",
            f"{url}/api/v1/clusters/{cluster}/serviceexports"
            f"?watch=true&resourceVersion={revision}&timeoutSeconds=60",
            headers=headers,
        ) as stream:
            assert stream.status_code == 200
            written = await client.put(
                f"{url}/api/v1/clusters/{cluster}/serviceexports/after/probe",
                json=export_body(cluster, namespace="after", name="probe"), headers=headers,
            )
            assert written.status_code == 201, written.text
            async with asyncio.timeout(60):
                async for line in stream.aiter_lines():
                    event = json.loads(line)
                    if event["type"] != "BOOKMARK":
                        assert event["object"]["metadata"]["name"] == "probe"
                        return


async def _outage_scenario(
    database_url: str, hub: HubProcess, figures: Figures, kube: KubeCluster,
    agent_factory: AgentFactory,
) -> None:
    deadline = time.monotonic() + DEADLINE
    database = urlsplit(database_url).path.lstrip("/")
    pid = hub.process.pid
    admin_headers = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
    admin = await asyncpg.connect(postgres_admin_url(), timeout=10)
    target = HubTarget(hub.url)
    reads: Counter[int] = Counter()
    stop_reading = asyncio.Event()
    try:
        async with httpx.AsyncClient(timeout=60) as client:
            registered = await client.post(f"{hub.url}/api/v1/clusters",
                                           json={"metadata": {"name": CLUSTER}},
                                           headers=admin_headers)
            assert registered.status_code == 201, registered.text
            create_real_exports(kube, range(REAL_EXPORTS // 2))
            real = await asyncio.to_thread(
                start_real_agent, kube, agent_factory, hub.url, registered.json()["token"]
            )
            agents = []
            for index in range(CLUSTERS):
                cluster = f"load-{index}"
                answer = await client.post(f"{hub.url}/api/v1/clusters",
                                           json={"metadata": {"name": cluster}},
                                           headers=admin_headers)
                assert answer.status_code == 201, answer.text
                agents.append(LoadAgent(
                    cluster=cluster, token=answer.json()["token"], target=target,
                    keys=[f"svc-{k:04d}" for k in range(PER_CLUSTER)], created_offset=index + 1,
                ))
            streams = [
                asyncio.create_task(a.run(client=client, deadline=deadline)) for a in agents
            ]
            reader = asyncio.create_task(_reader(hub.url, reads, stop_reading))
            follower = FollowingWatch(hub.url, agents[0].token, agents[0].cluster)
            following = asyncio.create_task(follower.run(stop_reading))

            def acked() -> int:
                return sum(len(a.acks) for a in agents)

            # 1. Connections cut, several times, while the stream runs.
            cut = 0
            for round_ in range(CUT_ROUNDS):
                goal = (round_ + 1) * CLUSTERS * PER_CLUSTER // 10
                await wait_until(lambda goal=goal: acked() >= goal, deadline=deadline,  # type: ignore[misc]
                                 what=f"{goal} exports acknowledged")
                cut += await _terminate_backends(admin, database)
            figures["backends_terminated"] = cut

            # 2. The database refuses every connection for OUTAGE_SECONDS.
            await admin.execute(f'ALTER DATABASE "{database}" ALLOW_CONNECTIONS false')
            outage_started = time.monotonic()
            try:
                cut += await _terminate_backends(admin, database)
                # The real agent's Kubernetes keeps changing while the hub answers 503.
                create_real_exports(kube, range(REAL_EXPORTS // 2, REAL_EXPORTS))
                before = acked()
                await asyncio.sleep(OUTAGE_SECONDS)
                figures["acked_during_outage"] = acked() - before
            finally:
                await admin.execute(f'ALTER DATABASE "{database}" ALLOW_CONNECTIONS true')
            figures["outage_seconds"] = round(time.monotonic() - outage_started, 1)
            recovered_from = time.monotonic()
            ready = False
            while not ready and time.monotonic() < deadline:
                ready = (await client.get(f"{hub.url}/readyz")).status_code == 200
                await asyncio.sleep(0.1)
            figures["recovery_seconds"] = round(time.monotonic() - recovered_from, 1)

            async with asyncio.timeout(max(1.0, deadline - time.monotonic())):
                await asyncio.gather(*streams)
            def followed() -> bool:
                if following.done():
                    following.result()  # the watch failed: say how
                return follower.names >= set(agents[0].acks)

            try:
                await wait_until(followed, deadline=deadline,
                                 what="the watch held across the outage saw every export")
            except AssertionError as exc:
                missing = sorted(set(agents[0].acks) - follower.names)
                raise AssertionError(
                    f"{exc}: {len(missing)} missing, e.g. {missing[:5]}; resumes "
                    f"{follower.resumes}, ends {dict(follower.ends)}, at {follower.revision}"
                ) from None
            stop_reading.set()
            await reader
            following.cancel()
            await asyncio.gather(following, return_exceptions=True)
            figures["watch_across_outage"] = (
                f"{len(follower.names)} names, {follower.resumes} resumes, "
                f"ends {dict(follower.ends)}"
            )
            await _watch_hears_a_write(hub.url, agents[0].token, agents[0].cluster)
            await asyncio.to_thread(real_agent_converged, kube, real, REAL_EXPORTS)
            figures["real_agent_histogram_count"] = histogram_count(real)
            assert figures["real_agent_histogram_count"] == REAL_EXPORTS, figures.line()
            assert real.stop() == 0

        put_codes: Counter[int] = Counter()
        for agent in agents:
            put_codes.update(agent.answers)
        figures["put_answers"] = dict(sorted(put_codes.items()))
        figures["read_answers"] = dict(sorted(reads.items()))
        figures["retries"] = sum(a.retries for a in agents)
        all_codes = put_codes + reads
        figures["answers_500"] = sum(n for code, n in all_codes.items() if code >= 500
                                     and code != 503)
        assert figures["answers_500"] == 0, figures.line()
        assert all_codes[503] > 0, f"the outage was never seen: {figures.line()}"
        assert hub.process.poll() is None and hub.process.pid == pid  # no restart

        store = await Store.open(database_url)
        try:
            stored = {(e.spec.service_reference.cluster_id, e.metadata.name)
                      for e in await exports_of(store, "load")}
            lost = [(a.cluster, name) for a in agents for name in a.acks
                    if (a.cluster, name) not in stored]
            figures["acknowledged"] = sum(len(a.acks) for a in agents)
            figures["lost"] = len(lost)
            assert not lost, f"{figures.line()}: {lost[:10]}"
            figures["keys_judged"] = await assert_fleet_consistent(store, "load")
        finally:
            await store.close()
    finally:
        await admin.execute(f'ALTER DATABASE "{database}" ALLOW_CONNECTIONS true')
        await admin.close()
    assert "unexpected error" not in hub.log(), hub.log()[-3000:]


@pytest.mark.parametrize("backend", ["postgresql"], indirect=True)
def test_postgres_outage_under_load_is_503_never_500_and_recovers(
    database_url: str, hub: HubProcess, record_property: RecordProperty,
    kube_cluster: KubeCluster, agent_factory: AgentFactory,
) -> None:
    figures = Figures("postgresql outage", record_property)
    asyncio.run(_outage_scenario(database_url, hub, figures, kube_cluster, agent_factory))
    figures.report()
    assert hub.stop() == 0, hub.log()[-3000:]
