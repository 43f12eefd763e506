"""One informer per watched namespace, read as one cache.

An agent restricted to some namespaces (`--namespace`) may only list and watch in those,
so it runs one informer per namespace; unrestricted, one for all (key None). Both the
export side (`member.app`) and the import side (`member.imports.importer`) build their informers
this way and read them through a `NamespacedLister`, which sends a "namespace/name" to the
informer of its namespace (or the one for all).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from member.informer import EventHandler, Informer, ItemTransform, ListWatch

__all__ = ["NamespacedLister", "per_namespace"]


def per_namespace(
    namespaces: Iterable[str | None],
    *,
    name: str,
    list_watch: Callable[[str | None], ListWatch],
    handler: EventHandler,
    watch_timeout_seconds: int,
    transform: ItemTransform | None = None,
) -> dict[str | None, Informer]:
    """An informer per namespace (None: all), each named `name[namespace]` (`name[*]`)."""
    return {
        ns: Informer(
            name=f"{name}[{ns or '*'}]",
            list_watch=list_watch(ns),
            handler=handler,
            watch_timeout_seconds=watch_timeout_seconds,
            transform=transform,
        )
        for ns in namespaces
    }


class NamespacedLister:
    """A lister over one informer per namespace (or one for all): `get("ns/name")`."""

    def __init__(self, informers: dict[str | None, Informer]) -> None:
        self._informers = informers

    def get(self, key: str) -> dict[str, Any] | None:
        namespace = key.partition("/")[0]
        informer = self._informers.get(namespace) or self._informers.get(None)
        return informer.get(key) if informer is not None else None

    def keys(self) -> set[str]:
        return {key for informer in self._informers.values() for key in informer.keys()}

    def cached(self) -> list[dict[str, Any]]:
        return [obj for i in self._informers.values() for obj in i.list_cached()]
