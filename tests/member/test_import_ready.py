"""The ServiceImport's `Ready` condition (docs/reference.md#import-path,
`member.imports.importready`): one row per outcome of `ready_condition`, then the
reconcilers over the fake cluster of `test_import_reconcilers` — each transition written
once, nothing rewritten after."""

from __future__ import annotations

import json
from typing import Any

import pytest
from kubernetes.client.exceptions import ApiException

from member.imports.importready import (
    MESSAGE_PENDING,
    MESSAGE_READY,
    FamilyRefusals,
    family_refusal,
    ready_condition,
)
from member.imports.importspec import derived_service_name, mirrored_slice_name
from tests.member.test_import_reconcilers import KEY, World, hub_import, hub_slice

DERIVED = derived_service_name("hello")


@pytest.fixture
def world() -> World:
    return World()


REFUSAL = ('Service "mcsync-x" is invalid: spec.ipFamilyPolicy: Invalid value: '
           '"RequireDualStack": this cluster is not configured for dual-stack services')


def _status(reason: str, status: str = "False") -> dict[str, Any]:
    return {"conditions": [{"type": "Ready", "status": status, "reason": reason,
                            "message": "m", "lastTransitionTime": "2026-01-01T00:00:00Z"}]}


NEVER = object()

# (existing status, headless, ips ready, slices written, refusal) → (status, reason)
CASES: list[tuple[str, dict[str, Any] | None, bool, bool, Any, tuple[bool, str | None],
                  tuple[str, str]]] = [
    ("nothing yet", None, False, False, False, (False, None), ("False", "Pending")),
    ("IPs, slices missing", None, False, True, False, (True, None), ("False", "Pending")),
    ("IPs and slices", None, False, True, True, (True, None), ("True", "Ready")),
    ("headless: the Service and slices", None, True, True, True, (True, None),
     ("True", "Ready")),
    ("refused", None, False, False, False, (True, REFUSAL),
     ("False", "IPFamilyNotSupported")),
    ("refused before a restart, not known yet", _status("IPFamilyNotSupported"), False, False,
     False, (False, None), ("False", "IPFamilyNotSupported")),
    ("refusal lifted", _status("IPFamilyNotSupported"), False, True, True, (True, None),
     ("True", "Ready")),
    ("Ready stays Ready: slices are not asked again", _status("Ready", "True"), False, True,
     NEVER, (True, None), ("True", "Ready")),
    ("Ready, the IPs gone", _status("Ready", "True"), False, False, NEVER, (True, None),
     ("False", "Pending")),
]


@pytest.mark.parametrize(("existing", "headless", "ips", "slices", "refusal", "outcome"),
                         [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_ready_condition(existing: dict[str, Any] | None, headless: bool, ips: bool,
                         slices: Any, refusal: tuple[bool, str | None],
                         outcome: tuple[str, str]) -> None:
    def slices_written() -> bool:
        assert slices is not NEVER, "asked about slices while Ready"
        return bool(slices)

    condition = ready_condition(existing=existing, headless=headless, ips_ready=ips,
                                slices_written=slices_written, refusal=refusal,
                                families=["IPv4", "IPv6"])
    assert (condition["status"], condition["reason"]) == outcome
    assert "lastTransitionTime" not in condition  # merge_conditions keeps or sets it
    if outcome[1] == "IPFamilyNotSupported" and refusal[1]:
        assert condition["message"] == (
            f"this cluster cannot serve the import's IP families (IPv4, IPv6): {REFUSAL}")


@pytest.mark.parametrize(("exc", "found"), [
    (ApiException(status=422), None),
    (ValueError("no"), None),
])
def test_family_refusal_needs_a_422_about_families(exc: Exception, found: str | None) -> None:
    assert family_refusal(exc) is found


def refused() -> ApiException:
    exc = ApiException(status=422, reason="Unprocessable Entity")
    exc.body = json.dumps({"kind": "Status", "message": REFUSAL})
    return exc


def ready_of(world: World) -> dict[str, Any]:
    si = world.imports.get(KEY)
    assert si is not None
    (condition,) = si["status"]["conditions"]
    return dict(condition)


def test_family_refusal_reads_the_status_message() -> None:
    assert family_refusal(refused()) == REFUSAL


def test_pending_until_the_slices_are_written_then_ready_once(world: World) -> None:
    world.feed(hub_import(ipFamilies=["IPv4"]))
    world.feed(hub_slice("hello-1", "10.0.0.1"))
    blocked = mirrored_slice_name("hello", "a", "hello-1")
    slices_writer = world.eps._writer  # the fake writer: its refusal switch
    slices_writer.refuse[blocked] = RuntimeError("the API server is away")  # type: ignore[attr-defined]
    with pytest.raises(Exception, match="mirrored EndpointSlice"):
        world.converge()
    pending = ready_of(world)
    assert (pending["status"], pending["reason"], pending["message"]) == (
        "False", "Pending", MESSAGE_PENDING)
    assert world.imports.get(KEY)["spec"]["ips"]  # type: ignore[index]  # IPs alone: not Ready
    del slices_writer.refuse[blocked]  # type: ignore[attr-defined]
    writes = world.converge()
    assert sorted(writes) == [("EndpointSlice", "create"), ("ServiceImport", "status")]
    ready = ready_of(world)
    assert (ready["status"], ready["reason"], ready["message"]) == ("True", "Ready",
                                                                   MESSAGE_READY)
    # One more source slice, and one gone: endpoint churn, not the import's readiness.
    world.feed(hub_slice("hello-2", "10.0.0.2", cluster="b"))
    assert world.converge() == [("EndpointSlice", "create")]
    assert ready_of(world) == ready


def test_ip_family_not_supported_then_ready_when_the_cluster_accepts(world: World) -> None:
    world.feed(hub_import(ipFamilies=["IPv4", "IPv6"]))
    world.feed(hub_slice("hello-1", "10.0.0.1"))
    services = world.svc._writer  # the fake writer: its refusal switch
    services.refuse[DERIVED] = refused()  # type: ignore[attr-defined]
    for _ in range(2):
        with pytest.raises(ApiException):
            world.converge()
    condition = ready_of(world)
    assert (condition["status"], condition["reason"]) == ("False", "IPFamilyNotSupported")
    assert REFUSAL in condition["message"] and "(IPv4, IPv6)" in condition["message"]
    since = condition["lastTransitionTime"]
    # Refused again and again: the condition is not rewritten.
    statuses = [w for w in world.calls if w == ("ServiceImport", "status")]
    with pytest.raises(ApiException):
        world.converge()
    assert [w for w in world.calls if w == ("ServiceImport", "status")] == statuses
    del services.refuse[DERIVED]  # type: ignore[attr-defined]
    world.converge()
    ready = ready_of(world)
    assert (ready["status"], ready["reason"]) == ("True", "Ready")
    assert ready["lastTransitionTime"] >= since
    assert world.converge() == []


def test_refusals_tell_only_changes() -> None:
    told: list[str] = []
    refusals = FamilyRefusals(on_change=told.append)
    assert refusals.verdict(KEY) == (False, None)
    refusals.refused(KEY, REFUSAL)
    refusals.refused(KEY, REFUSAL)
    refusals.accepted(KEY)
    refusals.accepted(KEY)
    assert told == [KEY, KEY]
    assert refusals.verdict(KEY) == (True, None)
    refusals.forget(KEY)
    assert refusals.verdict(KEY) == (False, None)
