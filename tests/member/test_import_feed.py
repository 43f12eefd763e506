"""`member.importfeed`: one informer cache of both kinds, indexed by the Service they serve."""

from __future__ import annotations

from typing import Any

from member.importfeed import ImportView, import_item_key, service_key_of
from tests.member.informer_support import Cache


def service_import(namespace: str, name: str) -> dict[str, Any]:
    return {"kind": "ServiceImport", "metadata": {"name": name, "namespace": namespace},
            "spec": {"type": "ClusterSetIP", "ports": []}}


def endpoint_slice(cluster: str, name: str, service: str = "web") -> dict[str, Any]:
    return {"kind": "EndpointSliceExport", "apiVersion": "mcsync.io/v1alpha1",
            "metadata": {"name": name, "namespace": "shop"},
            "spec": {"serviceName": service, "clusterId": cluster, "addressType": "IPv4",
                     "endpoints": [{"addresses": ["10.0.0.1"]}]}}


def feed(view: ImportView, cache: Cache, obj: dict[str, Any], *, deleted: bool = False) -> set[str]:
    key = import_item_key(obj)
    old = cache.items.get(key)
    if deleted:
        cache.items.pop(key, None)
        return view.observe(old, None)
    cache.items[key] = obj
    return view.observe(old, obj)


def test_keys_keep_the_two_kinds_and_two_clusters_apart() -> None:
    assert import_item_key(service_import("shop", "web")) == "shop/web"
    a, b = endpoint_slice("a", "web-1"), endpoint_slice("b", "web-1")
    assert import_item_key(a) != import_item_key(b)
    assert service_key_of(a) == service_key_of(b) == "shop/web"


def test_the_view_answers_a_keys_import_and_slices_and_forgets_deleted_ones() -> None:
    cache = Cache()
    view = ImportView(cache)  # type: ignore[arg-type]
    assert feed(view, cache, service_import("shop", "web")) == {"shop/web"}
    feed(view, cache, endpoint_slice("a", "web-1"))
    feed(view, cache, endpoint_slice("b", "web-1"))
    feed(view, cache, endpoint_slice("a", "api-1", service="api"))
    imported = view.get("shop/web")
    assert imported is not None and imported.metadata.name == "web"
    assert [s.spec.cluster_id for s in view.slices("shop/web")] == ["a", "b"]
    assert view.keys() == {"shop/web"} and view.keys_in("shop") == {"shop/web"}
    assert feed(view, cache, endpoint_slice("a", "web-1"), deleted=True) == {"shop/web"}
    assert [s.spec.cluster_id for s in view.slices("shop/web")] == ["b"]
    feed(view, cache, service_import("shop", "web"), deleted=True)
    assert view.get("shop/web") is None and view.keys_in("shop") == set()
