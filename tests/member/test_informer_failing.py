"""What the mass-withdrawal guard reads of an informer (docs/reference.md#failover): `failing` while
the server refuses its list or watch (its cache is then "cannot see", kept as it was), and
`lists`, which moves with every list delivered (the guard judges each relist anew).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

from member.informer import Informer, ItemTransform
from tests.member.informer_support import Recorder
from tests.member.test_informer import DEADLINE, MemoryListWatch, wait_for


class Refusing(MemoryListWatch):
    """Answers 404-like errors to lists and watches while `refusing` is set (the CRD gone,
    the version no longer served)."""

    def __init__(self) -> None:
        super().__init__()
        self.refusing = threading.Event()
        self.refusals = 0

    def list(self, transform: ItemTransform | None = None) -> tuple[list[dict[str, Any]], str]:
        self._refuse()
        return super().list(transform)

    def watch(self, *, resource_version: str, timeout_seconds: int) -> Iterator[dict[str, Any]]:
        self._refuse()
        return super().watch(resource_version=resource_version, timeout_seconds=1)

    def _refuse(self) -> None:
        if self.refusing.is_set():
            self.refusals += 1
            raise RuntimeError("404 the server could not find the requested resource")


def test_failing_while_refused_with_the_cache_kept(stop: threading.Event) -> None:
    source = Refusing()
    source.put("a")
    informer = Informer(name="serviceexports[*]", list_watch=source, handler=Recorder())
    informer.start(stop)
    assert informer.wait_for_sync(DEADLINE)
    assert not informer.failing and informer.lists == 1

    source.refusing.set()
    source.break_watches()
    wait_for(lambda: informer.failing)
    assert informer.keys() == ["ns/a"]  # cannot see is not "nothing there"
    assert informer.lists == 1

    source.refusing.clear()
    wait_for(lambda: not informer.failing)
    assert informer.keys() == ["ns/a"]


def test_lists_counts_every_list_delivered(stop: threading.Event) -> None:
    source = Refusing()
    source.put("a")
    informer = Informer(name="hub", list_watch=source, handler=Recorder())
    informer.start(stop)
    assert informer.wait_for_sync(DEADLINE)
    source.delete_quietly("a")
    source.compact()  # 410 on the resumed watch: a relist
    wait_for(lambda: informer.lists == 2)
    assert informer.keys() == [] and informer.relists == 1
