"""Member-token lookups that arrive together share one query.

Every member request starts by finding the cluster of its bearer token
(docs/reference.md#credentials). One lookup per request was one pooled connection per request: with
64 agents writing at once, a profile of the PUT benchmark put 62 % of the request path's samples in
that lookup — checkouts, pre-ping round trips and, past the pool's size, connections opened
and closed for a single SELECT (bench/put_throughput).

`TokenLookup` answers every lookup queued while the previous query ran with one
`SELECT … WHERE token_hash IN (…)`. Nothing is cached: each answer comes from a query
that started after its request arrived, so a deleted cluster's token is refused at once,
on every replica. A lone request is a query of one, without waiting.

Rotation (docs/reference.md#credentials): `rotate` gives a cluster a new token and keeps
the replaced one's hash in `previous_token_hash`, accepted until
`previous_token_expires`. The same query finds a digest in either column. The first
request that presents the *new* token retires the previous one at once (one conditional
UPDATE, once per rotation): the agent has the new token, so the old one is only a risk
from then on. Old and new are both accepted meanwhile, so an agent that reads its
Secret late, or sends a last request with the old token, is never refused.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import or_, select, update

from hub.store.context import StoreContext
from hub.store.drain import Drain, answer_slot
from hub.store.errors import NotFound
from hub.store.tables import clusters
from shared.timefmt import utcnow

log = logging.getLogger("mcsync.hub.tokens")

MAX_TOKENS_PER_QUERY = 500


@dataclass(frozen=True)
class _Match:
    cluster: str
    # The hash of a still-kept previous token, when `cluster` was found by its current
    # token: that previous token is retired by this request.
    retire: str | None = None


async def rotate(
    ctx: StoreContext, name: str, *, new_hash: str, grace: timedelta
) -> datetime | None:
    """Make `new_hash` the cluster's token hash and keep the current one accepted for
    `grace` (none: it stops at once). Answers when the previous token expires (None: it
    is not kept). NotFound when the cluster is not registered."""
    now = utcnow()
    keep = grace > timedelta(0)
    expires = now + grace if keep else None
    async with ctx.write() as conn:
        row = (
            await conn.execute(
                select(clusters.c.token_hash).where(
                    clusters.c.name == name, clusters.c.deleting.is_(False)
                )
            )
        ).first()
        if row is None:
            raise NotFound(f"cluster {name!r} is not registered")
        await conn.execute(
            update(clusters)
            .where(clusters.c.name == name)
            .values(
                token_hash=new_hash,
                previous_token_hash=row.token_hash if keep else None,
                previous_token_expires=expires,
            )
        )
    return expires


class TokenLookup:
    def __init__(self, ctx: StoreContext) -> None:
        self._ctx = ctx
        self._waiting: dict[str, list[asyncio.Future[str | None]]] = {}
        self._drain = Drain(self._run, name="mcsync-token-lookup")
        self.queries = 0  # tests read it

    async def cluster_of(self, digest: str) -> str | None:
        """The registered, not-deleting cluster whose token (current, or previous and not
        yet expired) hashes to `digest`, or None."""
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
                match = found.get(digest)
                for future in futures:
                    if not future.done():
                        future.set_result(match.cluster if match is not None else None)
            for match in found.values():
                if match.retire is not None:
                    await self._retire(match.cluster, match.retire)

    async def _retire(self, cluster: str, previous: str) -> None:
        """Stop accepting `cluster`'s previous token: its agent uses the new one. Only that
        previous token: a rotation meanwhile keeps the one it replaced."""
        try:
            async with self._ctx.write() as conn:
                done = await conn.execute(
                    update(clusters)
                    .where(clusters.c.name == cluster, clusters.c.previous_token_hash == previous)
                    .values(previous_token_hash=None, previous_token_expires=None)
                )
        except Exception:  # the next request with the new token tries again
            log.warning("could not retire a rotated member token", exc_info=True)
            return
        if done.rowcount:
            log.info("the agent uses its new token: the previous one is retired",
                     extra={"cluster": cluster})

    async def _query(self, digests: list[str]) -> dict[str, _Match]:
        self.queries += 1
        current = (
            clusters.c.token_hash == digests[0]
            if len(digests) == 1
            else clusters.c.token_hash.in_(digests)
        )
        previous = (
            clusters.c.previous_token_hash == digests[0]
            if len(digests) == 1
            else clusters.c.previous_token_hash.in_(digests)
        )
        async with self._ctx.read() as conn:
            rows = (
                await conn.execute(
                    select(
                        clusters.c.name,
                        clusters.c.token_hash,
                        clusters.c.previous_token_hash,
                        clusters.c.previous_token_expires,
                    ).where(or_(current, previous), clusters.c.deleting.is_(False))
                )
            ).all()
        now = utcnow()
        wanted = set(digests)
        found: dict[str, _Match] = {}
        for row in rows:
            if row.token_hash in wanted:
                found[row.token_hash] = _Match(str(row.name), retire=row.previous_token_hash)
            if (
                row.previous_token_hash in wanted
                and row.previous_token_expires is not None
                and row.previous_token_expires > now
            ):
                found.setdefault(row.previous_token_hash, _Match(str(row.name)))
        return found
