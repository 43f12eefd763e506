"""A stand-in for kube-controller-manager's EndpointSlice controller, for demo fleets.

An emulated cluster runs no pods, so without this a Service has no endpoints and a demo
fleet (`mcsync sandbox`) would import ServiceImports with nothing behind them. With it
switched on (`EmulatorState(endpoint_cidr=...)`; off by default, so tests see only the
slices they write), every Service with a selector gets one EndpointSlice as the real
controller would write it — label `kubernetes.io/service-name`, managed by
`endpointslice-controller.k8s.io`, owned by the Service — holding `replicas` ready
endpoints whose addresses come from the configured range: fake pod IPs, stable for the
Service's life. Ports are the Service's target ports (a named target port, which only a
pod could resolve, keeps the Service port's number).

Like the garbage collector (`collector.py`), a store listener only queues the Service's
key under the store lock and one daemon thread reconciles it, writing the slice only
when it differs from what is stored (the real controller's habit). A Service that loses
its selector, turns ExternalName or is IPv6-only loses the slice; a deleted Service's
slice goes with it through its ownerReference.
"""

from __future__ import annotations

import hashlib
import ipaddress
import queue
import threading
from typing import Any

from sandbox.emulator.errors import KubeError
from sandbox.emulator.registry import Registry
from sandbox.emulator.resources import ENDPOINT_SLICES, SERVICES
from sandbox.emulator.store import Obj, StoredEvent
from shared.constants import LABEL_ENDPOINTSLICE_MANAGED_BY, LABEL_SERVICE_NAME

CONTROLLER_NAME = "endpointslice-controller.k8s.io"
_STOP = ("", "")


class EndpointSliceController:
    """Gives every selecting Service of one emulated cluster `replicas` fake endpoints."""

    def __init__(self, registry: Registry, *, cidr: str, replicas: int = 2) -> None:
        network = ipaddress.ip_network(cidr)
        if network.version != 4 or network.num_addresses < 4:
            raise ValueError(f"endpoint range {cidr!r}: an IPv4 network of at least 4 "
                             "addresses is needed")
        if replicas < 1:
            raise ValueError("replicas must be at least 1")
        self.registry = registry
        self.store = registry.store
        self.replicas = replicas
        self._hosts = [str(ip) for ip in network.hosts()]
        self._next = 0
        self._given: dict[tuple[str, str], list[str]] = {}  # Service key -> its pod IPs
        self._taken: set[str] = set()
        self._work: queue.Queue[tuple[str, str]] = queue.Queue()
        self.store.add_listener(self._observe)
        self._thread = threading.Thread(target=self._run, name="kube-emulator-endpoints",
                                        daemon=True)
        self._thread.start()

    # -- listener (under the store lock: queue only) ----------------------------------------

    def _observe(self, event: StoredEvent) -> None:
        meta = event.obj.get("metadata") or {}
        if event.storage_key == SERVICES.storage_key:
            self._work.put((meta.get("namespace") or "", meta.get("name") or ""))
        elif (event.storage_key == ENDPOINT_SLICES.storage_key and event.type == "DELETED"
              and (meta.get("labels") or {}).get(LABEL_ENDPOINTSLICE_MANAGED_BY)
              == CONTROLLER_NAME):
            # Someone deleted a slice of ours: the real controller writes it again.
            service = (meta.get("labels") or {}).get(LABEL_SERVICE_NAME)
            if service:
                self._work.put((meta.get("namespace") or "", service))

    # -- worker ----------------------------------------------------------------------------

    def _run(self) -> None:
        while True:
            key = self._work.get()
            if key == _STOP:
                return
            try:
                self._reconcile(*key)
            except KubeError:
                pass  # changed meanwhile (namespace going, object gone): its event requeues

    def _reconcile(self, namespace: str, name: str) -> None:
        with self.store.transaction():
            service = self.store.get((SERVICES.storage_key, namespace, name))
            slice_name = f"{name}-{hashlib.sha256(name.encode()).hexdigest()[:5]}"
            existing = self.store.get((ENDPOINT_SLICES.storage_key, namespace, slice_name))
            desired = self._desired(service, slice_name) if service else None
            if desired is None:  # its fake pods are gone: their addresses may serve again
                self._taken.difference_update(self._given.pop((namespace, name), []))
                if existing is not None and _ours(existing):
                    self.registry.delete(ENDPOINT_SLICES, namespace, slice_name)
                return
            if existing is None:
                self.registry.create(ENDPOINT_SLICES, namespace, desired)
            elif _ours(existing) and any(existing.get(f) != desired.get(f)
                                         for f in ("endpoints", "ports", "addressType")):
                desired["metadata"]["resourceVersion"] = existing["metadata"]["resourceVersion"]
                self.registry.update(ENDPOINT_SLICES, namespace, slice_name, desired)

    def _desired(self, service: Obj, slice_name: str) -> Obj | None:
        meta, spec = service["metadata"], service.get("spec") or {}
        if (not spec.get("selector") or spec.get("type") == "ExternalName"
                or meta.get("deletionTimestamp")
                or (spec.get("ipFamilies") or ["IPv4"])[0] != "IPv4"):
            return None
        addresses = self._addresses((meta["namespace"], meta["name"]))
        return {
            "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
            "metadata": {
                "name": slice_name, "namespace": meta["namespace"],
                "labels": {LABEL_SERVICE_NAME: meta["name"],
                           LABEL_ENDPOINTSLICE_MANAGED_BY: CONTROLLER_NAME},
                "ownerReferences": [{"apiVersion": "v1", "kind": "Service",
                                     "name": meta["name"], "uid": meta["uid"],
                                     "controller": True, "blockOwnerDeletion": True}],
            },
            "addressType": "IPv4",
            "endpoints": [{"addresses": [ip], "conditions": {
                "ready": True, "serving": True, "terminating": False}} for ip in addresses],
            "ports": [_slice_port(p) for p in spec.get("ports") or []],
        }

    def _addresses(self, key: tuple[str, str]) -> list[str]:
        """The Service's fake pod IPs: handed out once, in order through the range."""
        given = self._given.get(key)
        if given is None:
            given = []
            for _ in range(len(self._hosts)):
                if len(given) == self.replicas:
                    break
                ip = self._hosts[self._next % len(self._hosts)]
                self._next += 1
                if ip not in self._taken:
                    given.append(ip)
                    self._taken.add(ip)
            self._given[key] = given  # a full range gives fewer endpoints, never a duplicate
        return given

    def stop(self) -> None:
        self._work.put(_STOP)
        self._thread.join(5)


def _ours(obj: Obj) -> bool:
    labels = (obj.get("metadata") or {}).get("labels") or {}
    return bool(labels.get(LABEL_ENDPOINTSLICE_MANAGED_BY) == CONTROLLER_NAME)


def _slice_port(port: dict[str, Any]) -> dict[str, Any]:
    target = port.get("targetPort")
    out: dict[str, Any] = {
        "name": port.get("name") or "",
        "port": target if isinstance(target, int) else port.get("port"),
        "protocol": port.get("protocol") or "TCP",
    }
    if port.get("appProtocol"):
        out["appProtocol"] = port["appProtocol"]
    return out
