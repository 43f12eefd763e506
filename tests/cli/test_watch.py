"""The watch's filtered view: what an operator sees of the hub's events, and after a relist."""

from __future__ import annotations

import io
import json
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta

import httpx
import pytest

from cli.args import Options
from cli.client import HubClient, HubError, Unreachable
from cli.cmd import exports
from cli.commands import Context
from cli.commands import WatchPrinter as _WatchPrinter
from cli.watch import ExportFilter, ExportView, follow
from shared.models import to_wire
from tests.cli.fakehub import status
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
        ("ADDED", "south"),
        ("DELETED", "north"),
        ("MODIFIED", "west"),
    ]
    assert view.replace([kept, changed_now, added]) == []  # nothing new, nothing reported


def test_watch_table_keeps_its_columns_when_a_longer_event_type_follows() -> None:
    out, err = io.StringIO(), io.StringIO()
    options = Options(command="exports", watch=True)
    ctx = Context(
        options=options,
        client=None,  # type: ignore[arg-type]
        out=out,
        err=err,
        now=lambda: NOW,
    )
    printer = _WatchPrinter(ctx, exports.shape(ctx))
    printer.batch([("ADDED", export(cluster="east"))])
    printer.emit(("DELETED", export(cluster="east")))
    printer.emit(("MODIFIED", export(cluster="west")))
    lines = out.getvalue().splitlines()
    namespace_column = {line.index("demo") for line in lines[1:]}
    assert namespace_column == {lines[0].index("NAMESPACE")}, out.getvalue()


def test_conflict_watch_row_of_a_resolved_import() -> None:
    """A conflict that clears is shown as DELETED with the import as it now is, which has
    no conflicts left: its row must still be printable."""
    from cli.cmd.conflicts import WatchRows as _ConflictRows
    from tests.cli.samples import service_import

    out, err = io.StringIO(), io.StringIO()
    ctx = Context(
        options=Options(command="conflicts", watch=True),
        client=None,  # type: ignore[arg-type]
        out=out,
        err=err,
        now=lambda: NOW,
    )
    rows = _ConflictRows(ctx)
    rows.prime([conflicting(cluster="east"), conflicting(cluster="west")])  # type: ignore[list-item]
    printer = _WatchPrinter(ctx, rows.shape())
    printer.batch([("ADDED", service_import(conflicts=["PortConflict"], winner="east"))])
    printer.emit(("DELETED", service_import(conflicts=[], winner="east")))
    lines = [line.split() for line in out.getvalue().splitlines()]
    assert lines[0] == [
        "EVENT",
        "NAMESPACE",
        "NAME",
        "WINNER",
        "REASONS",
        "LOSING-CLUSTERS",
        "SINCE",
    ]
    assert lines[1][:6] == ["ADDED", "demo", "web", "east", "PortConflict", "west"]
    assert lines[2] == ["DELETED", "demo", "web", "east", "<none>", "<none>", "<none>"]


# -- reconnecting: `follow` through the CLI's real HubClient over a scripted transport ------

BOOKMARK: dict[str, object] = {
    "type": "BOOKMARK",
    "object": {
        "kind": "Bookmark",
        "apiVersion": "mcsync.io/v1alpha1",
        "metadata": {"resourceVersion": "60"},
    },
}


class FakeTime:
    """The watch's sleep and clock: sleeping moves the clock, nobody waits."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.sleeps: list[float] = []

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds

    def clock(self) -> float:
        return self.now


class ScriptedFeed:
    """Answers each watch request with the next scripted answer: an httpx.Response, or an
    exception (a refused connection); the spent script answers 401, which ends `follow`."""

    def __init__(self, answers: list[httpx.Response | Exception]) -> None:
        self.answers = answers
        self.revisions: list[str | None] = []

    def handle(self, request: httpx.Request) -> httpx.Response:
        self.revisions.append(request.url.params.get("resourceVersion"))
        answer = self.answers.pop(0) if self.answers else status(401, "Unauthorized", "bye")
        if isinstance(answer, Exception):
            raise answer
        return answer


def export_event(revision: str) -> dict[str, object]:
    return {"type": "ADDED", "object": to_wire(export(resource_version=revision))}


def feed(*lines: Mapping[str, object]) -> httpx.Response:
    body = "".join(json.dumps(line) + "\n" for line in lines)
    return httpx.Response(
        200, content=body.encode(), headers={"Content-Type": "application/x-ndjson"}
    )


def refused() -> Exception:
    return httpx.ConnectError("connection refused")


def run_follow(script: ScriptedFeed, time: FakeTime) -> tuple[list[str], list[str], HubError]:
    """Follow the scripted feed until it ends; answer (event types, warnings, final error)."""
    seen: list[str] = []
    warnings: list[str] = []
    client = HubClient(
        base_url="http://hub.test", token="t", transport=httpx.MockTransport(script.handle)
    )
    with client, pytest.raises(HubError) as info:
        follow(
            lambda rv: client.watch_exports(resource_version=rv),
            resource_version="41",
            on_event=lambda event: seen.append(event.type),
            resync=lambda: "41",
            warn=warnings.append,
            sleep=time.sleep,
            clock=time.clock,
        )
    return seen, warnings, info.value


def test_watch_waits_out_a_503_retry_after_given_as_an_http_date() -> None:
    later = datetime.now(UTC) + timedelta(seconds=20)
    busy = status(503, "ServiceUnavailable", "the database is unavailable")
    busy.headers["Retry-After"] = later.strftime("%a, %d %b %Y %H:%M:%S GMT")
    script = ScriptedFeed([busy, refused(), feed(export_event("50"), BOOKMARK)])
    time = FakeTime()
    seen, warnings, final = run_follow(script, time)
    assert seen == ["ADDED", "BOOKMARK"]
    assert final.code == 401
    assert 18.0 < time.sleeps[0] <= 20.0  # the hub's date, not our first second
    assert time.sleeps[1] <= 2.0  # a refused connection: our own backoff
    assert len(warnings) == 2 and "the database is unavailable" in warnings[0]
    # Each reconnect resumes where the feed stopped; after the stream, from its last event.
    assert script.revisions == ["41", "41", "41", "60"]


def test_watch_honours_retry_after_of_an_error_event_in_the_stream() -> None:
    unavailable: dict[str, object] = {
        "type": "ERROR",
        "object": {
            "kind": "Status",
            "apiVersion": "v1",
            "status": "Failure",
            "code": 503,
            "reason": "ServiceUnavailable",
            "message": "the database is unavailable",
            "details": {"retryAfterSeconds": 7},
        },
    }
    script = ScriptedFeed([feed(export_event("50"), unavailable), feed(BOOKMARK)])
    time = FakeTime()
    seen, _, _ = run_follow(script, time)
    assert seen == ["ADDED", "BOOKMARK"]
    assert time.sleeps[0] >= 7.0
    assert script.revisions[:2] == ["41", "50"]


def test_watch_survives_hub_restarts_shorter_than_a_minute_and_gives_up_on_a_longer_one() -> None:
    """Each outage is retried at jittered waits of at most 30 s; an event restarts the
    patience, so only a hub lost for a whole minute ends the watch."""
    outage = [refused()] * 6  # six failures in a row: at most 1+2+4+8+16 s of waits
    time = FakeTime()
    restarts = ScriptedFeed([*outage, feed(BOOKMARK), *outage, feed(BOOKMARK)])
    seen, _, final = run_follow(restarts, time)
    assert seen == ["BOOKMARK", "BOOKMARK"] and final.code == 401
    assert all(0.0 <= s <= 30.0 for s in time.sleeps)

    time = FakeTime()
    gone = ScriptedFeed([refused()] * 1000)
    _, warnings, final = run_follow(gone, time)
    assert isinstance(final, Unreachable)
    waited = sum(time.sleeps[:-1])  # the error came once the last wait was over
    assert waited < 60.0 <= sum(time.sleeps)
    assert len(warnings) == len(time.sleeps) and len(gone.answers) > 0
