"""What the hub holds of this cluster's EndpointSlices, as this agent last sent them.

Apart from the reconciler because the memory outlives reconciles and is touched from
outside them: the hub feed's DELETED event forgets a Service (the hub withdrew its slices
with the export), losing the Lease clears it, and the slice controller reads `primed` to
leave list events to the first repair.
"""

from __future__ import annotations

import threading
from typing import NamedTuple

__all__ = ["Sent", "SentSlices"]


# -- the memory ---------------------------------------------------------------------------


class Sent(NamedTuple):
    """One slice as last sent: its source resourceVersion, and whether the hub took it."""

    resource_version: str
    on_hub: bool


class SentSlices:
    """Per Service key, slice name → `Sent`: what the hub holds of this cluster's slices.

    A reconcile `acquire()`s its key's record, reads and writes it through `record()` and
    `drop()`, and `release()`s it; only that worker writes the record (the queue gives a
    key to one worker at a time). `forget_service()` and `clear()` never mutate a record,
    they replace it: a worker still writing into the old one loses its update, which costs
    one write more on the key's next reconcile, never one less.

    A repair's list and live reconciles run at once (that is the point: live work is not
    held up), so `reset()` merges rather than replaces, slice by slice. From
    `begin_repair()` on, every slice written and every key forgotten is noted; at `reset()`
    the list's view wins for everything else, and a record a worker holds is updated in
    place, so its writes after the reset land in the memory too. A slice PUT while the list
    is read is not sent a second time, and a repair never undoes a live write.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._services: dict[str, dict[str, Sent]] = {}
        self._held: set[str] = set()
        self._primed = False
        self._repairing = False
        self._written: dict[str, set[str]] = {}  # since begin_repair(): key -> slice names
        self._forgotten: set[str] = set()  # since begin_repair()
        self._deferred: set[str] = set()  # keys that came before the memory was primed

    @property
    def primed(self) -> bool:
        """True once a repair has read the hub's set (and until `clear()`)."""
        return self._primed

    def defer_unless_primed(self, key: str) -> bool:
        """True (and `key` kept for `reset()` to hand back) when no repair has primed the
        memory yet; False when `key` may be reconciled now."""
        with self._lock:
            if self._primed:
                return False
            self._deferred.add(key)
            return True

    def peek(self, key: str) -> dict[str, Sent] | None:
        """A copy of `key`'s record (None when it has none), to look at."""
        with self._lock:
            record = self._services.get(key)
            return dict(record) if record is not None else None

    def acquire(self, key: str, *, create: bool) -> dict[str, Sent] | None:
        """The record of `key` for the worker reconciling it (created empty with `create`),
        until `release()`."""
        with self._lock:
            self._held.add(key)
            if create:
                return self._services.setdefault(key, {})
            return self._services.get(key)

    def release(self, key: str, record: dict[str, Sent] | None) -> None:
        """The reconcile of `key` is over; an empty record goes (a Service without slices
        on the hub costs nothing)."""
        with self._lock:
            self._held.discard(key)
            if record is not None and not record and self._services.get(key) is record:
                del self._services[key]

    def names(self, record: dict[str, Sent]) -> list[str]:
        """The slice names of a held record, sorted (a repair may update it meanwhile)."""
        with self._lock:
            return sorted(record)

    def record(self, key: str, record: dict[str, Sent], name: str, sent: Sent) -> None:
        with self._lock:
            record[name] = sent
            if self._repairing:
                self._written.setdefault(key, set()).add(name)

    def drop(self, key: str, record: dict[str, Sent], name: str) -> None:
        with self._lock:
            record.pop(name, None)
            if self._repairing:
                self._written.setdefault(key, set()).add(name)

    def forget_service(self, key: str) -> None:
        """The hub withdrew `key`'s slices along with its export."""
        with self._lock:
            self._services.pop(key, None)
            if self._repairing:
                self._forgotten.add(key)
                self._written.pop(key, None)

    def begin_repair(self) -> None:
        """A list of the hub's set starts now: note what changes until `reset()`."""
        with self._lock:
            self._repairing = True
            self._written = {}
            self._forgotten = set()

    def end_repair(self) -> None:
        """The list failed: stop noting (the memory stays as it was)."""
        with self._lock:
            self._repairing = False
            self._written = {}
            self._forgotten = set()

    def reset(self, listed: dict[str, dict[str, Sent]]) -> set[str]:
        """The hub's set, listed since `begin_repair()`, becomes the memory: the list's view
        of every slice, except those written since, and nothing of a key forgotten since
        (the hub withdrew what the list still showed). Answers the keys deferred until now."""
        with self._lock:
            merged: dict[str, dict[str, Sent]] = {}
            for key in listed.keys() | self._services.keys():
                current = self._services.get(key)
                if key in self._forgotten:
                    if current is not None:
                        merged[key] = current  # written after the withdrawal: ours, current
                    continue
                written = self._written.get(key, set())
                view = {n: sent for n, sent in listed.get(key, {}).items() if n not in written}
                if current is None:
                    record = view
                else:
                    # In place: a worker may hold this record and go on writing into it.
                    for name in [n for n in current if n not in written and n not in view]:
                        del current[name]
                    current.update(view)
                    record = current
                if record or key in self._held:
                    merged[key] = record
            self._services = merged
            self._repairing = False
            self._written = {}
            self._forgotten = set()
            self._primed = True
            deferred, self._deferred = self._deferred, set()
        return deferred

    def clear(self) -> None:
        """Forget everything (leadership lost: another replica writes meanwhile)."""
        with self._lock:
            self._services = {}
            self._repairing = False
            self._written = {}
            self._forgotten = set()
            self._primed = False

    def on_hub(self) -> int:
        """How many slices the hub holds from us (the exported-slices gauge)."""
        with self._lock:
            return sum(s.on_hub for record in self._services.values() for s in record.values())
