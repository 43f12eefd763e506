"""Per-kind defaulting and validation, the small part of each apiserver strategy we need.

Services get what a real apiserver fills in (type ClusterIP, an allocated clusterIP,
ipFamilies, internalTrafficPolicy, port protocol and targetPort, nodePorts for
NodePort/LoadBalancer), because the agent exports exactly those fields and must see them
as a real cluster would show them. An update that omits clusterIP or a nodePort keeps the
allocated one, and changing an allocated clusterIP is refused (immutable). Events need an
involvedObject; Leases need nothing. Failures are 422 Invalid with the field named.
"""

from __future__ import annotations

import ipaddress
import itertools
import re
from typing import Any

from tests.kube.emulator.errors import invalid
from tests.kube.emulator.resources import ResourceType

Obj = dict[str, Any]

SERVICE_TYPES = ("ClusterIP", "NodePort", "LoadBalancer", "ExternalName")
PROTOCOLS = ("TCP", "UDP", "SCTP")
_DNS1123_SUBDOMAIN = re.compile(
    r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
)
_DNS1035_LABEL = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
_DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


class Allocator:
    """Hands out cluster IPs from 10.96.0.0/12 and node ports from 30000-32767."""

    def __init__(self) -> None:
        self._ips = (
            str(ipaddress.IPv4Address(int(ipaddress.IPv4Address("10.96.0.10")) + i))
            for i in itertools.count()
        )
        self._ports = itertools.cycle(range(30000, 32768))

    def cluster_ip(self) -> str:
        return next(self._ips)

    def node_port(self) -> int:
        return next(self._ports)


def validate_name(rt: ResourceType, name: str) -> None:
    """Services need a DNS-1035 label; everything else a DNS-1123 subdomain."""
    if rt.plural == "services":
        ok = len(name) <= 63 and bool(_DNS1035_LABEL.match(name))
        rule = "a DNS-1035 label"
    else:
        ok = len(name) <= 253 and bool(_DNS1123_SUBDOMAIN.match(name))
        rule = "a lowercase RFC 1123 subdomain"
    if not ok:
        raise invalid(rt.kind, rt.group, name, "metadata.name",
                      f'Invalid value: "{name}": must be {rule}')


def validate_namespace(rt: ResourceType, name: str, namespace: str) -> None:
    if len(namespace) > 63 or not _DNS1123_LABEL.match(namespace):
        raise invalid(rt.kind, rt.group, name, "metadata.namespace",
                      f'Invalid value: "{namespace}": must be a lowercase RFC 1123 label')


def validate_metadata(rt: ResourceType, obj: Obj) -> None:
    """Labels and annotations are string maps, finalizers a list of strings."""
    meta = obj["metadata"]
    name = meta.get("name", "")
    for fld in ("labels", "annotations"):
        value = meta.get(fld)
        if value is not None and (
            not isinstance(value, dict)
            or not all(isinstance(k, str) and isinstance(v, str) for k, v in value.items())
        ):
            raise invalid(rt.kind, rt.group, name, f"metadata.{fld}",
                          "Invalid value: must be a map of strings to strings")
    finalizers = meta.get("finalizers")
    if finalizers is not None and (
        not isinstance(finalizers, list) or not all(isinstance(f, str) for f in finalizers)
    ):
        raise invalid(rt.kind, rt.group, name, "metadata.finalizers",
                      "Invalid value: must be a list of strings")


def _service_ports(rt: ResourceType, name: str, spec: Obj, old_spec: Obj | None,
                   allocator: Allocator) -> None:
    ports = spec.get("ports")
    if ports is None:
        return
    if not isinstance(ports, list):
        raise invalid(rt.kind, rt.group, name, "spec.ports", "Invalid value: must be a list")
    old_ports = {
        (p.get("port"), p.get("protocol", "TCP")): p
        for p in (old_spec or {}).get("ports") or [] if isinstance(p, dict)
    }
    wants_node_port = spec.get("type") in ("NodePort", "LoadBalancer")
    for i, port in enumerate(ports):
        where = f"spec.ports[{i}]"
        if not isinstance(port, dict):
            raise invalid(rt.kind, rt.group, name, where, "Invalid value: must be an object")
        number = port.get("port")
        if not isinstance(number, int) or isinstance(number, bool) or not 1 <= number <= 65535:
            raise invalid(rt.kind, rt.group, name, f"{where}.port",
                          f"Invalid value: {number!r}: must be between 1 and 65535, inclusive")
        port.setdefault("protocol", "TCP")
        if port["protocol"] not in PROTOCOLS:
            raise invalid(rt.kind, rt.group, name, f"{where}.protocol",
                          f'Unsupported value: "{port["protocol"]}": supported values: '
                          + ", ".join(f'"{p}"' for p in PROTOCOLS))
        if len(ports) > 1 and not port.get("name"):
            raise invalid(rt.kind, rt.group, name, f"{where}.name",
                          "Required value: when there are multiple ports")
        if spec.get("type") != "ExternalName":
            port.setdefault("targetPort", number)
        if wants_node_port:
            previous = old_ports.get((number, port["protocol"]), {})
            port.setdefault("nodePort", previous.get("nodePort") or allocator.node_port())
        else:
            port.pop("nodePort", None)


def default_service(rt: ResourceType, obj: Obj, old: Obj | None, allocator: Allocator) -> None:
    """Fill in what the apiserver defaults and allocates; validate what it would reject."""
    name = obj["metadata"].get("name", "")
    spec = obj.setdefault("spec", {})
    if not isinstance(spec, dict):
        raise invalid(rt.kind, rt.group, name, "spec", "Invalid value: must be an object")
    old_spec: Obj = (old or {}).get("spec") or {}
    spec.setdefault("type", "ClusterIP")
    if spec["type"] not in SERVICE_TYPES:
        raise invalid(rt.kind, rt.group, name, "spec.type",
                      f'Unsupported value: "{spec["type"]}": supported values: '
                      + ", ".join(f'"{t}"' for t in SERVICE_TYPES))
    spec.setdefault("sessionAffinity", "None")
    if spec["type"] == "ExternalName":
        if not spec.get("externalName"):
            raise invalid(rt.kind, rt.group, name, "spec.externalName", "Required value")
        for fld in ("clusterIP", "clusterIPs", "ipFamilies", "ipFamilyPolicy"):
            spec.pop(fld, None)
    else:
        old_ip = old_spec.get("clusterIP") if old_spec.get("type") != "ExternalName" else None
        if not spec.get("clusterIP") and old_ip:
            # An update that omits the allocated IP keeps it, as the apiserver does.
            spec["clusterIP"] = old_ip
        elif old_ip and spec.get("clusterIP") != old_ip:
            raise invalid(rt.kind, rt.group, name, "spec.clusterIPs[0]",
                          f'Invalid value: ["{spec.get("clusterIP")}"]: may not change once set')
        if not spec.get("clusterIP"):
            spec["clusterIP"] = allocator.cluster_ip()
        spec["clusterIPs"] = [spec["clusterIP"]]
        spec.setdefault("ipFamilies", ["IPv4"])
        spec.setdefault("ipFamilyPolicy", "SingleStack")
        spec.setdefault("internalTrafficPolicy", "Cluster")
        if spec["type"] in ("NodePort", "LoadBalancer"):
            spec.setdefault("externalTrafficPolicy", "Cluster")
    _service_ports(rt, name, spec, old_spec, allocator)
    if old is None:
        obj["status"] = {"loadBalancer": {}}


def validate_event(rt: ResourceType, obj: Obj) -> None:
    name = obj["metadata"].get("name", "")
    involved = obj.get("involvedObject")
    if not isinstance(involved, dict):
        raise invalid(rt.kind, rt.group, name, "involvedObject", "Required value")
    ns = involved.get("namespace")
    if ns and ns != obj["metadata"].get("namespace"):
        raise invalid(rt.kind, rt.group, name, "involvedObject.namespace",
                      f'Invalid value: "{ns}": does not match event.namespace')


def prepare(rt: ResourceType, obj: Obj, old: Obj | None, allocator: Allocator) -> None:
    """Default and validate `obj` of type `rt` (`old` is the stored object on update)."""
    validate_metadata(rt, obj)
    if rt.plural == "services":
        default_service(rt, obj, old, allocator)
    elif rt.plural == "events":
        validate_event(rt, obj)
    for fld in ("spec", "status"):
        if fld in obj and obj[fld] is not None and not isinstance(obj[fld], dict):
            raise invalid(rt.kind, rt.group, obj["metadata"].get("name", ""), fld,
                          "Invalid value: must be an object")


__all__ = ["Allocator", "prepare", "validate_name", "validate_namespace"]
