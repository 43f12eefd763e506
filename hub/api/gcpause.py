"""Pause Python's cyclic garbage collector while a bulk request runs.

A full-state sync parses a multi-megabyte body into hundreds of thousands of objects,
validates it into as many model objects, and builds the column values, verdicts and
change rows of thousands of exports. Every 700 new objects CPython runs a collection, and
as the survivors grow it keeps re-running full ones over the whole live heap: measured on
a 10,000-export body, parsing and validating it took 0.68 s with the collector on and
0.32 s with it paused, before any store work.

What such a request builds is freed by reference counting as it is dropped; the pause
only postpones the collector (for cycles anything leaves behind) until the last paused
request has finished. The collector is global to the process, so pauses nest (a count),
and a collector someone else disabled is left alone.
"""

from __future__ import annotations

import gc
from collections.abc import Callable, Coroutine, Iterator
from contextlib import contextmanager
from typing import Any

from fastapi import Request, Response

from hub.api.jsonbody import StrictJsonRoute

_paused = 0


@contextmanager
def gc_paused() -> Iterator[None]:
    """Run the body with the cyclic collector paused (re-enabled by the last one out)."""
    global _paused
    if _paused == 0 and not gc.isenabled():
        yield  # disabled by someone else: not ours to re-enable
        return
    _paused += 1
    gc.disable()
    try:
        yield
    finally:
        _paused -= 1
        if _paused == 0:
            gc.enable()


class GcPausedJsonRoute(StrictJsonRoute):
    """A `StrictJsonRoute` whose whole request (parse, validation, handler) runs under
    `gc_paused`: for the bulk routes only."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def paused_handler(request: Request) -> Response:
            with gc_paused():
                return await handler(request)

        return paused_handler
