"""The store's exceptions: what the API turns into HTTP status codes.

The API layer maps each class to one answer (NotFound → 404, AlreadyExists → 409,
Conflict → 409, Forbidden → 403, Invalid → 422, Gone → 410, DatabaseUnavailable → 503
with Retry-After), so every message here is written for the person reading the HTTP
answer: it names the object or the problem, never a driver's internals.
"""

from __future__ import annotations


class StoreError(Exception):
    """Base of every error the store raises on purpose."""


class NotFound(StoreError):
    """The named object does not exist; the message says which one."""


class AlreadyExists(StoreError):
    """An object with that name exists already."""


class Conflict(StoreError):
    """A resourceVersion precondition failed: the caller's copy is stale."""


class Forbidden(StoreError):
    """A member may not write this (docs/reference.md#scope-and-limits): outside its namespace
    scope, or past a quota. The message names the rule or the limit."""


class Invalid(StoreError):
    """What a write would store is not what the hub accepts, though the request alone was
    (docs/reference.md#scope-and-limits): an annotation patch whose merged result is past
    Kubernetes' limit, a PUT keeping annotations stored too large by an older hub."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


class Gone(StoreError):
    """The requested revision is older than the retained change history; relist."""


class DatabaseUnavailable(StoreError):
    """The database cannot be reached, dropped the connection, or is locked.

    Transient by nature: the API answers 503 with Retry-After and the caller retries.
    """
