"""One reconcile pass, instrumented alike for every controller (docs/reference.md#observability).

Each controller (ServiceExport, EndpointSlice, the three import ones) runs a key's pass
inside the same frame: a span named for the controller with the key and the outcome, the
`reconciles` counter by controller and outcome, `reconcile_errors` when the pass raises,
and the pass's duration. A pass that raises is `error` — unless the replica lost its Lease
mid-pass (`NotLeading`), which is `not_leading`: abandoned, not failed. The exception still
propagates, so the work queue retries the key with backoff. Written once here, so that a
dashboard reads every controller the same way.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping

from opentelemetry import trace

from member.metrics import AgentMetrics

__all__ = [
    "OUTCOME_ERROR",
    "OUTCOME_NOT_LEADING",
    "NotLeading",
    "declare_series",
    "run_reconcile",
]

OUTCOME_ERROR = "error"  # raised: the key is retried with backoff
OUTCOME_NOT_LEADING = "not_leading"  # abandoned: this replica lost its Lease


class NotLeading(Exception):
    """This replica may not write any more (it lost its Lease): abandon the reconcile."""


def declare_series(metrics: AgentMetrics, controller: str, outcomes: Iterable[str]) -> None:
    """Every series of `controller` exists from start at 0 (docs/reference.md#observability), so the
    first error is an increase that `rate()` and `increase()` see."""
    for outcome in outcomes:
        metrics.reconciles.labels(controller, outcome)
    metrics.reconcile_errors.labels(controller)
    metrics.reconcile_duration.labels(controller)


def run_reconcile(
    reconcile: Callable[[], str],
    *,
    tracer: trace.Tracer,
    metrics: AgentMetrics,
    controller: str,
    span_name: str,
    attributes: Mapping[str, str],
    succeeded: Callable[[str], None] | None = None,
    finished: Callable[[str], None] | None = None,
) -> str:
    """Run one pass (`reconcile`, answering its outcome) in the controllers' frame.

    `succeeded(outcome)` runs after a pass that returned, still inside the frame (what it
    raises counts as the pass's error); `finished(outcome)` runs whatever the pass did,
    before the outcome is recorded.
    """
    started = time.monotonic()
    outcome = OUTCOME_ERROR
    with tracer.start_as_current_span(
        span_name,
        attributes=attributes,
        record_exception=False,
        set_status_on_exception=False,
    ) as span:
        try:
            outcome = reconcile()
            if succeeded is not None:
                succeeded(outcome)
        except NotLeading:
            outcome = OUTCOME_NOT_LEADING
            raise
        except Exception as exc:
            metrics.reconcile_errors.labels(controller).inc()
            span.record_exception(exc)
            span.set_status(trace.Status(trace.StatusCode.ERROR, str(exc)))
            raise
        finally:
            if finished is not None:
                finished(outcome)
            span.set_attribute("mcsync.outcome", outcome)
            metrics.reconciles.labels(controller, outcome).inc()
            metrics.reconcile_duration.labels(controller).observe(time.monotonic() - started)
    return outcome
