"""`member.ownwrites`: a reconcile right after our write sees the write, not the stale cache."""

from __future__ import annotations

from typing import Any

from member.imports.base import ManagedIndex
from member.ownwrites import OwnWrites, RememberingWriter


class Cache:
    def __init__(self) -> None:
        self.items: dict[str, dict[str, Any]] = {}

    def get(self, key: str) -> dict[str, Any] | None:
        return self.items.get(key)


class Server:
    """Answers writes with a new resourceVersion; the cache learns them only on `sync()`."""

    version = "v1"

    def __init__(self, cache: Cache) -> None:
        self.cache, self.objects, self.rv, self.calls = cache, {}, 0, []  # type: ignore[var-annotated]

    def _put(self, body: dict[str, Any]) -> dict[str, Any]:
        self.rv += 1
        stored = {**body, "metadata": {**body["metadata"], "resourceVersion": str(self.rv)}}
        self.objects[f"{body['metadata']['namespace']}/{body['metadata']['name']}"] = stored
        return stored

    def create(self, body: dict[str, Any]) -> dict[str, Any]:
        self.calls.append("create")
        return self._put(body)

    def replace(self, body: dict[str, Any]) -> dict[str, Any]:
        self.calls.append("update")
        return self._put(body)

    replace_status = replace

    def delete(self, namespace: str, name: str, *, uid: str | None) -> None:
        self.calls.append("delete")
        self.objects.pop(f"{namespace}/{name}", None)

    def sync(self) -> None:
        self.cache.items = dict(self.objects)


def slice_body(name: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "shop",
                         "labels": {"multicluster.kubernetes.io/service-name": "web"}}}


def test_a_write_is_seen_until_its_event_arrives_then_the_cache_is_the_truth() -> None:
    cache = Cache()
    server = Server(cache)
    own = OwnWrites(cache)
    writer = RememberingWriter(server, own)  # type: ignore[arg-type]
    answer = writer.create(slice_body("a"))
    assert own.get("shop/a") == answer  # the cache does not have it yet
    server.sync()
    assert own.get("shop/a") is cache.items["shop/a"] and own.pending() == 0


def test_a_delete_is_seen_until_the_cache_drops_the_object() -> None:
    cache = Cache()
    server = Server(cache)
    own = OwnWrites(cache)
    index = ManagedIndex(own)
    writer = RememberingWriter(server, own, index)  # type: ignore[arg-type]
    writer.create(slice_body("a"))
    server.sync()
    assert set(index.objects("shop/web")) == {"a"}
    writer.delete("shop", "a", uid=None)
    assert own.get("shop/a") is None and index.objects("shop/web") == {}
    server.sync()
    assert own.get("shop/a") is None and own.pending() == 0


def test_an_entry_the_cache_never_confirms_expires() -> None:
    now = [0.0]
    cache = Cache()
    own = OwnWrites(cache, ttl=5.0, clock=lambda: now[0])
    own.remember({"metadata": {"name": "a", "namespace": "shop", "resourceVersion": "9"}})
    cache.items["shop/a"] = {"metadata": {"name": "a", "namespace": "shop",
                                          "resourceVersion": "12"}}
    assert own.get("shop/a") is not None and own.get("shop/a")["metadata"]["resourceVersion"] == "9"
    now[0] = 6.0
    assert own.get("shop/a") is cache.items["shop/a"]
