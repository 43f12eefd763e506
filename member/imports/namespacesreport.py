"""Reports the namespaces this cluster holds within its import scope to the hub when they
change (docs/reference.md#scope-and-limits), so that `mcsync describe import` and the
console say "no (namespace absent)" where a Service cannot be imported, not `yes*`.

The importer already watches the Namespaces (`member.imports.importer`: an import waits
for its namespace, namespace sameness of docs/reference.md#import-path); each of their
events wakes this reporter (`member.reportloop`), which reads the informers' caches, keeps
the names the importer may hold imports in (`ImportScope.holds`: exists, not being
deleted, watched, not denied) and, only when they differ from what the hub last
acknowledged, sends them all (`PUT …/clusters/{c}/namespaces`). Nothing is sent before the
caches are filled: an empty cache is not "no namespaces".

A list the hub would refuse (more than `CLUSTER_NAMESPACES_MAX` names) is not sent, not
even in part — a subset would say "absent" of namespaces that are there: one error line
says so (again only when it changes) and the hub keeps the last list it was given. A
failed PUT is logged and retried. Nothing here raises.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable
from typing import Any

from member.hubclient import HubClient
from member.reportloop import ReportLoop
from shared.models import namespaces_problem

__all__ = ["NamespacesReporter"]

logger = logging.getLogger(__name__)


class NamespacesReporter:
    """Keeps the hub's copy of the namespaces this cluster holds current; see the module
    doc. `cached`: the Namespace objects the informers hold; `holds`: the importer's scope
    (`ImportScope.holds`); `synced`: the informers have listed."""

    def __init__(
        self,
        *,
        hub: HubClient,
        cached: Callable[[], Iterable[dict[str, Any]]],
        holds: Callable[[str], bool],
        synced: Callable[[], bool],
    ) -> None:
        self._hub = hub
        self._cached = cached
        self._holds = holds
        self._synced = synced
        self._lock = threading.Lock()
        self._loop: ReportLoop[list[str]] = ReportLoop(
            self.sync, name="namespaces-report", what="the cluster's namespaces", log=logger
        )

    def wake(self) -> None:
        """A Namespace changed: report again if what the hub holds no longer matches."""
        self._loop.wake()

    def current(self) -> list[str]:
        """The namespaces this cluster holds within its import scope, by name."""
        names = {str((o.get("metadata") or {}).get("name") or "") for o in self._cached()}
        return sorted(n for n in names if n and self._holds(n))

    def sync(self) -> bool:
        """Report the current names when they changed; True when the hub holds them."""
        with self._lock:
            if not self._synced():
                return False
            names = self.current()
            problem = namespaces_problem(names)
            if problem is not None:
                self._loop.problem(
                    f"namespaces not reported to the hub: {problem}; the hub keeps the last "
                    "list it was given", level=logging.ERROR)
                return True  # nothing to retry until a namespace goes
            return self._loop.send(names, self._hub.put_namespaces,
                                   done=f"reported {len(names)} namespaces to the hub")

    def start(self, stop: threading.Event) -> threading.Thread:
        """Report at start and after every change until `stop`."""
        return self._loop.start(stop)
