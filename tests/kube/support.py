"""Small helpers shared by the emulator's own tests: object builders, polling, watches."""

from __future__ import annotations

import json
import queue
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

from kubernetes import client, watch
from kubernetes.client.exceptions import ApiException

from shared.constants import MCS_GROUP
from tests.kube.fixtures import KubeCluster

T = TypeVar("T")


def service(name: str, *, labels: dict[str, str] | None = None, port: int = 80,
            **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name, **({"labels": labels} if labels else {})},
        "spec": {"ports": [{"name": "http", "port": port}], **spec},
    }


def service_export(name: str, *, version: str = "v1beta1",
                   labels: dict[str, str] | None = None,
                   finalizers: list[str] | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if labels:
        meta["labels"] = labels
    if finalizers:
        meta["finalizers"] = finalizers
    return {"apiVersion": f"{MCS_GROUP}/{version}", "kind": "ServiceExport", "metadata": meta}


def wait_for(condition: Callable[[], T | None], *, timeout: float = 15.0,
             interval: float = 0.02, what: str = "condition") -> T:
    """Poll until `condition()` is truthy and answer it; fail after a generous deadline."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(interval)


# The official client's pydantic models type every field Optional; tests read fields the
# server always sets, so the API handles are typed Any instead of asserting each one.
def core_api(cluster: KubeCluster) -> Any:
    return client.CoreV1Api(cluster.api_client())


def custom_api(cluster: KubeCluster) -> Any:
    return client.CustomObjectsApi(cluster.api_client())


def coordination_api(cluster: KubeCluster) -> Any:
    return client.CoordinationV1Api(cluster.api_client())


def failure(exc: ApiException) -> dict[str, Any]:
    """The Kubernetes Status object an ApiException carries."""
    status: dict[str, Any] = json.loads(exc.body or "{}")
    return status


class BackgroundWatch:
    """Runs `Watch().stream(...)` in a thread and queues every event (or the exception)."""

    def __init__(self, func: Callable[..., Any], *args: Any, **kwargs: Any) -> None:
        self.watch = watch.Watch()
        self.events: queue.Queue[dict[str, Any] | BaseException] = queue.Queue()
        self._thread = threading.Thread(target=self._run, args=(func, args, kwargs),
                                        daemon=True)
        self._thread.start()

    def _run(self, func: Callable[..., Any], args: Any, kwargs: Any) -> None:
        try:
            for event in self.watch.stream(func, *args, **kwargs):
                self.events.put(event)
        except BaseException as exc:  # handed to the test thread
            self.events.put(exc)

    def next(self, timeout: float = 15.0) -> dict[str, Any]:
        item = self.events.get(timeout=timeout)
        if isinstance(item, BaseException):
            raise item
        return item

    def take(self, n: int) -> list[dict[str, Any]]:
        return [self.next() for _ in range(n)]

    def stop(self) -> None:
        self.watch.stop()
        self._thread.join(10)
