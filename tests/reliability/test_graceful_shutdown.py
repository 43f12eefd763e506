"""SIGTERM to the hub under load (docs/reference.md#failover: graceful): requests already being
answered finish, open watches end cleanly (a complete stream, not a reset) and promptly (not after
their `timeoutSeconds`), the process exits 0, and every export it acknowledged is there
when the next hub starts. Runs on SQLite and PostgreSQL.

A request that reaches the hub after it stopped accepting is refused at the connection
(the client retries it, as the agent does); it must never get a 5xx or a cut-off answer.
The agent's side (its Lease released on SIGTERM) is proved by
tests/member/test_agent_resilience.py::test_leader_failover.
"""

from __future__ import annotations

import asyncio
import json
import signal
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from hub.store import Store
from tests.e2e.test_hub_process import HubProcess
from tests.hub.test_api_support import export_body
from tests.reliability.support import Figures, RecordProperty, exports_of, hub_running, wait_until

pytestmark = [pytest.mark.e2e, pytest.mark.reliability]

ADMIN_TOKEN = "sigterm-admin-token-0123456789abcdef"
WRITERS = 8
WATCHES = 3
DEADLINE = 90.0


@pytest.fixture
def hub(database_url: str, tmp_path: Path) -> Iterator[HubProcess]:
    with hub_running(database_url, tmp_path, {"MCSYNC_ADMIN_TOKEN": ADMIN_TOKEN}) as process:
        yield process


async def _sigterm_scenario(database_url: str, hub: HubProcess, figures: Figures) -> None:
    deadline = time.monotonic() + DEADLINE
    async with httpx.AsyncClient(timeout=60) as client:
        registered = await client.post(
            f"{hub.url}/api/v1/clusters", json={"metadata": {"name": "east"}},
            headers={"Authorization": f"Bearer {ADMIN_TOKEN}"},
        )
        member = {"Authorization": f"Bearer {registered.json()['token']}"}
        acked: dict[str, str] = {}
        refused: Counter[str] = Counter()
        codes: Counter[int] = Counter()
        stopping = asyncio.Event()
        signalled: list[float] = []  # when SIGTERM was sent
        unanswered: list[str] = []
        spanning = 0  # requests sent before SIGTERM and answered after it

        async def writer(index: int) -> None:
            nonlocal spanning
            for n in range(10_000):
                name = f"w{index}-{n}"
                started = time.monotonic()
                try:
                    answer = await client.put(
                        f"{hub.url}/api/v1/clusters/east/serviceexports/load/{name}",
                        json=export_body("east", namespace="load", name=name), headers=member,
                    )
                except (httpx.ConnectError, httpx.RemoteProtocolError, httpx.ReadError) as exc:
                    # Refused at the door, or sent on an idle keep-alive connection the
                    # hub was closing before it read the request (HTTP's keep-alive race):
                    # no answer at all, never a half one, and the client retries.
                    refused[type(exc).__name__] += 1
                    unanswered.append(name)
                    if stopping.is_set():
                        return
                    raise
                codes[answer.status_code] += 1
                if signalled and started < signalled[0]:
                    spanning += 1
                assert answer.status_code in (200, 201), answer.text
                acked[name] = answer.json()["metadata"]["resourceVersion"]

        watch_ends: list[str] = []

        async def watcher() -> None:
            async with client.stream(
                "GET", f"{hub.url}/api/v1/clusters/east/serviceexports"
                "?watch=true&timeoutSeconds=120", headers=member,
            ) as stream:
                assert stream.status_code == 200
                async for line in stream.aiter_lines():
                    json.loads(line)  # every line a whole event
            watch_ends.append("clean")  # the stream ended with its terminator, no error

        watches = [asyncio.create_task(watcher()) for _ in range(WATCHES)]
        writers = [asyncio.create_task(writer(i)) for i in range(WRITERS)]
        await wait_until(lambda: len(acked) >= 200, deadline=deadline, what="200 exports")
        stopping.set()
        sent = time.monotonic()
        signalled.append(sent)
        hub.process.send_signal(signal.SIGTERM)
        async with asyncio.timeout(60):
            await asyncio.gather(*watches)
        figures["watches_ended_seconds"] = round(time.monotonic() - sent, 1)
        async with asyncio.timeout(60):
            await asyncio.gather(*writers)
        code = await asyncio.to_thread(hub.process.wait, 60)
        figures["exit_seconds"] = round(time.monotonic() - sent, 1)
        figures["exit_code"] = code
        figures["acknowledged"] = len(acked)
        figures["in_flight_at_sigterm_answered"] = spanning
        figures["answers"] = dict(codes)
        figures["refused_after_sigterm"] = dict(refused)
        figures["watches_clean"] = f"{len(watch_ends)}/{WATCHES}"
        assert code == 0, hub.log()[-3000:]
        assert len(watch_ends) == WATCHES

    store = await Store.open(database_url)
    try:
        stored = {e.metadata.name: e.metadata.resource_version
                  for e in await exports_of(store, "load")}
    finally:
        await store.close()
    lost = [n for n in acked if n not in stored]
    figures["lost"] = len(lost)
    assert not lost, lost[:10]
    # A request the hub had read was answered: none it stored went unanswered.
    figures["stored_but_unanswered"] = sum(1 for n in unanswered if n in stored)
    assert figures["stored_but_unanswered"] == 0, figures.line()


def test_sigterm_finishes_in_flight_requests_and_ends_watches(
    database_url: str, hub: HubProcess, record_property: RecordProperty
) -> None:
    figures = Figures(f"hub SIGTERM under load ({database_url.split(':')[0]})", record_property)
    asyncio.run(_sigterm_scenario(database_url, hub, figures))
    figures.report()
    assert "unexpected error" not in hub.log()
