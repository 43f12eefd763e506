"""A list's table is its list of columns: one entry adds a column to the header line, to
every row, to `-o wide` only when it says so, and to the lines of `--watch`."""

from __future__ import annotations

import io
from types import ModuleType

import pytest

from cli import columns, render
from cli.__main__ import main
from cli.args import Options
from cli.cmd import clusters, conflicts, endpoints, exports, imports
from cli.columns import Column
from cli.commands import Context, WatchPrinter
from shared.models import MemberCluster
from tests.cli.fakehub import FakeHub
from tests.cli.samples import NOW, ago, cluster
from tests.cli.test_commands import HUB

ZONE: Column[MemberCluster] = Column(
    "ZONE", lambda c, now: (c.metadata.labels or {}).get("zone", render.NONE)
)
AGENT: Column[MemberCluster] = Column(
    "AGENT", lambda c, now: render.or_none(c.status.agent_version), wide=True
)


def test_one_entry_adds_a_column_to_the_headers_and_every_row() -> None:
    items = [cluster("east", labels={"zone": "a"}, created=ago(days=1)), cluster("west")]
    before = columns.table(clusters.COLUMNS, items, now=NOW)
    after = columns.table((*clusters.COLUMNS, ZONE), items, now=NOW)
    assert after.headers == (*before.headers, "ZONE")
    assert after.rows == tuple((*row, zone) for row, zone in zip(before.rows, ("a", "<none>"),
                                                                 strict=True))
    assert render.format_table(after).splitlines()[1].split()[-1] == "a"


def test_a_wide_entry_shows_with_wide_only_after_every_narrow_column() -> None:
    # Declared first, it still comes after the narrow ones: -o wide never reorders those.
    extended = (AGENT, *clusters.COLUMNS)
    item = cluster("east", agent_version="0.2.0")
    assert columns.headers(extended) == clusters.HEADERS
    assert columns.row(extended, item, now=NOW) == columns.row(clusters.COLUMNS, item, now=NOW)
    wide = columns.table(extended, [item], now=NOW, wide=True)
    assert wide.headers == (*clusters.HEADERS, "AGENT", "AGENT-VERSION", "LABELS")
    assert wide.rows[0][len(clusters.HEADERS)] == "0.2.0"


def test_a_watch_prints_the_same_columns() -> None:
    out = io.StringIO()
    ctx = Context(options=Options(command="clusters", watch=True), client=None,  # type: ignore[arg-type]
                  out=out, err=io.StringIO(), now=lambda: NOW)
    printer = WatchPrinter(ctx, columns.shape((*clusters.COLUMNS, ZONE), now=ctx.now))
    printer.batch([("ADDED", cluster("east", labels={"zone": "b"}))])
    header, line = (row.split() for row in out.getvalue().splitlines())
    assert header == ["EVENT", *clusters.HEADERS, "ZONE"]
    assert line[0] == "ADDED" and line[-1] == "b"


@pytest.mark.parametrize("command", [clusters, exports, imports, endpoints, conflicts])
def test_every_list_declares_its_headers_once(command: ModuleType) -> None:
    declared = command.COLUMNS
    headers = [c.header for c in declared]
    assert len(set(headers)) == len(headers)
    assert command.HEADERS == tuple(c.header for c in declared if not c.wide)


def test_a_command_prints_the_table_its_columns_make(monkeypatch: pytest.MonkeyPatch) -> None:
    """Through `mcsync clusters -o wide` against a fake hub: a column added to the command's
    list reaches the operator, in the header and in the row, with nothing else changed."""
    hub = FakeHub(clusters={"east": cluster("east", labels={"zone": "c"})})
    monkeypatch.setattr(clusters, "COLUMNS", (*clusters.COLUMNS, ZONE))
    lines = []
    for extra in ([], ["--no-headers"]):
        out, err = io.StringIO(), io.StringIO()
        code = main(["clusters", "-o", "wide", *extra],
                    environ={"MCSYNC_HUB_URL": HUB, "MCSYNC_TOKEN": "reader"},
                    transport=hub.transport(), out=out, err=err)
        assert (code, err.getvalue()) == (0, "")
        lines.append(out.getvalue().splitlines())
    (header, row), (bare,) = lines
    assert header.split() == [*clusters.HEADERS, "ZONE", "AGENT-VERSION", "LABELS"]
    assert row[header.index("ZONE"):].split()[0] == "c" and bare == row
