"""Every failed request answers a shared `Status` (SPEC §4.1): this module makes them.

Three sources of failure meet here:

* `ApiError`, raised by routes and dependencies for decisions of their own (401, 403,
  422 for a path/body disagreement, 415 …);
* FastAPI's `RequestValidationError` (422) and Starlette's `HTTPException` (404 for an
  unknown path, 405 …), re-shaped so that the message and `details.causes[].field`
  name the field in Kubernetes' notation (`spec.ports[1].port`);
* the store's exceptions, each mapped to exactly one answer: NotFound → 404,
  AlreadyExists → 409, Conflict → 409, Gone → 410, DatabaseUnavailable → 503 with
  `Retry-After` (SPEC §5: an outage is never a 500).

Unexpected exceptions are answered 500 by the request observer (`hub.api.observe`), which
also logs them; no answer ever carries a stack trace or a submitted value.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from http import HTTPStatus
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from hub.api.deps import context_of
from hub.api.jsonbody import IntegerTooLong
from hub.logs import fields
from hub.store import AlreadyExists, Conflict, DatabaseUnavailable, Gone, NotFound
from shared.models import Status, StatusCause, StatusDetails, to_wire

log = logging.getLogger("mcsync.hub.api")

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


# --- handlers ---------------------------------------------------------------------------


async def _api_error(_request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, ApiError)
    return status_response(exc.status, headers=exc.headers)


async def _validation_error(_request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    return status_response(validation_status(list(exc.errors())))


async def _http_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, StarletteHTTPException)
    code = exc.status_code
    message = str(exc.detail) if exc.detail else HTTPStatus(code).phrase
    if code == 404 and message == HTTPStatus(404).phrase:
        message = f"no such path: {request.url.path}"
    elif code == 405:
        message = f"{request.method} is not allowed on {request.url.path}"
    return status_response(make_status(code, message), headers=exc.headers)


def _store_error(code: int, reason: str) -> Any:
    async def handler(_request: Request, exc: Exception) -> JSONResponse:
        return status_response(make_status(code, str(exc), reason=reason))

    return handler


async def _database_unavailable(request: Request, exc: Exception) -> JSONResponse:
    ctx = context_of(request.app)
    ctx.metrics.database_errors.inc()
    log.warning(
        "database unavailable; answering 503",
        extra=fields(method=request.method, path=request.url.path, error=str(exc)),
    )
    status, headers = unavailable_status(
        str(exc), retry_after_seconds=ctx.settings.retry_after_seconds
    )
    return status_response(status, headers=headers)


def install_error_handlers(app: FastAPI) -> None:
    """Answer every anticipated failure of `app` with a Status."""
    app.add_exception_handler(ApiError, _api_error)
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(StarletteHTTPException, _http_error)
    app.add_exception_handler(NotFound, _store_error(404, "NotFound"))
    app.add_exception_handler(AlreadyExists, _store_error(409, "AlreadyExists"))
    app.add_exception_handler(Conflict, _store_error(409, "Conflict"))
    app.add_exception_handler(Gone, _store_error(410, "Gone"))
    app.add_exception_handler(DatabaseUnavailable, _database_unavailable)
