"""The value objects the store answers with: a page of a list, the outcome of a PUT."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Generic, TypeVar

from shared.models import InternalServiceExport

T = TypeVar("T")


@dataclass(frozen=True)
class Page(Generic[T]):
    items: list[T]
    resource_version: str  # the global revision at read time (watch from here)
    continue_token: str | None  # opaque; None on the last page


@dataclass(frozen=True)
class PutResult:
    object: InternalServiceExport  # the stored object with its verdict
    created: bool
    changed: bool  # False for an idempotent re-PUT (no new revision)
