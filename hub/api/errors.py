"""The app's exception handlers: every anticipated failure becomes a `Status` answer.

Three sources of failure meet here:

* `ApiError` (`hub.api.status`), raised by routes and dependencies for decisions of their
  own;
* FastAPI's `RequestValidationError` (422) and Starlette's `HTTPException` (404 for an
  unknown path, 405 …), re-shaped by `hub.api.status.validation_status`;
* the store's exceptions, each mapped to exactly one answer: NotFound → 404,
  AlreadyExists → 409, Conflict → 409, Forbidden → 403, Invalid → 422 (naming the field),
  Gone → 410, DatabaseUnavailable → 503 with `Retry-After` (an outage is never a 500).

Only the outage handler needs the app's context (its settings give `Retry-After`, its
metrics count the failure), which is why the handlers live apart from the pure Status
makers: nothing but `hub.app` imports this module.

Unexpected exceptions are answered 500 by the request observer (`hub.api.observe`), which
also logs them; no answer ever carries a stack trace or a submitted value.
"""

from __future__ import annotations

import logging
from http import HTTPStatus
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from hub.api.deps import context_of
from hub.api.status import (
    ApiError,
    make_status,
    status_response,
    unavailable_status,
    validation_status,
)
from hub.logs import fields
from hub.store import AlreadyExists, Conflict, DatabaseUnavailable, Gone, NotFound
from hub.store.errors import Forbidden, Invalid

log = logging.getLogger("mcsync.hub.api")


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


async def _invalid(_request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, Invalid)
    return status_response(ApiError.invalid(exc.field, exc.message).status)


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
    app.add_exception_handler(Forbidden, _store_error(403, "Forbidden"))
    app.add_exception_handler(Invalid, _invalid)
    app.add_exception_handler(DatabaseUnavailable, _database_unavailable)
