"""One background task at a time that works off what callers queued.

The shape shared by group commit (`batch`) and batched token lookups (`tokens`): a caller
queues its request with a future for the answer and `kick`s the drain; the drain task
takes whatever is queued, answers it, and ends when the queue is empty. It runs in an
empty context — it serves many requests and belongs to none — and a caller that goes away
cancels only its own future, never the work others wait on.
"""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


class Drain:
    def __init__(self, work: Callable[[], Coroutine[Any, Any, None]], *, name: str) -> None:
        self._work = work
        self._name = name
        self._task: asyncio.Task[None] | None = None

    def kick(self) -> None:
        """Make sure the drain task runs (it re-checks the queue before it ends).

        The task's last check of the queue and its end happen without an await between
        them, so work queued on the same loop before `done()` turns true is never missed.
        """
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(
                self._work(), name=self._name, context=contextvars.Context()
            )

    async def close(self) -> None:
        """Wait for the work already queued."""
        if self._task is not None:
            await asyncio.gather(self._task, return_exceptions=True)


def answer_slot() -> asyncio.Future[Any]:
    """A future for one caller's answer; a failure nobody awaits any more counts as seen
    (a caller that went away must not leave "exception was never retrieved" behind)."""
    slot: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
    slot.add_done_callback(_retrieve)
    return slot


def _retrieve(slot: asyncio.Future[Any]) -> None:
    if not slot.cancelled():
        slot.exception()
