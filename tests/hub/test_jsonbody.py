"""`strict_loads` refuses exactly what it refused before its orjson fast check."""

from __future__ import annotations

import json

import pytest

from hub.api.jsonbody import IntegerTooLong, strict_loads


@pytest.mark.parametrize(
    "body",
    [
        b'{"a": "\\ud800"}',  # a lone surrogate in a value
        b'{"\\udfff": 1}',  # in a key
        b'[1, {"x": ["\\ud83d"]}]',  # deep inside
        b'[18446744073709551616, "\\ud800"]',  # beside what orjson refuses for another reason
        b"[" * 300 + b'"\\ud800"' + b"]" * 300,  # nested past orjson's depth
    ],
)
def test_lone_surrogates_are_refused(body: bytes) -> None:
    with pytest.raises(json.JSONDecodeError, match="surrogate"):
        strict_loads(body)


@pytest.mark.parametrize(
    "body",
    [
        b'{"a": "\\ud83d\\ude00", "b": "\xc3\xa9"}',  # a surrogate pair is one character
        b"[18446744073709551616]",  # larger than 64 bits: orjson refuses, json takes it
        b"[" * 300 + b"]" * 300,  # deeper than orjson encodes, shallower than the limit
        b"NaN",  # json.loads takes it, as it always did
    ],
)
def test_what_json_loads_takes_is_kept(body: bytes) -> None:
    assert json.dumps(strict_loads(body)) == json.dumps(json.loads(body))


def test_an_integer_past_pythons_digit_limit_is_kept_as_a_refusable_value() -> None:
    """`json.loads` raises ValueError on an integer of more than 4,300 digits (Python's guard
    against quadratic int parsing), which FastAPI answered as a bare 400. It must parse, so
    that validation can name the field it sits in."""
    value = strict_loads(b'{"generation": ' + b"9" * 5000 + b', "n": [-' + b"1" * 4301 + b"]}")
    assert isinstance(value["generation"], IntegerTooLong)
    assert value["generation"].digits == 5000
    assert isinstance(value["n"][0], IntegerTooLong)
    assert strict_loads(b"[" + b"9" * 4300 + b"]") == [int("9" * 4300)]  # the limit itself
