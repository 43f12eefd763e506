"""The fleet-properties feed, followed by the generic informer, feeding the agent's
`FleetPropertiesView` (docs/reference.md#cluster-properties).

`GET …/clusters/{c}/fleetproperties` lists every cluster's reported properties and
`?watch=true` streams their changes, with the same list-then-watch, relist-on-410
protocol as the import feed, so `HubPropertiesListWatch` plugs into `member.informer`
as `member.imports.importfeed.HubImportListWatch` does. Pushed, never polled: one change of a
cluster's properties reaches every agent as one event.

The informer's handler (`PropertiesFeed.on_event`) hands each change to the view:
ADDED / MODIFIED set that cluster's properties, DELETED forgets them; the view notifies
its subscribers (the importing side re-queues the keys those clusters export) only when a
value actually changed, so a relist that finds everything equal costs nothing. This
cluster's own entry is skipped: its own properties come from its About API
(`member.propertiesreport`), never second-hand.
"""

from __future__ import annotations

from typing import Any

from member.clusterproperties import FleetPropertiesView
from member.controller import Event, handler
from member.hubclient import HubClient
from member.hubfeed import HubEventStream, opened_watch
from member.informer import HUB_RECONNECT, Informer, ItemTransform
from shared.models import to_wire

__all__ = ["HubPropertiesListWatch", "PropertiesFeed", "cluster_of"]


def cluster_of(obj: dict[str, Any]) -> str:
    """The informer key of a `ClusterProperties` object: the cluster's name."""
    return str((obj.get("metadata") or {}).get("name") or "")


def _properties(obj: dict[str, Any] | None) -> dict[str, str]:
    spec = (obj or {}).get("spec") or {}
    values = spec.get("properties") or {}
    return {str(k): str(v) for k, v in values.items()} if isinstance(values, dict) else {}


class HubPropertiesListWatch:
    """`member.informer.ListWatch` over the fleet's cluster properties."""

    def __init__(self, hub: HubClient) -> None:
        self._hub = hub

    def list(self, transform: ItemTransform | None = None) -> tuple[list[dict[str, Any]], str]:
        items, revision = self._hub.list_fleet_properties()
        wires = [to_wire(item) for item in items]
        return ([transform(w) for w in wires] if transform is not None else wires), revision

    def watch(self, *, resource_version: str, timeout_seconds: int) -> HubEventStream:
        return HubEventStream(opened_watch(lambda: self._hub.watch_fleet_properties(
            resource_version=resource_version, timeout_seconds=timeout_seconds
        )))


class PropertiesFeed:
    """The informer over the fleet-properties feed and the view it keeps current."""

    def __init__(self, hub: HubClient, view: FleetPropertiesView, *, watch_timeout: int) -> None:
        self.view = view
        self.informer = Informer(
            name="hub-properties",
            list_watch=HubPropertiesListWatch(hub),
            handler=handler(self.on_event),
            watch_timeout_seconds=watch_timeout,
            key_func=cluster_of,
            reconnect=HUB_RECONNECT,
        )

    def on_event(self, event: Event) -> None:
        old, new = event.old, event.new
        if event.type == "DELETED":
            if old is not None:
                self.view.forget_cluster(cluster_of(old))
            return
        if new is not None:
            self.view.set_cluster(cluster_of(new), _properties(new))
