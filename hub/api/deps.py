"""How routes reach the hub's state: one `HubContext` per app, handed out by dependencies.

The app's only state is the `HubContext` kept at `app.state.mcsync` (the one clearly named
registry): settings, credentials, metrics, the store (opened by the lifespan) and the
shutdown signal that long-lived watch streams observe. Routes declare what they need
through the `Annotated` aliases below (FastAPI's dependency guide), which keeps them
testable and keeps module globals out of the hub.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from dataclasses import dataclass, field
from typing import Annotated, Protocol

from fastapi import Depends, Request
from starlette.applications import Starlette

from hub.api.credentials import Credentials
from hub.metrics import HubMetrics
from hub.settings import HubSettings
from hub.store import DatabaseUnavailable, Store

STATE_ATTR = "mcsync"
WATCH_WRITE_TURNS = 16


class OpenWatch(Protocol):
    """What the context needs of an open watch stream (`hub.api.watch.WatchStream`): the
    revision it has sent everything up to, which the feed-lag metric reads. Naming only
    this keeps the dependencies free of the watch module, which itself depends on them."""

    @property
    def position(self) -> int: ...


@dataclass
class HubContext:
    settings: HubSettings
    credentials: Credentials
    metrics: HubMetrics
    store: Store | None = None
    # Set when the server starts draining (SIGTERM) or the app shuts down: watches end.
    shutdown: asyncio.Event = field(default_factory=asyncio.Event)
    # The watch streams open on this replica (their positions give the feed lag metric).
    open_watches: set[OpenWatch] = field(default_factory=set)
    # Open watches by token (`hub.api.watch.take_watch_slot`): one token may hold at most
    # `settings.watch_limit_per_token` of them on this replica.
    watches_by_token: Counter[str] = field(default_factory=Counter)
    # Slices of large watch lines written per turn of the event loop, all watches together
    # (`hub.api.watch.WatchStream._write_turn`): requests are not starved by a push.
    watch_write_turns: asyncio.Semaphore = field(
        default_factory=lambda: asyncio.Semaphore(WATCH_WRITE_TURNS)
    )
    # Watches being opened at once (`hub.app.HubApp`), made on first use: see `watch_opens`.
    _watch_opens: asyncio.Semaphore | None = None

    @property
    def watch_opens(self) -> asyncio.Semaphore:
        """The watch requests answered at once up to their answer's start, one per pooled
        connection (what an open reads with); the rest wait for a turn before anything
        else is done for them. A burst of opens (a replica's agents reconnecting) would
        otherwise have every request in flight at once, each holding what it reads — a
        peak the process keeps (freed memory is not handed back to the system, and the
        watches that outlive it are scattered through it)."""
        if self._watch_opens is None:
            self._watch_opens = asyncio.Semaphore(max(4, self.settings.pool_size))
        return self._watch_opens


def context_of(app: Starlette) -> HubContext:
    ctx = getattr(app.state, STATE_ATTR, None)
    if not isinstance(ctx, HubContext):
        raise RuntimeError("this app was not built by hub.app.create_app")
    return ctx


async def get_context(request: Request) -> HubContext:
    return context_of(request.app)


async def get_settings(ctx: Annotated[HubContext, Depends(get_context)]) -> HubSettings:
    return ctx.settings


async def get_store(ctx: Annotated[HubContext, Depends(get_context)]) -> Store:
    if ctx.store is None:
        # Only between process start and the end of the lifespan's startup.
        raise DatabaseUnavailable("the hub is starting: its database is not open yet")
    return ctx.store


# The dependencies are `async def` although they never await: FastAPI runs a plain `def`
# dependency in its thread pool, a thread hop per dependency per request, which the PUT
# benchmark's profile showed as a sixth of the hub's samples.
ContextDep = Annotated[HubContext, Depends(get_context)]
SettingsDep = Annotated[HubSettings, Depends(get_settings)]
StoreDep = Annotated[Store, Depends(get_store)]
