"""What every part of the store shares: the engines, the back end, the settings, the notifier.

One explicit object passed to `ExportStore`, `ClusterStore`, … instead of module globals,
so that two `Store`s (two hub replicas in one test) never share state by accident.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import timedelta

from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from hub.store.db import read_transaction, write_transaction
from hub.store.notify import ChangeNotifier


@dataclass
class StoreContext:
    engine: AsyncEngine
    reader: AsyncEngine  # the read view of `engine` (deferred snapshots on SQLite)
    backend: str  # "sqlite" or "postgresql"
    cluster_ttl: timedelta
    history_limit: int
    notifier: ChangeNotifier

    @property
    def postgres(self) -> bool:
        return self.backend == "postgresql"

    @contextlib.asynccontextmanager
    async def write(self) -> AsyncIterator[AsyncConnection]:
        async with write_transaction(self.engine) as conn:
            yield conn

    @contextlib.asynccontextmanager
    async def read(self) -> AsyncIterator[AsyncConnection]:
        async with read_transaction(self.reader) as conn:
            yield conn
