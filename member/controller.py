"""What a controller watches and how each event becomes keys on its queue, declared once.

After controller-runtime's builder (`For` / `Owns` / `Watches`, `pkg/builder/controller.go`)
and fleet-networking's `SetupWithManager`: the module that holds a reconciler also says
which informers feed it and how their events map to its queue keys, so reading one module
tells what wakes the reconciler up. `member.app` only builds the informers, hands each
event to every controller that declared that source, and runs each controller's workers.

Sources are named, not passed as informers: one informer of a kind feeds every controller
that watches it (the export and slice controllers both watch Services), as the manager's
shared cache does.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from member.workqueue import WorkQueue

__all__ = [
    "DERIVED_SERVICES",
    "ENDPOINT_SLICES",
    "HELD_BY_SERVICE",
    "HELD_BY_SLICE",
    "HUB_IMPORTS",
    "HUB_RECORDS",
    "MIRRORED_SLICES",
    "NAMESPACES",
    "SERVICES",
    "SERVICE_EXPORTS",
    "SERVICE_IMPORTS",
    "Controller",
    "Event",
    "InformerHandler",
    "Mapper",
    "Watch",
    "dispatch",
    "handler",
]

# The informer kinds the export side watches (one informer per watched namespace each,
# except the hub's records of this cluster).
SERVICES = "services"
SERVICE_EXPORTS = "serviceexports"
ENDPOINT_SLICES = "endpointslices"
HUB_RECORDS = "hub"

# The kinds the import side watches (`member.imports.importer`): the hub's import feed, the
# cluster's ServiceImports, the managed Services and EndpointSlices, the Namespaces.
HUB_IMPORTS = "hub-imports"
SERVICE_IMPORTS = "serviceimports"
DERIVED_SERVICES = "derived-services"
MIRRORED_SLICES = "mirrored-endpointslices"
NAMESPACES = "namespaces"
# Channel sources (controller-runtime's `source.Channel`): not an informer but the keys an
# object in the way of an import held up, released by that object's event
# (`member.imports.importowners.InTheWay`); each event's object names the key.
HELD_BY_SERVICE = "held-by-service"
HELD_BY_SLICE = "held-by-slice"


@dataclass(frozen=True)
class Event:
    """One informer event: `old`/`new` as the informer hands them, `from_relist` for the
    events of a (re)list (they go to the queue's bulk lane)."""

    type: str
    old: dict[str, Any] | None
    new: dict[str, Any] | None
    from_relist: bool

    @property
    def obj(self) -> dict[str, Any] | None:
        """The object as it is now, or as it last was when it went."""
        return self.new if self.new is not None else self.old


# An event → (key, bulk) pairs to add to the controller's queue. A mapper may also note
# the event (the slice controller remembers live changes); it never writes anywhere.
Mapper = Callable[[Event], Iterable[tuple[str, bool]]]


@dataclass(frozen=True)
class Watch:
    """One source the controller watches and how its events become queue keys."""

    source: str
    mapper: Mapper


@dataclass(frozen=True)
class Controller:
    """A reconciler with its queue and what feeds it.

    `for_` is the kind the reconciler is about (its key's object); `watches` are the other
    kinds whose events queue keys too. `reconcile(key)` runs on the controller's workers.
    """

    name: str
    queue: WorkQueue
    reconcile: Callable[[str], None]
    for_: Watch
    watches: Sequence[Watch] = field(default_factory=tuple)

    def all_watches(self) -> list[Watch]:
        return [self.for_, *self.watches]

    def sources(self) -> set[str]:
        return {w.source for w in self.all_watches()}


# What an informer calls per event: (type, old, new, from_relist), as `member.informer` does.
InformerHandler = Callable[[str, dict[str, Any] | None, dict[str, Any] | None, bool], None]


def handler(observe: Callable[[Event], None]) -> InformerHandler:
    """The informer handler that hands each event to `observe` as one `Event`: for what
    watches a source with no queue of its own (the fleet-properties view, say)."""

    def handle(
        event_type: str,
        old: dict[str, Any] | None,
        new: dict[str, Any] | None,
        from_relist: bool,
    ) -> None:
        observe(Event(event_type, old, new, from_relist))

    return handle


def dispatch(
    controllers: Sequence[Controller],
    source: str,
    observers: Sequence[Callable[[Event], None]] = (),
) -> InformerHandler:
    """The informer handler for `source`: observers first (state the mappers read, such as
    the withdrawal guard's notes), then each controller's mappers in declaration order."""
    mappers = [(c.queue, w.mapper) for c in controllers for w in c.all_watches()
               if w.source == source]

    def handle(event: Event) -> None:
        for observe in observers:
            observe(event)
        for queue, mapper in mappers:
            for key, bulk in mapper(event):
                queue.add(key, bulk=bulk)

    return handler(handle)
