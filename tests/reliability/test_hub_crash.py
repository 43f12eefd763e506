"""`kill -9` of the hub in the middle of a stream of thousands of exports
(docs/reference.md#failover: an export the hub answered 2xx for is durable).

Besides the simulated agents, one real agent (`python -m member`, reaching the hub
through a proxy that follows the hub to its new port) exports `REAL_EXPORTS` Services of
an emulated cluster: half before the stream, a quarter created just as the kill is sent,
a quarter while the hub is dead. After the restart it must converge — every one
`Ready=True/Exported`, one histogram data point each, none doubled by the crash.

Several simulated agents (`LoadAgent`: one member cluster each, its own token, PUTs
retried on a refused connection as the real agent's hub client does) stream
`CLUSTERS x PER_CLUSTER` exports over shared service keys, so verdicts are judged across
clusters (every tenth key is a PortConflict). When `KILL_AT` exports are acknowledged the
hub process gets SIGKILL, mid-stream. A new hub process starts on the same database, and
before any agent may send again the test checks that every acknowledged export is stored
with the acknowledged spec and a resourceVersion no older than the acknowledged one.
Then the agents resume and finish; at the end every export is there once, every verdict
equals a fresh judgement of its key, and the new hub exits 0 on SIGTERM.

Runs on SQLite and PostgreSQL. Real processes, loopback only; bounded by `DEADLINE`.
"""

from __future__ import annotations

import asyncio
import signal
import time
from pathlib import Path

import httpx
import pytest

from hub.store import Store
from tests.e2e.test_hub_process import HubProcess
from tests.kube.fixtures import KubeCluster
from tests.member.agent_support import AgentFactory, AgentProcess
from tests.member.test_agent_resilience import CLUSTER, histogram_count
from tests.reliability.support import (
    Figures,
    HubTarget,
    LoadAgent,
    RecordProperty,
    ThreadedProxy,
    assert_fleet_consistent,
    create_real_exports,
    exports_of,
    real_agent_converged,
    start_real_agent,
)

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.reliability]

ADMIN_TOKEN = "crash-admin-token-0123456789abcdef"
CLUSTERS = 4
PER_CLUSTER = 500
KILL_AT = 800
REAL_EXPORTS = 20
DEADLINE = 240.0


async def _start_hub(database_url: str, cwd: Path, hubs: list[HubProcess]) -> HubProcess:
    hub = HubProcess(database_url=database_url, cwd=cwd, env={"MCSYNC_ADMIN_TOKEN": ADMIN_TOKEN})
    hubs.append(hub)
    await asyncio.to_thread(hub.wait_ready)
    return hub


def _real_agent(
    kube: KubeCluster, agents: AgentFactory, proxy: ThreadedProxy, token: str
) -> AgentProcess:
    create_real_exports(kube, range(REAL_EXPORTS // 2))  # half before the stream …
    return start_real_agent(kube, agents, f"http://127.0.0.1:{proxy.port}", token)


async def _crash_scenario(
    database_url: str, tmp_path: Path, hubs: list[HubProcess], figures: Figures,
    kube: KubeCluster, agent_factory: AgentFactory,
) -> None:
    deadline = time.monotonic() + DEADLINE
    first = await _start_hub(database_url, tmp_path, hubs)
    admin = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
    target = HubTarget(first.url)
    proxy = ThreadedProxy(first.port)
    try:
        await _stream_and_crash(
            database_url, tmp_path, hubs, figures, kube, agent_factory, proxy, deadline,
            first, admin, target,
        )
    finally:
        proxy.close()


async def _stream_and_crash(
    database_url: str, tmp_path: Path, hubs: list[HubProcess], figures: Figures,
    kube: KubeCluster, agent_factory: AgentFactory, proxy: ThreadedProxy, deadline: float,
    first: HubProcess, admin: dict[str, str], target: HubTarget,
) -> None:
    limits = httpx.Limits(max_connections=CLUSTERS * 2)
    async with httpx.AsyncClient(timeout=30, limits=limits) as client:
        registered = await client.post(
            f"{first.url}/api/v1/clusters", json={"metadata": {"name": CLUSTER}}, headers=admin
        )
        assert registered.status_code == 201, registered.text
        real = await asyncio.to_thread(
            _real_agent, kube, agent_factory, proxy, registered.json()["token"]
        )
        agents = []
        for index in range(CLUSTERS):
            cluster = f"load-{index}"
            answer = await client.post(
                f"{first.url}/api/v1/clusters", json={"metadata": {"name": cluster}},
                headers=admin,
            )
            assert answer.status_code == 201, answer.text
            agents.append(
                LoadAgent(
                    cluster=cluster, token=answer.json()["token"], target=target,
                    keys=[f"svc-{k:04d}" for k in range(PER_CLUSTER)], created_offset=index + 1,
                )
            )
        streams = [asyncio.create_task(a.run(client=client, deadline=deadline)) for a in agents]

        # Kill -9 mid-stream, as soon as KILL_AT exports have been acknowledged.
        while sum(len(a.acks) for a in agents) < KILL_AT:
            assert time.monotonic() < deadline, "the stream did not reach KILL_AT"
            for stream in streams:
                if stream.done():
                    stream.result()
            await asyncio.sleep(0.01)
        create_real_exports(kube, range(REAL_EXPORTS // 2, REAL_EXPORTS * 3 // 4))  # … a quarter
        first.process.send_signal(signal.SIGKILL)  # racing the kill, a quarter while down:
        killed_at = time.monotonic()
        await asyncio.to_thread(first.process.wait, 60)
        target.up.clear()  # agents that meet the dead hub now wait for the new one
        acked = {a.cluster: dict(a.acks) for a in agents}
        figures["acknowledged_before_kill"] = sum(len(v) for v in acked.values())

        create_real_exports(kube, range(REAL_EXPORTS * 3 // 4, REAL_EXPORTS))
        second = await _start_hub(database_url, tmp_path, hubs)
        figures["restart_seconds"] = round(time.monotonic() - killed_at, 1)
        proxy.retarget(second.port)

        # Before anyone writes again: every acknowledged export is there, as acknowledged.
        store = await Store.open(database_url)
        try:
            stored = {
                (e.spec.service_reference.cluster_id, e.metadata.name): e
                for e in await exports_of(store, "load")
            }
            lost = []
            for cluster, answers in acked.items():
                for name, answer in answers.items():
                    record = stored.get((cluster, name))
                    if record is None or record.spec.ports[0].port != (
                        answer["spec"]["ports"][0]["port"]
                    ) or int(record.metadata.resource_version or 0) < int(
                        answer["metadata"]["resourceVersion"]
                    ):
                        lost.append((cluster, name))
            figures["lost"] = len(lost)
            figures["stored_after_restart"] = len(stored)
            assert not lost, f"{figures.line()}: lost {lost[:10]}"

            target.url = second.url
            target.up.set()
            async with asyncio.timeout(max(1.0, deadline - time.monotonic())):
                await asyncio.gather(*streams)
            figures["exports"] = sum(len(a.acks) for a in agents)
            figures["agent_retries"] = sum(a.retries for a in agents)
            final = await exports_of(store, "load")
            figures["stored_at_end"] = len(final)
            assert len(final) == CLUSTERS * PER_CLUSTER, figures.line()
            figures["keys_judged"] = await assert_fleet_consistent(store, "load")
            figures["exports_in_conflict"] = sum(
                1 for e in final if getattr(e.condition("Conflict"), "status", "") == "True"
            )
            await asyncio.to_thread(real_agent_converged, kube, real, REAL_EXPORTS)
            figures["real_agent_exports"] = REAL_EXPORTS
            figures["real_agent_histogram_count"] = histogram_count(real)
            assert figures["real_agent_histogram_count"] == REAL_EXPORTS, figures.line()
            assert real.stop() == 0
        finally:
            await store.close()
    assert second.stop() == 0, second.log()[-3000:]


def test_kill_9_mid_stream_loses_no_acknowledged_export(
    database_url: str, tmp_path: Path, hubs: list[HubProcess], record_property: RecordProperty,
    kube_cluster: KubeCluster, agent_factory: AgentFactory,
) -> None:
    figures = Figures(f"kill-9 ({database_url.split(':')[0]})", record_property)
    figures["clusters"] = CLUSTERS
    figures["exports_planned"] = CLUSTERS * PER_CLUSTER
    asyncio.run(
        _crash_scenario(database_url, tmp_path, hubs, figures, kube_cluster, agent_factory)
    )
    figures.report()
    assert figures["lost"] == 0
