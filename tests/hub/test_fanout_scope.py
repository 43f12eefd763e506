"""The import feed's fan-out indexed by import scope (docs/reference.md#fleet-scale).

A change reaches exactly the watches whose scope holds its namespace — plain names by a
dictionary lookup, `*` globs once per distinct set of patterns — and no other watch does
any work for it: the reader's delivery count is the sum of what each watch wanted. No
database here: the rows come from a list, as `read_page` would hand them.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass

import pytest

from hub.store.fanout import FeedFanout, FeedRow, Subscription
from hub.store.notify import ChangeNotifier

DEADLINE = 30.0


@dataclass(frozen=True)
class Row:
    revision: int
    key: str | None
    type: str = "MODIFIED"

    def line(self) -> bytes:
        return f'{{"rv":{self.revision},"ns":"{self.key}"}}\n'.encode()


def drained(sub: Subscription) -> list[str | None]:
    seen = []
    while (line := sub.take()) is not None:
        seen.append(line.data.decode().split('"ns":"')[1].split('"')[0])
    return seen


async def test_each_change_reaches_only_the_watches_whose_scope_holds_it() -> None:
    rows = [Row(1, "team-1"), Row(2, "team-3"), Row(3, "other-x"), Row(4, "zzz")]

    async def revision() -> int:
        return 0

    async def read_page(after: int, limit: int) -> Sequence[FeedRow]:
        return [r for r in rows if r.revision > after][:limit]

    notifier = ChangeNotifier(read_revision=revision)
    fanout = FeedFanout(notifier=notifier, read_page=read_page, name="test")
    subs = {
        "one": fanout.subscribe(scope=["team-1"]),
        "two-three": fanout.subscribe(scope=["team-2", "team-3"]),
        "glob": fanout.subscribe(scope=["team-*"]),
        "glob-again": fanout.subscribe(scope=["team-*"]),
        "all": fanout.subscribe(None),
        "other": fanout.subscribe(scope=["other-*", "team-1"]),
        "nothing": fanout.subscribe(scope=[]),
    }
    assert fanout.subscriber_count == len(subs)
    try:
        notifier.committed(4)
        async with asyncio.timeout(DEADLINE):
            while fanout.position < 4:  # noqa: ASYNC110 (a condition, not an event)
                await asyncio.sleep(0.01)
        got = {name: drained(sub) for name, sub in subs.items()}
        assert got == {
            "one": ["team-1"],
            "two-three": ["team-3"],
            "glob": ["team-1", "team-3"],
            "glob-again": ["team-1", "team-3"],
            "all": ["team-1", "team-3", "other-x", "zzz"],
            "other": ["team-1", "other-x"],
            "nothing": [],
        }
        # The reader did the work the watches wanted, and none for anyone else.
        assert fanout.deliveries == sum(len(v) for v in got.values())
        assert fanout.encodings == len(rows)
        for sub in subs.values():
            sub.close()
        assert fanout.subscriber_count == 0
        assert not fanout._subscribers and not fanout._patterned
    finally:
        await fanout.close()


@pytest.mark.parametrize("scope", [["a", "b"], ["a-*", "b"]])
async def test_a_scoped_watch_leaves_no_trace_when_closed_twice(scope: list[str]) -> None:
    async def revision() -> int:
        return 0

    async def read_page(after: int, limit: int) -> Sequence[FeedRow]:
        return []

    fanout = FeedFanout(notifier=ChangeNotifier(read_revision=revision), read_page=read_page)
    sub = fanout.subscribe(scope=scope)
    sub.close()
    sub.close()
    assert fanout.subscriber_count == 0
    await fanout.close()
