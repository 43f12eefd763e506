"""Strategic merge patch for the built-in kinds served, as `kubectl apply` computes it.

kubectl (and client-go typed clients) send `application/strategic-merge-patch+json` to
built-ins. It is a JSON merge patch except for the lists whose Go type says
`patchStrategy:"merge"`: those merge element by element — maps by their `patchMergeKey`,
primitives as a set — instead of being replaced. The lists of the kinds served here that
do so are `metadata.finalizers` (set), `metadata.ownerReferences` (by `uid`), a Service's
`spec.ports` (by `port`) and `status.conditions` of Services and Namespaces (by `type`);
every other list (EndpointSlice `endpoints`/`ports`, `clusterIPs`, …) is atomic.

Directives honoured: `$patch: replace|delete` (in a map, and as a list element),
`$retainKeys`, `$setElementOrder/<list>` and `$deleteFromPrimitiveList/<list>`, which is
what kubectl's three-way patches for these kinds contain.
"""

from __future__ import annotations

import copy
from typing import Any

from sandbox.emulator.errors import bad_request

Path = tuple[str, ...]
SET = ""  # merge strategy of a primitive list: union

COMMON: dict[Path, str] = {
    ("metadata", "finalizers"): SET,
    ("metadata", "ownerReferences"): "uid",
}
MERGE_LISTS: dict[str, dict[Path, str]] = {
    "services": {**COMMON, ("spec", "ports"): "port", ("status", "conditions"): "type"},
    "namespaces": {**COMMON, ("status", "conditions"): "type"},
}

SET_ORDER = "$setElementOrder/"
DELETE_FROM = "$deleteFromPrimitiveList/"


def strategic_merge(target: Any, patch: Any, plural: str) -> Any:
    """Apply a strategic merge patch to an object of the built-in resource `plural`."""
    if not isinstance(patch, dict):
        raise bad_request("a strategic merge patch must be a JSON object")
    return _merge_map(target if isinstance(target, dict) else {}, patch,
                      MERGE_LISTS.get(plural, COMMON), ())


def _merge_map(target: dict[str, Any], patch: dict[str, Any], lists: dict[Path, str],
               path: Path) -> Any:
    directive = patch.get("$patch")
    if directive == "delete":
        return None
    body = {k: v for k, v in patch.items() if k != "$patch"}
    if directive == "replace":
        return _strip(body)
    if directive is not None:
        raise bad_request(f"unknown patch type {directive!r} at {'.'.join(path) or '.'}")
    result = copy.deepcopy(target)
    retain = body.pop("$retainKeys", None)
    orders = {k[len(SET_ORDER):]: body.pop(k) for k in list(body) if k.startswith(SET_ORDER)}
    removals = {k[len(DELETE_FROM):]: body.pop(k) for k in list(body)
                if k.startswith(DELETE_FROM)}
    for key, value in body.items():
        here = (*path, key)
        if value is None:
            result.pop(key, None)
        elif isinstance(value, dict):
            existing = result.get(key)
            merged = _merge_map(existing if isinstance(existing, dict) else {}, value, lists,
                                here)
            if merged is None:
                result.pop(key, None)
            else:
                result[key] = merged
        elif isinstance(value, list) and here in lists:
            current = result.get(key)
            result[key] = _merge_list(current if isinstance(current, list) else [], value,
                                      lists[here], lists, here)
        else:
            result[key] = _strip(copy.deepcopy(value))
    for key, values in removals.items():
        if isinstance(result.get(key), list) and isinstance(values, list):
            result[key] = [v for v in result[key] if v not in values]
    for key, order in orders.items():
        if isinstance(result.get(key), list) and isinstance(order, list):
            result[key] = _reorder(result[key], order, lists.get((*path, key), SET))
    if isinstance(retain, list):
        result = {k: v for k, v in result.items() if k in retain}
    return result


def _merge_list(current: list[Any], patch: list[Any], merge_key: str, lists: dict[Path, str],
                path: Path) -> list[Any]:
    if any(isinstance(e, dict) and e.get("$patch") == "replace" for e in patch):
        return [_strip(e) for e in patch if not (isinstance(e, dict) and "$patch" in e)]
    if merge_key == SET:
        return [*current, *(v for v in patch if v not in current)]
    result = copy.deepcopy(current)
    for element in patch:
        if not isinstance(element, dict) or merge_key not in element:
            raise bad_request(f"map: {element!r} does not contain declared merge key: "
                              f"{merge_key}")
        index = next((i for i, e in enumerate(result)
                      if isinstance(e, dict) and e.get(merge_key) == element[merge_key]), None)
        if element.get("$patch") == "delete":
            if index is not None:
                result.pop(index)
        elif index is None:
            result.append(_strip(element))
        else:
            result[index] = _merge_map(result[index], element, lists, path)
    return result


def _reorder(items: list[Any], order: list[Any], merge_key: str) -> list[Any]:
    """`$setElementOrder`: the listed elements first, in that order; the rest after."""
    def ident(value: Any) -> Any:
        return value.get(merge_key) if merge_key and isinstance(value, dict) else value

    wanted = [ident(o) for o in order]
    ranked = sorted(range(len(items)), key=lambda i: (
        wanted.index(ident(items[i])) if ident(items[i]) in wanted else len(wanted), i))
    return [items[i] for i in ranked]


def _strip(value: Any) -> Any:
    """Drop directives from a value that is stored as is."""
    if isinstance(value, dict):
        return {k: _strip(v) for k, v in value.items() if not k.startswith("$")}
    if isinstance(value, list):
        return [_strip(v) for v in value]
    return value
