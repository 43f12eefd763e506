"""`member.imports.importfeed`: one informer cache of both kinds, indexed by the Service they serve,
each object held once in the form the reconcilers read."""

from __future__ import annotations

import sys
from typing import Any

from member.imports.importfeed import (
    ImportEventStream,
    ImportView,
    SliceRef,
    feed_entry,
    import_item_key,
    service_key_of,
    slice_ref,
)
from member.imports.importspec import HeldImport, SourceSlice
from shared.constants import ANNOTATION_CHANGED_AT
from shared.models import EndpointSliceExport, ServiceImport, WatchEvent, to_wire
from shared.timefmt import parse_rfc3339
from tests.member.informer_support import Cache


def service_import(namespace: str, name: str) -> ServiceImport:
    return ServiceImport.model_validate(
        {
            "metadata": {"name": name, "namespace": namespace, "resourceVersion": "3"},
            "spec": {"type": "ClusterSetIP", "ports": []},
        }
    )


def endpoint_slice(
    cluster: str, name: str, service: str = "web", changed_at: str | None = None
) -> EndpointSliceExport:
    annotations = {ANNOTATION_CHANGED_AT: changed_at} if changed_at else None
    return EndpointSliceExport.model_validate(
        {
            "metadata": {"name": name, "namespace": "shop", "annotations": annotations},
            "spec": {
                "serviceName": service,
                "clusterId": cluster,
                "addressType": "IPv4",
                "endpoints": [{"addresses": ["10.0.0.1"]}],
            },
        }
    )


def feed(
    view: ImportView,
    cache: Cache,
    item: ServiceImport | EndpointSliceExport,
    *,
    deleted: bool = False,
) -> set[str]:
    entry = feed_entry(item)
    key = import_item_key(entry)
    old = cache.items.get(key)
    if deleted:
        cache.items.pop(key, None)
        return view.observe(old, None)
    cache.items[key] = entry
    return view.observe(old, entry)


def test_keys_keep_the_two_kinds_and_two_clusters_apart() -> None:
    assert import_item_key(feed_entry(service_import("shop", "web"))) == "shop/web"
    a, b = feed_entry(endpoint_slice("a", "web-1")), feed_entry(endpoint_slice("b", "web-1"))
    assert import_item_key(a) != import_item_key(b)
    assert service_key_of(a) == service_key_of(b) == "shop/web"
    assert slice_ref(a) == SliceRef("a", "web-1")
    assert slice_ref(feed_entry(service_import("shop", "web"))) is None


def test_the_view_answers_a_keys_import_and_slices_and_forgets_deleted_ones() -> None:
    cache = Cache()
    view = ImportView(cache)  # type: ignore[arg-type]
    assert feed(view, cache, service_import("shop", "web")) == {"shop/web"}
    feed(view, cache, endpoint_slice("a", "web-1"))
    feed(view, cache, endpoint_slice("b", "web-1"))
    feed(view, cache, endpoint_slice("a", "api-1", service="api"))
    imported = view.get("shop/web")
    assert imported is not None and (imported.namespace, imported.name) == ("shop", "web")
    assert [s.cluster for s in view.slices("shop/web")] == ["a", "b"]
    assert view.slice("shop", SliceRef("b", "web-1")) == view.slices("shop/web")[1]
    assert view.keys() == {"shop/web"} and view.keys_in("shop") == {"shop/web"}
    assert feed(view, cache, endpoint_slice("a", "web-1"), deleted=True) == {"shop/web"}
    assert [s.cluster for s in view.slices("shop/web")] == ["b"]
    assert view.slice("shop", SliceRef("a", "web-1")) is None
    feed(view, cache, service_import("shop", "web"), deleted=True)
    assert view.get("shop/web") is None and view.keys_in("shop") == set()


def test_each_object_is_held_once_parsed_never_again() -> None:
    """The view answers the very objects cached, not fresh parses of a wire dict."""
    cache = Cache()
    view = ImportView(cache)  # type: ignore[arg-type]
    feed(view, cache, service_import("shop", "web"))
    feed(view, cache, endpoint_slice("a", "web-1"))
    assert view.get("shop/web") is view.get("shop/web")
    (held,) = view.slices("shop/web")
    assert isinstance(held, SourceSlice) and held is view.slice("shop", SliceRef("a", "web-1"))


def deep_size(value: Any) -> int:
    size = sys.getsizeof(value)
    if isinstance(value, dict):
        size += sum(deep_size(k) + deep_size(v) for k, v in value.items())
    elif isinstance(value, list | tuple | frozenset):
        size += sum(deep_size(v) for v in value)
    elif isinstance(value, SourceSlice | HeldImport):
        size += sum(deep_size(getattr(value, f)) for f in type(value).__slots__)
    return size


def test_a_slice_is_held_in_less_memory_than_its_wire_dict() -> None:
    export = EndpointSliceExport.model_validate(
        {
            "metadata": {"name": "web-1", "namespace": "shop", "resourceVersion": "9"},
            "spec": {
                "serviceName": "web",
                "clusterId": "a",
                "addressType": "IPv4",
                "ports": [{"name": "http", "port": 8080}],
                "endpoints": [
                    {"addresses": [f"10.0.0.{i}"], "conditions": {"ready": True}, "zone": "z"}
                    for i in range(10)
                ],
            },
        }
    )
    assert deep_size(feed_entry(export)) < deep_size(to_wire(export)) / 2


def test_the_changed_at_of_a_key_is_its_newest_event() -> None:
    cache = Cache()
    view = ImportView(cache)  # type: ignore[arg-type]
    feed(view, cache, endpoint_slice("a", "web-1"))
    assert view.changed_at("shop/web") is None  # listed, not changed
    feed(view, cache, endpoint_slice("a", "web-1", changed_at="2026-11-24T10:00:00.100Z"))
    feed(view, cache, endpoint_slice("b", "web-1", changed_at="2026-11-24T10:00:00.300Z"))
    feed(view, cache, endpoint_slice("c", "web-1", changed_at="not a time"))
    assert view.changed_at("shop/web") == parse_rfc3339("2026-11-24T10:00:00.300Z")


class _Stream:
    def __init__(self, events: list[WatchEvent]) -> None:
        self._events = iter(events)

    def __next__(self) -> WatchEvent:
        return next(self._events)


def test_the_watch_hands_the_informer_entries_and_bookmarks_as_dicts() -> None:
    events = [
        WatchEvent.model_validate({"type": "ADDED", "object": to_wire(endpoint_slice("a", "w"))}),
        WatchEvent.model_validate(
            {
                "type": "BOOKMARK",
                "object": {"kind": "Bookmark", "metadata": {"resourceVersion": "7"}},
            }
        ),
    ]
    stream = ImportEventStream(_Stream(events))  # type: ignore[arg-type]
    added, bookmark = next(stream), next(stream)
    assert added["type"] == "ADDED" and slice_ref(added["object"]) == SliceRef("a", "w")
    assert bookmark["object"]["metadata"]["resourceVersion"] == "7"


def test_a_service_import_is_held_in_less_memory_than_its_wire_dict() -> None:
    imported = ServiceImport.model_validate(
        {
            "metadata": {
                "name": "web",
                "namespace": "shop",
                "resourceVersion": "9",
                "annotations": {ANNOTATION_CHANGED_AT: "2026-11-24T10:00:00.000000Z"},
            },
            "spec": {
                "type": "ClusterSetIP",
                "ports": [{"name": "http", "port": 80}],
                "ipFamilies": ["IPv4"],
                "labels": {"app": "web"},
                "annotations": {"team": "shop"},
            },
            "status": {
                "clusters": [{"cluster": "a", "state": "Ready"}],
                "ports": [{"name": "http", "port": 80, "clusters": ["a"]}],
                "winningCluster": "a",
            },
        }
    )
    held = feed_entry(imported)["item"]
    assert isinstance(held, HeldImport)
    assert (held.name, held.clusters, held.served) == ("web", ("a",), (("http", ("a",)),))
    assert deep_size(held) < deep_size(to_wire(imported)) / 2


def test_a_keys_slices_are_read_again_after_any_change_of_them() -> None:
    """The view keeps a key's slices between changes; a change, an added slice or a
    deleted one is in the very next read, and another key's change leaves it as it was."""
    cache = Cache()
    view = ImportView(cache)  # type: ignore[arg-type]
    feed(view, cache, endpoint_slice("a", "web-1"))
    first = view.slices("shop/web")
    assert view.slices("shop/web") is first  # unchanged: the same tuple
    feed(view, cache, endpoint_slice("a", "api-1", service="api"))
    assert view.slices("shop/web") is first
    changed = endpoint_slice("a", "web-1", changed_at="2026-11-24T10:00:00.100Z")
    feed(view, cache, changed)
    (held,) = view.slices("shop/web")
    assert held is not first[0] and held is view.slice("shop", SliceRef("a", "web-1"))
    feed(view, cache, endpoint_slice("b", "web-1"))
    assert [s.cluster for s in view.slices("shop/web")] == ["a", "b"]
    feed(view, cache, endpoint_slice("a", "web-1"), deleted=True)
    assert [s.cluster for s in view.slices("shop/web")] == ["b"]
    feed(view, cache, endpoint_slice("b", "web-1"), deleted=True)
    assert view.slices("shop/web") == ()
