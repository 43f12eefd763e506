"""The hub on a highly available PostgreSQL pair (docs/reference.md#ha-postgresql): how soon every
hub replica takes writes again after a primary failover, and what is lost.

    python -m bench.pg_failover [--failovers 5] [--writers 8] [--form both] [--smoke]

A real primary and synchronous streaming standby made from the installed server binaries
(`tests.reliability.pgpair`), two hub processes on it, and per failover the load of
`tests.reliability.failover_load`: `--writers` member clusters PUT exports one after
another round-robin over both replicas, a watch per cluster per replica re-watches from
its last resourceVersion whenever its stream ends. The primary is killed with SIGKILL,
one second passes (an HA manager's detection), the standby is promoted with
`pg_ctl promote`, and the run goes on until both replicas answered 2xx again. Then a new
standby is made of the new primary, and the next failover follows — on the same two hub
processes, never restarted.

Per form of `--database-url` (`moving-address`: a forwarder standing for a CloudNativePG
`-rw` Service that moves and resets connections at the switch; `multi-host`: the libpq
host list with `target_session_attrs=read-write`):

* `first_2xx`: from `pg_ctl promote` being called to the first 2xx answer of each
  replica, one sample per replica per failover (target: p99 < 5 s);
* `ceiling`: from the same instant to the first write PostgreSQL itself accepted on the
  new primary (a fresh connection, a temporary table's insert), measured in the same run;
* `lost`: acknowledged writes missing from the new primary afterwards (target 0);
* `missed`: acknowledged writes some watch never delivered (target 0), and its 410s.
"""

from __future__ import annotations

import asyncio
import contextlib
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from bench.support import base_parser, percentiles, write_result
from tests.reliability.failover_load import ADMIN_TOKEN, Outcome, run_failover
from tests.reliability.pgpair import Forwarder, PostgresPair, server_bin
from tests.reliability.support import hub_running

FORMS = ("moving-address", "multi-host")
ENV = {
    "MCSYNC_ADMIN_TOKEN": ADMIN_TOKEN,
    "MCSYNC_RETRY_AFTER_SECONDS": "1",
    "MCSYNC_LOG_LEVEL": "warning",
}
DETECTION_SECONDS = 1.0


@contextlib.contextmanager
def _address(
    pair: PostgresPair, form: str, database: str
) -> Iterator[tuple[str, Forwarder | None]]:
    if form == "multi-host":
        yield pair.multi_host_url(database), None
        return
    forwarder = Forwarder(pair.ports[pair.primary])
    try:
        yield f"postgresql://postgres@127.0.0.1:{forwarder.port}/{database}", forwarder
    finally:
        forwarder.close()


async def _form(pair: PostgresPair, form: str, *, failovers: int, writers: int) -> dict[str, Any]:
    await asyncio.to_thread(pair.ready_for_failover)
    database = f"bench_{form.replace('-', '_')}"
    await pair.create_database(database)
    outcomes: list[Outcome] = []
    with (
        tempfile.TemporaryDirectory() as tmp,
        _address(pair, form, database) as (url, forwarder),
        hub_running(url, Path(tmp), ENV) as a,
        hub_running(url, Path(tmp), ENV) as b,
    ):
        for round_ in range(failovers):

            def fault(promoting: Callable[[], None]) -> None:
                pair.kill_primary()
                time.sleep(DETECTION_SECONDS)
                promoting()
                pair.promote()
                if forwarder is not None:
                    forwarder.switch(pair.ports[pair.primary])

            async def accepts_writes() -> bool:
                return await pair.accepts_writes(database=database)

            outcome = await run_failover(
                replicas=[a.url, b.url],
                prefix=f"r{round_}",
                writers=writers,
                fault=fault,
                accepts_writes=accepts_writes,
                primary_url=lambda: pair.url(pair.primary, database),
                deadline=120.0,
            )
            print(f"[{form} #{round_ + 1}] {outcome.line()}", flush=True)
            outcomes.append(outcome)
            await asyncio.to_thread(pair.ready_for_failover)
        restarted = a.process.poll() is not None or b.process.poll() is not None
    firsts = [s for o in outcomes for s in o.first_2xx_seconds.values()]
    ceilings = [o.ceiling_seconds for o in outcomes if o.ceiling_seconds is not None]
    return {
        "failovers": len(outcomes),
        "first_2xx": percentiles(firsts),
        "ceiling": percentiles(ceilings),
        "acknowledged": sum(len(n) for o in outcomes for n in o.acked.values()),
        "lost": sum(o.lost for o in outcomes),
        "missed": sum(o.missed for o in outcomes),
        "gone": sum(o.gone for o in outcomes),
        "hangs": sum(o.hangs for o in outcomes),
        "answers": dict(sum((o.codes for o in outcomes), start=outcomes[0].codes.__class__())),
        "hub_restarted": restarted,
    }


async def main() -> None:
    parser = base_parser(__doc__ or "")
    parser.add_argument("--failovers", type=int, default=5, help="failovers per form")
    parser.add_argument("--writers", type=int, default=8, help="member clusters writing")
    parser.add_argument("--form", choices=(*FORMS, "both"), default="both")
    args = parser.parse_args()
    if args.smoke:
        args.failovers, args.writers = 1, 2
    bin_dir = server_bin()
    if bin_dir is None:
        raise SystemExit("no PostgreSQL server binaries under /usr/lib/postgresql")
    forms = FORMS if args.form == "both" else (args.form,)
    pair = PostgresPair(bin_dir=bin_dir)
    try:
        await asyncio.to_thread(pair.start)
        result = {
            form: await _form(pair, form, failovers=args.failovers, writers=args.writers)
            for form in forms
        }
    finally:
        pair.close()
    write_result("pg_failover", args, {"writers": args.writers, "forms": result})


if __name__ == "__main__":
    asyncio.run(main())
