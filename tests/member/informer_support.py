"""What the informer tests share: a handler that records every event it is given, a stop flag,
and `Cache`, an informer's cache as its readers (listers, views) see it.

Both the unit tests of `member.informer` (over an in-memory list-watch) and the tests of the
Kubernetes list-watches (over the emulator) check *what the informer delivered*, so they use one
recorder, which also asserts the handler contract (ADDED has no old object, DELETED no new one).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest

from member.informer import namespaced_key

Event = tuple[str, str, str | None, bool]  # (type, key, rv of new-or-old, from_relist)


class Cache:
    """An informer's cache, filled by the test through `items`: get / keys / has_synced."""

    def __init__(self) -> None:
        self.items: dict[str, dict[str, Any]] = {}

    def get(self, key: str) -> dict[str, Any] | None:
        return self.items.get(key)

    def keys(self) -> list[str]:
        return list(self.items)

    def has_synced(self) -> bool:
        return True


class Recorder:
    """An informer handler that keeps (type, key, resourceVersion, from_relist) per event."""

    def __init__(self) -> None:
        self._events: list[Event] = []
        self._lock = threading.Lock()

    def __call__(
        self,
        event_type: str,
        old: dict[str, Any] | None,
        new: dict[str, Any] | None,
        from_relist: bool,
    ) -> None:
        subject = new if new is not None else old
        assert subject is not None
        if event_type == "ADDED":
            assert old is None and new is not None
        if event_type == "MODIFIED":
            assert old is not None and new is not None
        if event_type == "DELETED":
            assert old is not None and new is None
        with self._lock:
            self._events.append(
                (
                    event_type,
                    namespaced_key(subject),
                    subject["metadata"].get("resourceVersion"),
                    from_relist,
                )
            )

    @property
    def events(self) -> list[Event]:
        """A copy of the events so far (the informer thread may be appending)."""
        with self._lock:
            return list(self._events)


@pytest.fixture
def stop() -> Iterator[threading.Event]:
    """A stop flag for informer threads, set when the test ends."""
    event = threading.Event()
    yield event
    event.set()
