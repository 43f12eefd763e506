"""The `Status` answers of the API (docs/reference.md#rest-api), made without touching the app's
state.

Every failed request answers a shared `Status`. This module holds what makes one: the
reasons by code, `ApiError` (raised by routes and dependencies for decisions of their own:
401, 403, 422 for a path/body disagreement, 415 …), `make_status`, the 503 of an outage,
and the reshaping of FastAPI's validation errors so that the message and
`details.causes[].field` name the field in Kubernetes' notation (`spec.ports[1].port`).

It is pure — it imports nothing of `hub.api` but the JSON parser's marker type — so that
every other API module (dependencies, parameters, auth, watch, middleware, routes) may use
it without an import cycle. The exception handlers that need the app's context (the 503's
`Retry-After` from the settings, the database-error metric) are in `hub.api.errors`.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from http import HTTPStatus
from typing import Any

from fastapi.responses import JSONResponse

from hub.api.jsonbody import IntegerTooLong
from shared.models import Status, StatusCause, StatusDetails, to_wire

REASONS: Mapping[int, str] = {
    400: "BadRequest",
    401: "Unauthorized",
    403: "Forbidden",
    404: "NotFound",
    405: "MethodNotAllowed",
    406: "NotAcceptable",
    409: "Conflict",
    410: "Gone",
    413: "RequestEntityTooLarge",
    415: "UnsupportedMediaType",
    422: "Invalid",
    429: "TooManyRequests",
    500: "InternalError",
    503: "ServiceUnavailable",
}


def documented(*codes: int) -> dict[int | str, dict[str, Any]]:
    """For OpenAPI: the error answers a route may give, each documented as a Status."""
    return {code: {"model": Status, "description": HTTPStatus(code).phrase} for code in codes}


class ApiError(Exception):
    """A request the API refuses on purpose; becomes a Status answer."""

    def __init__(
        self,
        code: int,
        message: str,
        *,
        reason: str | None = None,
        causes: Sequence[StatusCause] = (),
        headers: Mapping[str, str] | None = None,
        retry_after_seconds: int | None = None,
    ) -> None:
        super().__init__(message)
        self.status = make_status(
            code, message, reason=reason, causes=causes, retry_after_seconds=retry_after_seconds
        )
        self.headers = dict(headers or {})

    @classmethod
    def invalid(cls, field: str, message: str) -> ApiError:
        """A 422 naming `field` (dotted path, as in the request body)."""
        return cls(
            422,
            f"{field}: {message}",
            causes=[StatusCause(field=field, message=message, reason="FieldValueInvalid")],
        )

    @classmethod
    def differs_from_path(cls, field: str, value: object, what: str, path_value: str) -> ApiError:
        """The 422 for a body field that names another object than the URL path does."""
        return cls.invalid(field, f"{value!r} differs from the {what} in the path, {path_value!r}")


def unauthorized(message: str) -> ApiError:
    return ApiError(401, message, headers={"WWW-Authenticate": 'Bearer realm="mcsync"'})


def forbidden(message: str) -> ApiError:
    return ApiError(403, message)


def make_status(
    code: int,
    message: str,
    *,
    reason: str | None = None,
    causes: Sequence[StatusCause] = (),
    retry_after_seconds: int | None = None,
) -> Status:
    details = None
    if causes or retry_after_seconds is not None:
        details = StatusDetails(causes=list(causes), retry_after_seconds=retry_after_seconds)
    return Status(
        code=code,
        reason=reason or REASONS.get(code, HTTPStatus(code).phrase.replace(" ", "")),
        message=message,
        details=details,
    )


def status_response(status: Status, *, headers: Mapping[str, str] | None = None) -> JSONResponse:
    return JSONResponse(to_wire(status), status_code=status.code, headers=dict(headers or {}))


def unavailable_status(message: str, *, retry_after_seconds: int) -> tuple[Status, dict[str, str]]:
    """The 503 answer for a database outage, and its Retry-After header."""
    status = make_status(503, message, retry_after_seconds=retry_after_seconds)
    return status, {"Retry-After": str(retry_after_seconds)}


# --- validation errors → field paths ----------------------------------------------------

_LOCATION_WORDS = {"path": "path parameter", "query": "query parameter", "header": "header"}
_PATH_PATTERNS = {
    "cluster": "is not a DNS-1123 label (lowercase letters, digits and '-', starting and "
    "ending with a letter or digit, at most 63 characters)",
    "namespace": "is not a DNS-1123 label (lowercase letters, digits and '-', starting and "
    "ending with a letter or digit, at most 63 characters)",
    "name": "is not a DNS-1035 label (lowercase letters, digits and '-', starting with a "
    "letter, ending with a letter or digit, at most 63 characters)",
}


def field_path(parts: Iterable[str | int]) -> str:
    """`("spec", "ports", 1, "port")` → `spec.ports[1].port`."""
    path = ""
    for part in parts:
        if isinstance(part, int):
            path += f"[{part}]"
        else:
            path += f".{part}" if path else str(part)
    return path


# Kinds whose message already quotes the value (our own ValueErrors), or that have none.
_NO_VALUE_KINDS = frozenset({"value_error", "missing", "extra_forbidden", "json_invalid"})


def _got(value: object) -> str:
    """` (got <value as JSON>)` for a scalar input, cut to 70 characters; else nothing."""
    if isinstance(value, bool):
        return f" (got {'true' if value else 'false'})"
    if value is None:
        return " (got null)"
    if isinstance(value, int | float):
        return f" (got {value!r})"
    if isinstance(value, str):
        shown = value[:70] + ("..." if len(value) > 70 else "")
        return f" (got {json.dumps(shown)})"
    return ""


def _cause(error: Mapping[str, Any]) -> StatusCause:
    loc = tuple(error.get("loc", ()))
    where, rest = (loc[0], loc[1:]) if loc else ("body", ())
    kind = str(error.get("type", ""))
    message = str(error.get("msg", "invalid value")).removeprefix("Value error, ")
    if kind == "json_invalid":
        problem = (error.get("ctx") or {}).get("error", "not valid JSON")
        position = f" at character {rest[0]}" if rest and isinstance(rest[0], int) else ""
        return StatusCause(
            field=None, message=f"malformed JSON body: {problem}{position}", reason="BadJSON"
        )
    if isinstance(error.get("input"), IntegerTooLong):
        message = f"{error['input'].digits}-digit integer is out of range"
    elif kind not in _NO_VALUE_KINDS:
        # docs/reference.md#scope-and-limits: a refusal names the value too (`"port": true` → `got
        # true`).
        message += _got(error.get("input"))
    if where == "body":
        # A union member's tag (e.g. a model name) is noise in a field path.
        field = field_path(p for p in rest if not (isinstance(p, str) and "[" in p)) or None
        if kind == "missing" and not rest:
            message = "a JSON body is required"
        elif kind in ("model_attributes_type", "dict_type", "model_type") and not rest:
            message = "the request body must be a JSON object"
        return StatusCause(field=field, message=message, reason=kind or None)
    name = field_path(rest)
    if (
        where == "path"
        and kind in ("string_pattern_mismatch", "string_too_long")
        and name in _PATH_PATTERNS
    ):
        # A path segment is no secret, and naming it helps more than the regular expression.
        message = f"{str(error.get('input', ''))[:70]!r} {_PATH_PATTERNS[name]}"
    word = _LOCATION_WORDS.get(str(where), str(where))
    return StatusCause(field=name, message=f"{word} {name}: {message}", reason=kind or None)


def validation_status(errors: Sequence[Mapping[str, Any]]) -> Status:
    causes = [_cause(e) for e in errors]
    parts = []
    for cause in causes:
        if cause.field and not cause.message.startswith(("path ", "query ", "header ")):
            parts.append(f"{cause.field}: {cause.message}")
        else:
            parts.append(cause.message)
    message = "invalid request: " + "; ".join(parts) if parts else "invalid request"
    return make_status(422, message, causes=causes)
