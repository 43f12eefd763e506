"""A table as a list of columns, kubectl's `customcolumn.go` `Column{Header, FieldSpec}`.

Each list command declares its table once, as `Column(header, getter, wide=False)`
entries, and everything about the table is derived from that one list: the header line,
every row (listing, `get … -o wide`, each line of `--watch`), and which columns `-o wide`
adds. Before, headers and row functions were parallel tuples kept in step by hand, and a
column added to one but not the other shifted every cell after it.

`-o wide` appends the wide columns after the narrow ones, in their declared order, and
never reorders the narrow ones, so a script cutting columns by position reads both
outputs alike (docs/reference.md#cli). A getter takes the object and the moment the table
is printed at, so that ages are the getter's business and stay testable with a fixed clock.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Generic, TypeVar

from cli.render import Cells, Table

T = TypeVar("T")


@dataclass(frozen=True)
class Column(Generic[T]):
    """One column: its header, the text of its cell for an object (at a moment), and
    whether only `-o wide` shows it."""

    header: str
    getter: Callable[[T, datetime], str]
    wide: bool = False


def shown(columns: Sequence[Column[T]], *, wide: bool = False) -> tuple[Column[T], ...]:
    """The columns a table prints: the narrow ones, then (with `-o wide`) the wide ones."""
    narrow = tuple(c for c in columns if not c.wide)
    return narrow + (tuple(c for c in columns if c.wide) if wide else ())


def headers(columns: Sequence[Column[T]], *, wide: bool = False) -> Cells:
    return tuple(c.header for c in shown(columns, wide=wide))


def row(columns: Sequence[Column[T]], item: T, *, now: datetime, wide: bool = False) -> Cells:
    return tuple(c.getter(item, now) for c in shown(columns, wide=wide))


def table(
    columns: Sequence[Column[T]], items: Iterable[T], *, now: datetime, wide: bool = False
) -> Table:
    """The table of `items`: headers and rows from the same columns."""
    return Table(headers(columns, wide=wide),
                 tuple(row(columns, item, now=now, wide=wide) for item in items))


@dataclass(frozen=True)
class Shape(Generic[T]):
    """Headers and a row function, for output that prints rows one at a time (`--watch`):
    the columns' own, read at the moment each row is printed."""

    headers: Cells
    row: Callable[[T], Cells]


def shape(
    columns: Sequence[Column[T]], *, now: Callable[[], datetime], wide: bool = False
) -> Shape[T]:
    return Shape(headers(columns, wide=wide),
                 lambda item: row(columns, item, now=now(), wide=wide))
