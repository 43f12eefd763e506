"""A source slice the hub refuses is reported where its owner looks (docs/reference.md#import-path):
one Warning Event on its ServiceExport naming the slice and the reason, once per refusal
(not once per retry), and the Service's other slices are exported all the same. One row per
kind of refusal, against the fakes of `test_sliceexport`.
"""

from __future__ import annotations

from typing import Any

import pytest

from member.export.serviceexport import ExportParts
from member.export.sliceexport import REASON_REJECTED, SliceExportReconciler
from member.hubclient import HubRejected
from shared.models import EndpointSliceExport
from tests.member.test_sliceexport import KEY, FakeHub, World, endpointslice


class Events:
    def __init__(self) -> None:
        self.recorded: list[tuple[str, str, str, str]] = []  # (object, type, reason, message)

    def record(self, obj: dict[str, Any], *, type: str, reason: str, message: str) -> None:
        self.recorded.append((obj["metadata"]["name"], type, reason, message))


class RefusingHub(FakeHub):
    """The hub, refusing the slices named in `refuse` with their code."""

    def __init__(self) -> None:
        super().__init__()
        self.refuse: dict[str, int] = {}

    def put_endpointslice(self, export: EndpointSliceExport) -> EndpointSliceExport:
        code = self.refuse.get(export.metadata.name)
        if code is not None:
            self.calls.append(("PUT", f"shop/{export.metadata.name}", ""))
            message = f"limit or rule {code} refuses it"
            raise HubRejected(code=code, reason="Refused", message=message, route="slice")
        return super().put_endpointslice(export)


def _world() -> tuple[World, Events]:
    world = World(hub=RefusingHub())
    events = Events()
    world.reconciler = SliceExportReconciler(
        ExportParts(
            cluster_id="member-1",
            service_exports=world.exports,
            services=world.services,
            gate=world.gate,
            deny_namespaces=frozenset({"kube-system"}),
            metrics=world.metrics,
        ),
        slices=world.index,
        hub_view=world,
        hub=world.hub,
        sent=world.sent,
        events=events,  # type: ignore[arg-type]
    )
    world.reconciler.repair()
    world.export()
    return world, events


def _reconcile(world: World, *, raises: bool) -> None:
    if raises:
        with pytest.raises(HubRejected):
            world.reconciler.reconcile(KEY)
    else:
        world.reconciler.reconcile(KEY)


@pytest.mark.parametrize(
    ("code", "retried", "then"),
    [
        pytest.param(422, False, "not sent again until it changes", id="422: final"),
        pytest.param(413, False, "not sent again until it changes", id="413: final"),
        pytest.param(403, True, "retried with backoff", id="403 (a quota, a scope): retried"),
    ],
)
def test_a_refused_slice_is_one_warning_event_on_its_service_export(
    code: int, retried: bool, then: str
) -> None:
    world, events = _world()
    world.put_slice(endpointslice("web-aaa", ip="10.0.0.1"))  # sorts first
    world.put_slice(endpointslice("web-bbb", ip="10.0.0.2"))
    world.hub.refuse["web-aaa"] = code  # type: ignore[attr-defined]

    _reconcile(world, raises=retried)
    assert "shop/web-bbb" in world.hub.stored  # the other slice is exported all the same
    assert events.recorded == [
        (
            "web",
            "Warning",
            REASON_REJECTED,
            f"EndpointSlice web-aaa was not exported: the hub answered {code} Refused: "
            f"limit or rule {code} refuses it; {then}",
        )
    ]
    _reconcile(world, raises=retried)  # the retry (or an unrelated reconcile)
    assert len(events.recorded) == 1  # once per refusal, not per retry

    # The slice changes and is refused again: a new refusal, a new Event.
    world.put_slice(endpointslice("web-aaa", rv="2", ip="10.0.0.3"))
    _reconcile(world, raises=retried)
    assert len(events.recorded) == 2
    # Taken at last (a final refusal waits for the slice's next change): nothing to report.
    del world.hub.refuse["web-aaa"]  # type: ignore[attr-defined]
    world.put_slice(endpointslice("web-aaa", rv="3", ip="10.0.0.4"))
    world.reconciler.reconcile(KEY)
    assert "shop/web-aaa" in world.hub.stored and len(events.recorded) == 2


def test_a_slice_that_cannot_be_put_on_the_wire_is_reported_too() -> None:
    world, events = _world()
    bad = endpointslice("web-abc")
    bad["endpoints"][0]["addresses"] = ["10.0.0.01"]  # not canonical: refused before sending
    world.put_slice(bad)
    world.reconciler.reconcile(KEY)
    world.reconciler.reconcile(KEY)
    assert world.hub.calls == []
    [(name, type_, reason, message)] = events.recorded
    assert (name, type_, reason) == ("web", "Warning", REASON_REJECTED)
    assert message.startswith("EndpointSlice web-abc was not exported: ")
    assert "10.0.0.01" in message or "address" in message
