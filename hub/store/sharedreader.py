"""A feed's one shared reader per replica, made when the first watch subscribes.

Every feed the hub streams (the import feed, the fleet's cluster properties) holds one
`hub.store.fanout.FeedFanout`: each change read and encoded once, its bytes shared by every
watch of this replica (docs/reference.md#change-feeds). A hub whose feed nobody watches
reads nothing for it, so the reader is made on first use, and closing a feed that never
had one is a no-op. The feed says only how a page of its history is read and its name (the
label of its work in the metrics).
"""

from __future__ import annotations

from hub.store.context import StoreContext
from hub.store.fanout import FeedFanout, ReadPage

__all__ = ["SharedReader"]


class SharedReader:
    """The lazily made `FeedFanout` of one feed: `get()` it, `close()` it with the store."""

    def __init__(self, ctx: StoreContext, read_page: ReadPage, *, name: str) -> None:
        self._ctx = ctx
        self._read_page = read_page
        self._name = name
        self._fanout: FeedFanout | None = None

    def get(self) -> FeedFanout:
        if self._fanout is None:
            self._fanout = FeedFanout(
                notifier=self._ctx.notifier, read_page=self._read_page, name=self._name
            )
        return self._fanout

    async def close(self) -> None:
        if self._fanout is not None:
            await self._fanout.close()
