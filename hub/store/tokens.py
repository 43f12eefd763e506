"""Member-token lookups that arrive together share one query.

Every member request starts by finding the cluster of its bearer token (SPEC §4.4).
One lookup per request was one pooled connection per request: with 64 agents writing
at once, a profile of the PUT benchmark put 62 % of the request path's samples in that
lookup — checkouts, pre-ping round trips and, past the pool's size, connections opened
and closed for a single SELECT (bench/put_throughput).

`TokenLookup` answers every lookup queued while the previous query ran with one
`SELECT … WHERE token_hash IN (…)`. Nothing is cached: each answer comes from a query
that started after its request arrived, so a deleted cluster's token is refused at once,
on every replica. A lone request is a query of one, without waiting.
"""

from __future__ import annotations

import asyncio

from sqlalchemy import select

from hub.store.context import StoreContext
from hub.store.drain import Drain, answer_slot
from hub.store.tables import clusters

MAX_TOKENS_PER_QUERY = 500


class TokenLookup:
    def __init__(self, ctx: StoreContext) -> None:
        self._ctx = ctx
        self._waiting: dict[str, list[asyncio.Future[str | None]]] = {}
        self._drain = Drain(self._run, name="mcsync-token-lookup")
        self.queries = 0  # tests read it

    async def cluster_of(self, digest: str) -> str | None:
        """The registered, not-deleting cluster whose token hashes to `digest`, or None."""
        answer: asyncio.Future[str | None] = answer_slot()
        self._waiting.setdefault(digest, []).append(answer)
        self._drain.kick()
        return await answer  # a cancelled caller cancels only its own answer

    async def close(self) -> None:
        await self._drain.close()

    async def _run(self) -> None:
        while self._waiting:
            digests = list(self._waiting)[:MAX_TOKENS_PER_QUERY]
            answers = {d: self._waiting.pop(d) for d in digests}
            try:
                found = await self._query(digests)
            except Exception as exc:  # an outage: every request waiting meets it (503)
                for futures in answers.values():
                    for future in futures:
                        if not future.done():
                            future.set_exception(exc)
                continue
            for digest, futures in answers.items():
                for future in futures:
                    if not future.done():
                        future.set_result(found.get(digest))

    async def _query(self, digests: list[str]) -> dict[str, str]:
        self.queries += 1
        condition = (
            clusters.c.token_hash == digests[0]
            if len(digests) == 1
            else clusters.c.token_hash.in_(digests)
        )
        async with self._ctx.read() as conn:
            rows = (
                await conn.execute(
                    select(clusters.c.token_hash, clusters.c.name).where(
                        condition, clusters.c.deleting.is_(False)
                    )
                )
            ).all()
        return {str(digest): str(name) for digest, name in rows}
