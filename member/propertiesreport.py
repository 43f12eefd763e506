"""Reports this cluster's ClusterProperty objects to the hub when they change
(docs/reference.md#cluster-properties).

Cluster selection in every importing cluster — and the hub's `mcsync.io/import-clusters`
— reads a cluster's properties, so the agent keeps the hub's copy equal to the About API's
objects. An informer watches them (one list, then a watch: no read per heartbeat); each
change wakes the reporter's thread, which compares the whole set with what the hub last
acknowledged and, only when they differ, sends it (`PUT …/clusters/{c}/properties`, the
whole set). A restarted agent has had nothing acknowledged, so it reports once at start
(the hub writes nothing when the set is equal to what it has).

`cluster.clusterset.k8s.io` is always among them: where the About API is not installed
the agent reports its id under that name (the other tools' agreement,
`member.clusteridentity`) and nothing else.

A set the hub would refuse (more than 64 objects, a value over 1 KiB, an empty value) is
not sent, not even in part — a subset would make selectors misjudge the cluster: one error
line names the problem (again only when it changes) and the hub keeps the last good set.
A failed PUT is logged and retried every `RETRY_SECONDS` (`member.reportloop`, the loop
every such report runs on). Nothing here raises.

Each set read also goes to this agent's own view (`FleetPropertiesView.set_own`), so
`@SameAsImporter@` follows the cluster's properties without a round trip to the hub.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from kubernetes import client as k8s

from member.clusteridentity import AboutApi
from member.clusterproperties import FleetPropertiesView
from member.hubclient import HubClient
from member.informer import Informer
from member.kube.listwatch import KubeListWatch
from member.reportloop import RETRY_SECONDS, ReportLoop
from shared.aboutapi import ABOUT_GROUP, CLUSTER_ID_PROPERTY, CLUSTER_PROPERTY_KIND
from shared.models import properties_problem

__all__ = ["RETRY_SECONDS", "PropertiesReporter"]

logger = logging.getLogger(__name__)


def _name(obj: dict[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("name") or "")


def _slim(obj: dict[str, Any]) -> dict[str, Any]:
    """What the informer keeps of a ClusterProperty: its name, resourceVersion and value."""
    metadata = obj.get("metadata") or {}
    spec = obj.get("spec") or {}
    value = spec.get("value")
    return {
        "metadata": {"name": metadata.get("name"),
                     "resourceVersion": metadata.get("resourceVersion")},
        "spec": {"value": value if isinstance(value, str) else ""},
    }


class PropertiesReporter:
    """Keeps the hub's copy of this cluster's properties current; see the module doc."""

    def __init__(
        self,
        *,
        api: k8s.ApiClient,
        about: AboutApi,
        hub: HubClient,
        cluster_id: str,
        view: FleetPropertiesView | None = None,
        watch_timeout: int = 300,
    ) -> None:
        self._hub = hub
        self._cluster_id = cluster_id
        self._view = view
        self._loop: ReportLoop[dict[str, str]] = ReportLoop(
            self.sync, name="clusterproperties", what="the cluster's properties", log=logger
        )
        self._lock = threading.Lock()
        self.informer: Informer | None = None
        if about.installed:
            self.informer = Informer(
                name="clusterproperties",
                list_watch=KubeListWatch(
                    api,
                    path=about.collection_path,
                    api_version=f"{ABOUT_GROUP}/{about.version}",
                    kind=CLUSTER_PROPERTY_KIND,
                ),
                handler=lambda *_: self._loop.wake(),
                watch_timeout_seconds=watch_timeout,
                key_func=_name,
                transform=_slim,
            )

    def current(self) -> dict[str, str]:
        """The cluster's properties as the informer holds them (no request)."""
        values: dict[str, str] = {}
        if self.informer is not None:
            for obj in self.informer.list_cached():
                values[_name(obj)] = str((obj.get("spec") or {}).get("value") or "")
        values.setdefault(CLUSTER_ID_PROPERTY, self._cluster_id)
        return values

    def synced(self) -> bool:
        return self.informer is None or self.informer.has_synced()

    def sync(self) -> bool:
        """Report the current set when it changed; True when the hub holds it."""
        with self._lock:
            if not self.synced():
                return False  # an empty cache is not "no properties"
            values = self.current()
            problem = properties_problem(values)
            if problem is not None:
                self._loop.problem(
                    f"ClusterProperty objects not reported to the hub: {problem}; the hub "
                    "keeps the last set it was given (docs/reference.md#cluster-properties)",
                    level=logging.ERROR,
                )
                return False
            if self._view is not None:
                self._view.set_own(values)
            return self._loop.send(values, self._hub.put_properties,
                                   done=f"reported {len(values)} cluster properties to the hub")

    def start(self, stop: threading.Event) -> threading.Thread:
        """Report at start and after every change until `stop` (`member.reportloop`)."""
        return self._loop.start(stop)
