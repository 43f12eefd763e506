"""The heartbeat's report of invalid ServiceExports (docs/reference.md#flags,
`member.export.invalidexports`): read back from the ServiceExports' own `Valid` condition,
sent when it changed since the last beat the hub answered, never before the caches are
filled, capped and counted."""

from __future__ import annotations

from typing import Any

import pytest

from member.export.invalidexports import InvalidExportsReporter, invalid_report
from shared import conditions as c
from shared.constants import INVALID_EXPORTS_MAX
from shared.models import InvalidExportReport


def service_export(
    name: str, namespace: str = "shop", *conditions: dict[str, Any]
) -> dict[str, Any]:
    obj: dict[str, Any] = {"metadata": {"name": name, "namespace": namespace}}
    if conditions:
        obj["status"] = {"conditions": list(conditions)}
    return obj


def valid(status: str, reason: str, message: str = "") -> dict[str, Any]:
    return {"type": c.VALID, "status": status, "reason": reason, "message": message}


READY = {"type": c.READY, "status": c.FALSE, "reason": c.REASON_PENDING}


@pytest.mark.parametrize(
    ("obj", "expected"),
    [
        (service_export("web"), None),  # not reconciled yet: no status
        (service_export("web", "shop", valid(c.TRUE, c.REASON_VALID)), None),
        (
            service_export("web", "shop", READY, valid(c.FALSE, c.REASON_NO_SERVICE, "No.")),
            InvalidExportReport(
                namespace="shop", name="web", reason=c.REASON_NO_SERVICE, message="No."
            ),
        ),
        (
            service_export("web", "kube-system", valid(c.FALSE, c.REASON_NAMESPACE_NOT_ALLOWED)),
            InvalidExportReport(
                namespace="kube-system", name="web", reason=c.REASON_NAMESPACE_NOT_ALLOWED
            ),
        ),
        # A long message is cut to what the hub takes; a reason no agent of ours writes
        # (not a condition reason) is not reported.
        (
            service_export("web", "shop", valid(c.FALSE, c.REASON_NO_SERVICE, "x" * 5000)),
            InvalidExportReport(
                namespace="shop", name="web", reason=c.REASON_NO_SERVICE, message="x" * 1024
            ),
        ),
        (service_export("web", "shop", valid(c.FALSE, "no such thing")), None),
        (service_export("web", "shop", valid("Unknown", "Checking")), None),
    ],
)
def test_invalid_report(obj: dict[str, Any], expected: InvalidExportReport | None) -> None:
    assert invalid_report(obj) == expected


def test_sent_once_per_change_and_not_before_the_caches_filled() -> None:
    cache: list[dict[str, Any]] = []
    synced = False
    reporter = InvalidExportsReporter(cached_exports=lambda: cache, synced=lambda: synced)

    assert reporter.pending() is None  # an empty cache is not "nothing is invalid"
    synced = True
    first = reporter.pending()
    assert first is not None and first.items == [] and first.total == 0  # clears an old run's
    assert reporter.pending() == first  # not answered yet: sent again
    reporter.answered(first)
    assert reporter.pending() is None

    cache.append(service_export("b", "shop", valid(c.FALSE, c.REASON_NO_SERVICE)))
    cache.append(service_export("a", "web", valid(c.FALSE, c.REASON_INVALID_SERVICE_TYPE)))
    cache.append(service_export("a", "shop", valid(c.TRUE, c.REASON_VALID)))
    second = reporter.pending()
    assert second is not None
    assert [(r.namespace, r.name) for r in second.items] == [("shop", "b"), ("web", "a")]
    reporter.answered(None)  # a beat that carried nothing changes nothing
    assert reporter.pending() == second
    reporter.answered(second)
    assert reporter.pending() is None


def test_at_most_the_cap_is_listed_and_all_are_counted() -> None:
    cache = [
        service_export(f"s{i:05d}", "shop", valid(c.FALSE, c.REASON_NO_SERVICE))
        for i in range(INVALID_EXPORTS_MAX + 5)
    ]
    report = InvalidExportsReporter(cached_exports=lambda: cache, synced=lambda: True).current()
    assert report.total == INVALID_EXPORTS_MAX + 5
    assert len(report.items) == INVALID_EXPORTS_MAX
    assert report.items[-1].name == f"s{INVALID_EXPORTS_MAX - 1:05d}"
