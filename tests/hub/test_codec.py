"""The store's canonical JSON text must not drift: stored texts are compared, not parsed.

`codec.canonical_json` writes with orjson; every text it writes must be byte-identical to
the stdlib encoding the store used before, or every stored export would read as changed
(and be rewritten, with a revision and a change row) on its next sync.
"""

from __future__ import annotations

import json
import random
import sys
from typing import Any

import pytest

from hub.store import codec

STDLIB = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _written_alike(chars: str) -> bool:
    value = {f"k{chars}": f"v{chars}", "list": list(chars)}
    return codec.canonical_json(value) == STDLIB.encode(value)


def test_every_code_point_is_written_as_the_stdlib_writes_it() -> None:
    # JSON escapes each character on its own, so a run of code points written alike is
    # each of them written alike; a run that differs is searched one code point at a time.
    points = [cp for cp in range(sys.maxunicode + 1) if not 0xD800 <= cp <= 0xDFFF]
    for start in range(0, len(points), 1024):  # lone surrogates: covered below
        run = "".join(map(chr, points[start : start + 1024]))
        if not _written_alike(run):
            differ = [hex(ord(char)) for char in run if not _written_alike(char)]
            assert differ == [], differ


def test_key_order_is_code_point_order_at_every_depth() -> None:
    rng = random.Random(7)
    keys = ["", "a", "B", "ab", "a\x00", "a b", "\u00e9", "\uffff", "\U0001f600", "Z", "z"]
    keys += [
        "".join(
            chr(
                rng.choice(
                    [
                        rng.randint(32, 0x7F),
                        rng.randint(0x80, 0xD7FF),
                        rng.randint(0xE000, 0x10FFFF),
                    ]
                )
            )
            for _ in range(rng.randint(1, 4))
        )
        for _ in range(300)
    ]
    nested: dict[str, Any] = {k: i for i, k in enumerate(keys)}
    nested["inner"] = {k: [k, {k: None}] for k in reversed(keys)}
    assert codec.canonical_json(nested) == STDLIB.encode(nested)


@pytest.mark.parametrize(
    "value",
    [
        None,
        True,
        False,
        0,
        -1,
        2**63 - 1,
        -(2**63),
        "",
        [],
        {},
        {"a": [1, True, None, {"b": {}}], "c": '"quoted" \\ back\tslash\n\r\b\f\x00\x1f\x7f'},
        {"s": "\u2028\u2029</script>&<>'"},
    ],
)
def test_plain_values(value: Any) -> None:
    assert codec.canonical_json(value) == STDLIB.encode(value)


@pytest.mark.parametrize(
    "value",
    [
        2**64,  # orjson refuses ints past 64 bits
        {"s": "\ud800"},  # and lone surrogates
        {1: "a"},  # and non-string keys
        json.loads("[" * 300 + "]" * 300),  # and deep nesting
    ],
)
def test_what_orjson_refuses_is_written_by_the_stdlib(value: Any) -> None:
    assert codec.canonical_json(value) == STDLIB.encode(value)
