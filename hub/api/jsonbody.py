"""Request bodies are parsed as *strict* JSON: what json.loads accepts but no database can
store, or what it cannot parse without blowing the stack, is a 422 "malformed JSON body".

FastAPI parses a body with `json.loads` and answers a syntax error with a 422 (which
`hub.api.status` words as "malformed JSON body"), but two kinds of hostile input slip past
that path:

* a document nested thousands of levels deep makes `json.loads` raise RecursionError,
  which FastAPI turns into a bare 400 "There was an error parsing the body";
* `"\\ud800"` (a lone UTF-16 surrogate) is valid JSON syntax and parses into a Python
  string that cannot be encoded as UTF-8, so the first database write that meets it
  fails with UnicodeEncodeError: a 500.

Both are the client's mistake and are refused here, before validation, as JSON syntax
errors: one place, for every route that takes a body, via `StrictJsonRoute`.

A third kind is valid JSON that Python will not turn into a value: an integer literal of
more than 4,300 digits (`sys.get_int_max_str_digits()`, CPython's guard against quadratic
int parsing) makes `json.loads` raise ValueError, which FastAPI also answered with its bare
400. Such a document is parsed again with each over-long integer kept as an
`IntegerTooLong`, which no field accepts: validation then answers the usual 422 naming the
field it sits in (`"generation": 999…9` → `spec.serviceReference.generation`), without
ever converting the digits.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Coroutine
from typing import Any

import orjson
from fastapi import Request, Response
from fastapi.routing import APIRoute

MAX_DEPTH_HINT = "the document is nested too deeply"


class IntegerTooLong:
    """An integer literal too long for Python to convert; refused by every field."""

    __slots__ = ("digits",)

    def __init__(self, digits: int) -> None:
        self.digits = digits

    def __repr__(self) -> str:
        return f"<an integer of {self.digits} digits>"


def _parse_int(text: str) -> int | IntegerTooLong:
    limit = sys.get_int_max_str_digits()
    digits = len(text) - text.startswith("-")
    if limit and digits > limit:
        return IntegerTooLong(digits)
    return int(text)


def _loads(text: str) -> Any:
    try:
        return json.loads(text)
    except RecursionError:
        raise json.JSONDecodeError(MAX_DEPTH_HINT, text, 0) from None
    except json.JSONDecodeError:
        raise
    except ValueError:
        # Python's integer digit limit (the only other ValueError json.loads raises): parse
        # again, keeping over-long integers unconverted. The common path pays nothing.
        try:
            return json.loads(text, parse_int=_parse_int)
        except RecursionError:  # pragma: no cover - the first parse would have said so
            raise json.JSONDecodeError(MAX_DEPTH_HINT, text, 0) from None


def strict_loads(body: bytes) -> Any:
    """Parse `body` like json.loads; raise JSONDecodeError for anything a store cannot hold."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        doc = body.decode("utf-8", errors="replace")
        raise json.JSONDecodeError("the body is not UTF-8", doc, exc.start) from None
    value = _loads(text)
    try:
        # orjson refuses a string that is not valid UTF-8, keys included, at C speed: a
        # document it encodes holds no lone surrogate (a 10,000-export sync paid 25 µs
        # per export for the stdlib re-encode below). What it refuses for another reason
        # (an int past 64 bits, an `IntegerTooLong`, nesting past 254 levels) gets the
        # stdlib's exact check.
        orjson.dumps(value)
        return value
    except TypeError:
        pass
    try:
        # Re-encoding finds lone surrogates anywhere in the document, keys included.
        json.dumps(value, ensure_ascii=False, default=repr).encode("utf-8")
    except UnicodeEncodeError:
        raise json.JSONDecodeError(
            "a string holds a lone UTF-16 surrogate (not valid Unicode)", text, 0
        ) from None
    except RecursionError:  # pragma: no cover - loads would have failed first
        raise json.JSONDecodeError(MAX_DEPTH_HINT, text, 0) from None
    return value


class StrictJsonRequest(Request):
    async def json(self) -> Any:
        if not hasattr(self, "_json"):
            self._json = strict_loads(await self.body())
        return self._json


class StrictJsonRoute(APIRoute):
    """An APIRoute whose handler sees a `StrictJsonRequest` (FastAPI's custom-request recipe)."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def strict_handler(request: Request) -> Response:
            return await handler(StrictJsonRequest(request.scope, request.receive))

        return strict_handler
