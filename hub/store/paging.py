"""Opaque continue tokens for keyset paging.

A token is the urlsafe base64 of a small JSON object holding the last key of the page
and which listing it belongs to. Paging by key (`WHERE (namespace, name, …) > token`)
rather than by offset costs the same on page 1000 as on page 1, and never skips or
repeats a row that existed throughout the listing.

A token is the client's to send back, so a forged one is input like any other: each part
of its key must look like the names the store keeps (empty, or lowercase alphanumerics,
`-` and `.`, at most 253 characters). Anything else — a NUL, which PostgreSQL refuses
in a text parameter, a control character, an over-long part — is refused here, as a
malformed token (422), before it reaches a query.

A listing reads one row more than its `limit`: that row's presence is how it knows a next
page exists, and `cut` turns the rows read into the page and the token for the next one.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Callable, Sequence
from typing import TypeVar

T = TypeVar("T")

# What every key part of every listing is: a DNS label or subdomain (namespaces, names,
# cluster ids, slice names), or empty (a ServiceImport's own row in the import list).
_KEY_PART = re.compile(r"(?:[a-z0-9](?:[-a-z0-9.]{0,251}[a-z0-9])?)?")


def encode(kind: str, key: tuple[str, ...]) -> str:
    raw = json.dumps({"v": 1, "kind": kind, "key": list(key)}, separators=(",", ":"))
    return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")


def decode(kind: str, token: str, *, width: int) -> tuple[str, ...]:
    """The last key of the previous page; ValueError naming the problem otherwise."""
    try:
        padded = token + "=" * (-len(token) % 4)
        data = json.loads(base64.urlsafe_b64decode(padded.encode()))
    except (ValueError, binascii.Error, UnicodeDecodeError):
        raise ValueError("continue token is malformed; start the listing again") from None
    key = data.get("key") if isinstance(data, dict) else None
    if (
        not isinstance(data, dict)
        or data.get("v") != 1
        or data.get("kind") != kind
        or not isinstance(key, list)
        or len(key) != width
        or not all(isinstance(part, str) for part in key)
    ):
        raise ValueError(f"continue token does not belong to a {kind} listing")
    if not all(_KEY_PART.fullmatch(part) for part in key):
        raise ValueError("continue token is malformed; start the listing again")
    return tuple(key)


def check_limit(limit: int | None) -> None:
    if limit is not None and limit < 1:
        raise ValueError(f"limit must be at least 1, got {limit}")


def cut(
    rows: Sequence[T], limit: int | None, kind: str, key: Callable[[T], tuple[str, ...]]
) -> tuple[Sequence[T], str | None]:
    """The page in `rows` (read with `limit + 1`) and the token of the next page: the key
    of the page's last row, or None when `rows` held no more than the page."""
    if limit is None or len(rows) <= limit:
        return rows, None
    page = rows[:limit]
    return page, encode(kind, key(page[-1]))
