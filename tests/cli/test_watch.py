"""The watch's filtered view: what an operator sees of the hub's events, and after a relist."""

from __future__ import annotations

import io

from cli.args import Options
from cli.commands import Context, _shape_of, _WatchPrinter
from cli.watch import ExportFilter, ExportView
from tests.cli.samples import NOW, export


def conflicting(**kwargs: object) -> object:
    return export(conflict=("True", "PortConflict"), **kwargs)  # type: ignore[arg-type]


def test_unfiltered_view_reports_hub_events_as_they_are() -> None:
    view = ExportView(ExportFilter())
    first = export(resource_version="1")
    assert view.apply("ADDED", first) == ("ADDED", first)
    second = export(resource_version="2")
    assert view.apply("MODIFIED", second) == ("MODIFIED", second)
    assert view.apply("DELETED", second) == ("DELETED", second)
    assert view.apply("DELETED", second) is None  # already gone


def test_filtered_view_turns_leaving_into_deleted_and_entering_into_added() -> None:
    view = ExportView(ExportFilter(conflict=True))
    clean = export(resource_version="1")
    assert view.apply("ADDED", clean) is None
    clash = export(conflict=("True", "PortConflict"), resource_version="2")
    assert view.apply("MODIFIED", clash) == ("ADDED", clash)
    resolved = export(resource_version="3")
    assert view.apply("MODIFIED", resolved) == ("DELETED", resolved)


def test_namespace_and_name_filters() -> None:
    view = ExportView(ExportFilter(namespace="demo", name="web"))
    assert view.apply("ADDED", export(namespace="shop")) is None
    assert view.apply("ADDED", export(name="api")) is None
    assert view.apply("ADDED", export()) is not None


def test_relist_reports_the_difference() -> None:
    view = ExportView(ExportFilter())
    kept = export(cluster="east", resource_version="1")
    changed = export(cluster="west", resource_version="2")
    dropped = export(cluster="north", resource_version="3")
    assert [t for t, _ in view.replace([kept, changed, dropped])] == ["ADDED"] * 3
    changed_now = export(cluster="west", resource_version="5")
    added = export(cluster="south", resource_version="6")
    changes = view.replace([kept, changed_now, added])
    assert sorted((t, e.spec.service_reference.cluster_id) for t, e in changes) == [
        ("ADDED", "south"), ("DELETED", "north"), ("MODIFIED", "west"),
    ]
    assert view.replace([kept, changed_now, added]) == []  # nothing new, nothing reported


def test_watch_table_keeps_its_columns_when_a_longer_event_type_follows() -> None:
    out, err = io.StringIO(), io.StringIO()
    options = Options(command="exports", watch=True)
    ctx = Context(options=options, client=None, out=out, err=err,  # type: ignore[arg-type]
                  now=lambda: NOW)
    printer = _WatchPrinter(ctx, _shape_of(ctx, "exports"))
    printer.batch([("ADDED", export(cluster="east"))])
    printer.emit(("DELETED", export(cluster="east")))
    printer.emit(("MODIFIED", export(cluster="west")))
    lines = out.getvalue().splitlines()
    namespace_column = {line.index("demo") for line in lines[1:]}
    assert namespace_column == {lines[0].index("NAMESPACE")}, out.getvalue()


def test_conflict_watch_row_of_a_resolved_import() -> None:
    """A conflict that clears is shown as DELETED with the import as it now is, which has
    no conflicts left: its row must still be printable."""
    from cli.commands import _ConflictRows
    from tests.cli.samples import service_import

    out, err = io.StringIO(), io.StringIO()
    ctx = Context(options=Options(command="conflicts", watch=True), client=None,  # type: ignore[arg-type]
                  out=out, err=err, now=lambda: NOW)
    rows = _ConflictRows(ctx)
    rows.prime([conflicting(cluster="east"), conflicting(cluster="west")])  # type: ignore[list-item]
    printer = _WatchPrinter(ctx, rows.shape())
    printer.batch([("ADDED", service_import(conflicts=["PortConflict"], winner="east"))])
    printer.emit(("DELETED", service_import(conflicts=[], winner="east")))
    lines = [line.split() for line in out.getvalue().splitlines()]
    assert lines[0] == ["EVENT", "NAMESPACE", "NAME", "WINNER", "REASONS", "LOSING-CLUSTERS",
                        "SINCE"]
    assert lines[1][:6] == ["ADDED", "demo", "web", "east", "PortConflict", "west"]
    assert lines[2] == ["DELETED", "demo", "web", "east", "<none>", "<none>", "<none>"]
