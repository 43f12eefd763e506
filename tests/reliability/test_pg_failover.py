"""The hub on a highly available PostgreSQL pair: a primary failover under load loses
nothing and needs no restart (docs/reference.md#ha-postgresql).

A real pair made here from the installed server binaries (`tests.reliability.pgpair`: a
primary and a synchronous streaming standby, as the `postgres` user, on loopback ports of
their own, removed afterwards whatever happens), two real hub replicas on it, eight
member clusters writing round-robin over both, and a watch per cluster per replica that
re-watches from its last resourceVersion whenever its stream ends
(`tests.reliability.failover_load`). The primary is killed with SIGKILL, each replica's
`/readyz` must then say it has no writable primary (metric 0), the standby is promoted,
and without any restart:

* every answer was 2xx or 503 with Retry-After, none hung until the client's timeout;
* both replicas took writes again within a generous deadline (the timing goal, seconds,
  is bench/pg_failover.py's);
* no acknowledged write is missing from the new primary;
* every watch delivered every acknowledged write of its cluster, and none got a 410;
* both replicas are ready again, metric 1, and each one's LISTEN connection is on the new
  primary.

Three ways the hubs reach the pair, one failover each on one module-scoped pair (the
standby is rebuilt between them):

* `moving-address` — a forwarder standing for a CloudNativePG `-rw` Service / HAProxy /
  VIP; it points at the new primary at the switch and resets the open connections.
* `silent-address` — the same, but the old primary's packets are dropped, not refused:
  the forwarder stops forwarding and closes nothing (a node that vanished sends no FIN),
  so only the hub's timeouts and probe can tell.
* `multi-host` — the libpq host list with `target_session_attrs=read-write`, its first
  host (the primary, through the forwarder) going silent: the promoted second host must
  be found although every connect to the first waits out its timeout.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import asyncpg
import httpx
import pytest

from tests.reliability.failover_load import ADMIN_TOKEN, Outcome, run_failover
from tests.reliability.pgpair import Forwarder, PostgresPair, server_bin
from tests.reliability.support import hub_running

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.reliability]

ENV = {
    "MCSYNC_ADMIN_TOKEN": ADMIN_TOKEN,
    "MCSYNC_RETRY_AFTER_SECONDS": "1",
    "MCSYNC_DATABASE_TIMEOUT_SECONDS": "2",
}
DEADLINE = 60.0
WRITABLE = "mcsync_hub_database_primary_writable"


@pytest.fixture(scope="module")
def pair() -> Iterator[PostgresPair]:
    bin_dir = server_bin()
    if bin_dir is None:
        message = "no PostgreSQL server binaries under /usr/lib/postgresql"
        if os.environ.get("CI"):  # CI has them (its PostgreSQL is the same package)
            pytest.fail(message)
        pytest.skip(message)
    made = PostgresPair(bin_dir=bin_dir)
    try:
        made.start()
        yield made
    finally:
        made.close()


def wait_for_readiness(replicas: list[str], *, ready: bool) -> None:
    """Until every replica's /readyz and primary metric say `ready` (AssertionError at the
    deadline, naming what they said)."""
    deadline = time.monotonic() + DEADLINE
    said: dict[str, str] = {}
    last: dict[str, str] = {}
    while time.monotonic() < deadline:
        for url in replicas:
            try:
                answer = httpx.get(f"{url}/readyz", timeout=5)
                metrics = httpx.get(f"{url}/metrics", timeout=5).text
                writable = f"{WRITABLE} {1.0 if ready else 0.0}"
                if ready and answer.status_code == 200 and writable in metrics:
                    said[url] = "ready"
                elif (
                    not ready
                    and answer.status_code == 503
                    and "no writable primary" in answer.json()["message"]
                    and answer.headers.get("Retry-After") == "1"
                    and writable in metrics
                ):
                    said[url] = "no primary"
                else:
                    said.pop(url, None)
                last[url] = f"{answer.status_code} {answer.text[:200]} primary_writable=" + str(
                    [line for line in metrics.splitlines() if line.startswith(WRITABLE)]
                )
            except httpx.HTTPError as exc:
                last[url] = repr(exc)
        if len(said) == len(replicas):
            return
        time.sleep(0.1)
    raise AssertionError(f"replicas not {'ready' if ready else 'unready'}: {last}")


async def listeners_on(url: str, *, count: int) -> None:
    """Until `count` hub LISTEN connections are on the server at `url` (AssertionError at the
    deadline)."""
    conn = await asyncpg.connect(url, timeout=10)
    try:
        for _ in range(int(DEADLINE * 10)):
            found = await conn.fetchval(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                "AND application_name = 'mcsync-hub listen'"
            )
            if found == count:
                return
            await asyncio.sleep(0.1)
    finally:
        await conn.close()
    raise AssertionError(f"{found} hub LISTEN connections on the new primary, not {count}")


def check(outcome: Outcome, replicas: list[str]) -> None:
    print(f"\n[pg-failover] {outcome.line()} watch_ends={dict(outcome.watch_errors)}")
    bad = {code: n for code, n in outcome.codes.items() if code not in ("200", "201", "503")}
    assert not bad, f"answers other than 2xx/503: {bad}; {outcome.line()}"
    assert outcome.hangs == 0, outcome.line()
    assert outcome.missing_retry_after == 0, outcome.line()
    assert set(outcome.first_2xx_seconds) == set(replicas), outcome.line()
    assert outcome.writes_before_failover > 0, outcome.line()
    assert outcome.writes_after_failover > 0, outcome.line()
    assert outcome.lost == 0, outcome.line()
    assert outcome.missed == 0, outcome.line()
    assert outcome.gone == 0, outcome.line()


@pytest.mark.parametrize("form", ["moving-address", "silent-address", "multi-host"])
async def test_failover_under_load(pair: PostgresPair, form: str, tmp_path: Path) -> None:
    await asyncio.to_thread(pair.ready_for_failover)  # after an earlier form's failover
    database = f"mcsync_{form.replace('-', '_')}"
    await pair.create_database(database)
    forwarder = Forwarder(pair.ports[pair.primary])
    try:
        if form == "multi-host":
            # Host 1 is the primary through the forwarder, which goes silent: the dead
            # node's address drops packets, and the promoted host 2 must still be found.
            hosts = f"127.0.0.1:{forwarder.port},127.0.0.1:{pair.ports[pair.standby]}"
            url = f"postgresql://postgres@{hosts}/{database}?target_session_attrs=read-write"
        else:
            url = f"postgresql://postgres@127.0.0.1:{forwarder.port}/{database}"
        with hub_running(url, tmp_path, ENV) as a, hub_running(url, tmp_path, ENV) as b:
            replicas = [a.url, b.url]

            def fault(promoting: Callable[[], None]) -> None:
                if form != "moving-address":
                    forwarder.blackhole()
                pair.kill_primary()
                wait_for_readiness(replicas, ready=False)
                promoting()
                pair.promote()
                if form != "multi-host":  # the address moves to the new primary
                    forwarder.switch(pair.ports[pair.primary])
                    forwarder.heal()

            async def accepts_writes() -> bool:
                return await pair.accepts_writes(database=database)

            outcome = await run_failover(
                replicas=replicas,
                prefix=form,
                fault=fault,
                accepts_writes=accepts_writes,
                primary_url=lambda: pair.url(pair.primary, database),
                deadline=DEADLINE,
            )
            check(outcome, replicas)
            wait_for_readiness(replicas, ready=True)
            # The LISTEN connection followed the primary: each replica's is on the new one
            # (the feed would also go on by polling the counter, which hides a lost one).
            await listeners_on(pair.url(pair.primary, database), count=len(replicas))
            assert a.process.poll() is None and b.process.poll() is None  # never restarted
    finally:
        forwarder.close()
