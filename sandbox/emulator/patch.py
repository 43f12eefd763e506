"""The three patch formats the official client sends: JSON merge, strategic, JSON patch.

- `application/merge-patch+json` is RFC 7386: objects merge recursively, `null` deletes,
  every other value (lists included) replaces.
- `application/strategic-merge-patch+json` on built-ins is `strategic.py`: a merge patch
  whose `patchStrategy: merge` lists (finalizers, ownerReferences, Service ports,
  conditions) merge element by element, with kubectl's directives. Custom resources
  (CRDs) reject it with 415, exactly as a real apiserver does.
- `application/json-patch+json` is RFC 6902 (add, remove, replace, move, copy, test).
"""

from __future__ import annotations

import copy
from typing import Any

from sandbox.emulator.errors import KubeError, bad_request, unsupported_media_type
from sandbox.emulator.strategic import strategic_merge

MERGE = "application/merge-patch+json"
STRATEGIC = "application/strategic-merge-patch+json"
JSON_PATCH = "application/json-patch+json"


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch of `target` by `patch` (inputs are not modified)."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = copy.deepcopy(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def _unescape(token: str) -> str:
    return token.replace("~1", "/").replace("~0", "~")


def _pointer(path: str) -> list[str]:
    if path == "":
        return []
    if not path.startswith("/"):
        raise bad_request(f"invalid JSON pointer {path!r}")
    return [_unescape(t) for t in path[1:].split("/")]


def _unprocessable(message: str) -> KubeError:
    return KubeError(422, "Invalid", f"the server rejected our request due to an error in our "
                                     f"request: {message}")


def _parent(doc: Any, tokens: list[str], path: str) -> tuple[Any, str]:
    node = doc
    for token in tokens[:-1]:
        if isinstance(node, dict) and token in node:
            node = node[token]
        elif isinstance(node, list) and token.isdigit() and int(token) < len(node):
            node = node[int(token)]
        else:
            raise _unprocessable(f"path {path!r} does not exist")
    return node, tokens[-1]


def _get(doc: Any, path: str) -> Any:
    tokens = _pointer(path)
    if not tokens:
        return doc
    parent, last = _parent(doc, tokens, path)
    if isinstance(parent, dict) and last in parent:
        return parent[last]
    if isinstance(parent, list) and last.isdigit() and int(last) < len(parent):
        return parent[int(last)]
    raise _unprocessable(f"path {path!r} does not exist")


def _remove(doc: Any, path: str) -> Any:
    tokens = _pointer(path)
    if not tokens:
        raise _unprocessable("cannot remove the whole document")
    parent, last = _parent(doc, tokens, path)
    if isinstance(parent, dict) and last in parent:
        return parent.pop(last)
    if isinstance(parent, list) and last.isdigit() and int(last) < len(parent):
        return parent.pop(int(last))
    raise _unprocessable(f"path {path!r} does not exist")


def _add(doc: Any, path: str, value: Any, *, replace: bool) -> Any:
    tokens = _pointer(path)
    if not tokens:
        return value
    parent, last = _parent(doc, tokens, path)
    if isinstance(parent, dict):
        if replace and last not in parent:
            raise _unprocessable(f"path {path!r} does not exist")
        parent[last] = value
    elif isinstance(parent, list):
        if last == "-" and not replace:
            parent.append(value)
        elif last.isdigit() and int(last) <= len(parent) - (1 if replace else 0):
            if replace:
                parent[int(last)] = value
            else:
                parent.insert(int(last), value)
        else:
            raise _unprocessable(f"path {path!r} is out of range")
    else:
        raise _unprocessable(f"path {path!r} does not exist")
    return doc


def json_patch(target: Any, operations: Any) -> Any:
    """RFC 6902 JSON patch; a failing `test` or a missing path is a 422."""
    if not isinstance(operations, list):
        raise bad_request("a JSON patch must be a list of operations")
    doc = copy.deepcopy(target)
    for op in operations:
        if not isinstance(op, dict) or "op" not in op or "path" not in op:
            raise bad_request(f"invalid JSON patch operation {op!r}")
        kind, path = op["op"], op["path"]
        if kind in ("add", "replace", "test") and "value" not in op:
            raise bad_request(f"JSON patch operation {kind!r} needs a value")
        if kind == "add":
            doc = _add(doc, path, copy.deepcopy(op["value"]), replace=False)
        elif kind == "replace":
            doc = _add(doc, path, copy.deepcopy(op["value"]), replace=True)
        elif kind == "remove":
            _remove(doc, path)
        elif kind == "move":
            value = _remove(doc, op.get("from", ""))
            doc = _add(doc, path, value, replace=False)
        elif kind == "copy":
            doc = _add(doc, path, copy.deepcopy(_get(doc, op.get("from", ""))), replace=False)
        elif kind == "test":
            if _get(doc, path) != op["value"]:
                raise _unprocessable(f"testing value {path} failed")
        else:
            raise bad_request(f"unknown JSON patch operation {kind!r}")
    return doc


def apply_patch(target: dict[str, Any], patch: Any, content_type: str, *,
                custom: bool, plural: str = "") -> dict[str, Any]:
    """Apply `patch` of media type `content_type` to an object of resource `plural`;
    `custom` resources refuse strategic merge."""
    media = content_type.split(";")[0].strip().lower()
    if media == STRATEGIC and not custom:
        result = strategic_merge(target, patch, plural)
    elif media == MERGE:
        if not isinstance(patch, dict):
            raise bad_request("a merge patch must be a JSON object")
        result = merge_patch(target, patch)
    elif media == JSON_PATCH:
        result = json_patch(target, patch)
    else:
        raise unsupported_media_type(content_type)
    if not isinstance(result, dict):
        raise bad_request("the patch did not produce an object")
    return result
