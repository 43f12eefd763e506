"""Per-kind defaulting and validation, the small part of each apiserver strategy we need.

Services get what a real apiserver fills in (type ClusterIP, cluster IPs allocated per
`ipFamilies` by `allocator`, ipFamilyPolicy, internalTrafficPolicy, port protocol and
targetPort, nodePorts for NodePort/LoadBalancer), because the agent exports exactly those
fields and must see them as a real cluster would show them. An update that omits clusterIP
or a nodePort keeps the allocated one, and changing an allocated clusterIP is refused
(immutable). Namespaces get their `kubernetes` finalizer, phase and name label.
EndpointSlices are checked as the apiserver checks them (addressType one of IPv4, IPv6,
FQDN and immutable, addresses valid for it, at most 1,000 endpoints and 100 ports). Events
need an involvedObject; Leases need nothing. Failures are 422 Invalid with the field named.
"""

from __future__ import annotations

import copy
import json
import re
from typing import Any

from sandbox.emulator.allocator import FAMILIES, AllocationError, Allocator, family_of
from sandbox.emulator.errors import invalid
from sandbox.emulator.resources import ResourceType

Obj = dict[str, Any]

SERVICE_TYPES = ("ClusterIP", "NodePort", "LoadBalancer", "ExternalName")
PROTOCOLS = ("TCP", "UDP", "SCTP")
_DNS1123_SUBDOMAIN = re.compile(
    r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
)
_DNS1035_LABEL = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
_DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


def validate_name(rt: ResourceType, name: str) -> None:
    """Services need a DNS-1035 label, Namespaces a DNS-1123 label, the rest a subdomain."""
    if rt.plural == "services":
        ok = len(name) <= 63 and bool(_DNS1035_LABEL.match(name))
        rule = "a DNS-1035 label"
    elif rt.plural == "namespaces":
        ok = len(name) <= 63 and bool(_DNS1123_LABEL.match(name))
        rule = "a lowercase RFC 1123 label"
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


POLICIES = ("SingleStack", "PreferDualStack", "RequireDualStack")


def _cluster_ips(rt: ResourceType, name: str, spec: Obj, old_spec: Obj,
                 allocator: Allocator) -> None:
    """`ipFamilyPolicy`, `ipFamilies`, `clusterIPs` and `clusterIP` as the apiserver sets them.

    Policy defaults to SingleStack, families to the cluster's primary (or to the given IPs'
    families); RequireDualStack/PreferDualStack get both families. A family the cluster
    does not serve, or RequireDualStack on a single-stack cluster, is refused (422). One
    address per family, in `ipFamilies` order; `clusterIP` is the first. `None` (headless)
    allocates nothing. On update, omitted fields keep their stored values and the primary
    address and family may not change; a policy change adds or drops the secondary family.
    """
    def bad(field: str, detail: str) -> Exception:
        return invalid(rt.kind, rt.group, name, field, detail)

    old_ips: list[str] = list(old_spec.get("clusterIPs") or
                              ([old_spec["clusterIP"]] if old_spec.get("clusterIP") else []))
    ips = spec.get("clusterIPs")
    if ips is not None and (not isinstance(ips, list)
                            or not all(isinstance(ip, str) for ip in ips)):
        raise bad("spec.clusterIPs", "Invalid value: must be a list of strings")
    ips = [ip for ip in ips or [] if ip]
    primary = spec.get("clusterIP") or ""
    if primary and ips and ips[0] != primary:
        raise bad("spec.clusterIPs[0]", f'Invalid value: "{ips[0]}": must be same as clusterIP')
    if primary and not ips:
        ips = [primary]
    if (not ips and old_ips) or (len(ips) == 1 and ips == old_ips[:1]):
        ips = list(old_ips)  # an update that omits the allocated IPs keeps them
    if old_ips and ips[:1] != old_ips[:1]:
        raise bad("spec.clusterIPs[0]",
                  f'Invalid value: {ips[:1]!r}: may not change once set'.replace("'", '"'))
    headless = ips[:1] == ["None"]
    if headless and len(ips) > 1:
        raise bad("spec.clusterIPs[1]", 'Invalid value: "None": must be empty when the first '
                  'clusterIP is "None"')
    policy = spec.get("ipFamilyPolicy") or old_spec.get("ipFamilyPolicy") or None
    if policy is not None and policy not in POLICIES:
        raise bad("spec.ipFamilyPolicy", f'Unsupported value: "{policy}": supported values: '
                  + ", ".join(f'"{p}"' for p in POLICIES))
    families = spec.get("ipFamilies")
    if families is not None and (not isinstance(families, list)
                                 or not all(isinstance(f, str) for f in families)):
        raise bad("spec.ipFamilies", "Invalid value: must be a list of strings")
    families = list(families or old_spec.get("ipFamilies") or [])
    for i, family in enumerate(families):
        if family not in FAMILIES:
            raise bad(f"spec.ipFamilies[{i}]", f'Unsupported value: "{family}": supported '
                      'values: "IPv4", "IPv6"')
    if len(set(families)) != len(families) or len(families) > 2:
        raise bad("spec.ipFamilies", f"Invalid value: {families!r}: must not have duplicate "
                  "families and at most two".replace("'", '"'))
    old_families = list(old_spec.get("ipFamilies") or [])
    if old_families and families and families[0] != old_families[0] and not headless:
        raise bad("spec.ipFamilies[0]", f'Invalid value: "{families[0]}": may not change once '
                  "set")
    if not headless:
        for i, ip in enumerate(ips):
            family = family_of(ip)
            if family is None:
                raise bad(f"spec.clusterIPs[{i}]", f'Invalid value: "{ip}": must be a valid '
                          "IP address")
            if i < len(families) and families[i] != family:
                raise bad(f"spec.clusterIPs[{i}]", f'Invalid value: "{ip}": expected an '
                          f"{families[i]} value as indicated by `ipFamilies[{i}]`")
            if i >= len(families):
                families.append(family)
        if len(ips) == 2 and ips and family_of(ips[0]) == family_of(ips[1]):
            raise bad("spec.clusterIPs", "Invalid value: may specify no more than one IP for "
                      "each IP family")
    supported = allocator.families
    for i, family in enumerate(families):
        if family not in supported:
            raise bad(f"spec.ipFamilies[{i}]", f'Invalid value: "{family}": not configured on '
                      "this cluster")
    if policy == "RequireDualStack" and len(supported) < 2:
        raise bad("spec.ipFamilyPolicy", 'Invalid value: "RequireDualStack": this cluster is '
                  "not configured for dual-stack services")
    if policy is None:
        policy = "SingleStack" if len(families) < 2 and len(ips) < 2 else None
        if policy is None:
            raise bad("spec.ipFamilyPolicy", "Invalid value: must be RequireDualStack or "
                      "PreferDualStack when multiple IP families are specified")
    if not families:
        families = [supported[0]]
    if policy == "SingleStack":  # a downgrade from dual-stack is trimmed, not refused
        asked_two = len(spec.get("ipFamilies") or []) > 1 or len(spec.get("clusterIPs") or []) > 1
        if asked_two and len(old_families) < 2:
            raise bad("spec.ipFamilyPolicy", "Invalid value: must be RequireDualStack or "
                      "PreferDualStack when multiple IP families are specified")
        # A downgrade drops the secondary family; the registry frees its address on commit.
        families, ips = families[:1], ips[:1]
    elif len(families) < 2 and len(supported) > 1:  # PreferDualStack on one family: one
        families.append("IPv6" if families[0] == "IPv4" else "IPv4")
    new_ips = [ip for ip in ips if ip not in old_ips]
    if not headless:
        try:
            for ip in new_ips:
                allocator.reserve(ip)
        except AllocationError as exc:
            allocator.release(new_ips[:new_ips.index(ip)])
            raise bad(f"spec.clusterIPs[{ips.index(ip)}]", f"Invalid value: {exc}") from exc
        ips += [allocator.allocate(family) for family in families[len(ips):]]
    spec["ipFamilyPolicy"] = policy
    spec["ipFamilies"] = families
    spec["clusterIPs"] = ips
    spec["clusterIP"] = ips[0]


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
        spec.setdefault("internalTrafficPolicy", "Cluster")
        if spec["type"] in ("NodePort", "LoadBalancer"):
            spec.setdefault("externalTrafficPolicy", "Cluster")
    _service_ports(rt, name, spec, old_spec, allocator)
    if spec["type"] != "ExternalName":  # last: nothing refused after addresses are taken
        _cluster_ips(rt, name, spec, old_spec if old_spec.get("type") != "ExternalName" else {},
                     allocator)
    if old is None:
        obj["status"] = {"loadBalancer": {}}


ADDRESS_TYPES = ("FQDN", "IPv4", "IPv6")
ENDPOINTS_MAX = 1000
ADDRESSES_MAX = 100
SLICE_PORTS_MAX = 100


def _valid_address(address_type: str, address: Any) -> bool:
    if not isinstance(address, str):
        return False
    if address_type == "FQDN":
        return len(address) <= 253 and bool(_DNS1123_SUBDOMAIN.match(address))
    return family_of(address) == address_type


def validate_endpoint_slice(rt: ResourceType, obj: Obj, old: Obj | None) -> None:
    """addressType required, known and immutable; endpoints and ports within limits."""
    name = obj["metadata"].get("name", "")

    def bad(field: str, detail: str) -> Exception:
        return invalid(rt.kind, rt.group, name, field, detail)

    address_type = obj.get("addressType")
    if not address_type:
        raise bad("addressType", "Required value")
    if address_type not in ADDRESS_TYPES:
        raise bad("addressType", f'Unsupported value: "{address_type}": supported values: '
                  + ", ".join(f'"{t}"' for t in ADDRESS_TYPES))
    if old is not None and old.get("addressType") != address_type:
        raise bad("addressType", f'Invalid value: "{address_type}": field is immutable')
    endpoints = obj.get("endpoints")
    if endpoints is None:
        endpoints = obj["endpoints"] = []
    if not isinstance(endpoints, list):
        raise bad("endpoints", "Invalid value: must be a list")
    if len(endpoints) > ENDPOINTS_MAX:
        raise bad("endpoints", f"Too many: {len(endpoints)}: must have at most {ENDPOINTS_MAX} "
                  "items")
    for i, endpoint in enumerate(endpoints):
        where = f"endpoints[{i}]"
        if not isinstance(endpoint, dict):
            raise bad(where, "Invalid value: must be an object")
        addresses = endpoint.get("addresses")
        if not isinstance(addresses, list) or not addresses:
            raise bad(f"{where}.addresses", "Required value: must contain at least 1 address")
        if len(addresses) > ADDRESSES_MAX:
            raise bad(f"{where}.addresses", f"Too many: {len(addresses)}: must have at most "
                      f"{ADDRESSES_MAX} items")
        for j, address in enumerate(addresses):
            if not _valid_address(address_type, address):
                raise bad(f"{where}.addresses[{j}]", f'Invalid value: "{address}": must be a '
                          f"valid {address_type} address")
    ports = obj.get("ports")
    if ports is None:
        return
    if not isinstance(ports, list):
        raise bad("ports", "Invalid value: must be a list")
    if len(ports) > SLICE_PORTS_MAX:
        raise bad("ports", f"Too many: {len(ports)}: must have at most {SLICE_PORTS_MAX} items")
    for i, port in enumerate(ports):
        if not isinstance(port, dict):
            raise bad(f"ports[{i}]", "Invalid value: must be an object")
        port.setdefault("protocol", "TCP")
        port.setdefault("name", "")
        if port["protocol"] not in PROTOCOLS:
            raise bad(f"ports[{i}].protocol", f'Unsupported value: "{port["protocol"]}": '
                      "supported values: " + ", ".join(f'"{p}"' for p in PROTOCOLS))
        number = port.get("port")
        if number is not None and (not isinstance(number, int) or isinstance(number, bool)
                                   or not 1 <= number <= 65535):
            raise bad(f"ports[{i}].port", f"Invalid value: {number!r}: must be between 1 and "
                      "65535, inclusive")


NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"
NAMESPACE_FINALIZER = "kubernetes"


def default_namespace(obj: Obj, old: Obj | None) -> None:
    """The `kubernetes` finalizer, the immutable name label, and phase Active at creation.

    `spec.finalizers` changes only through `/finalize` (not served): an update keeps them.
    """
    meta = obj["metadata"]
    meta.setdefault("labels", {})[NAMESPACE_NAME_LABEL] = meta["name"]
    if old is None:
        obj.setdefault("spec", {}).setdefault("finalizers", [NAMESPACE_FINALIZER])
        obj["status"] = {"phase": "Active"}
    else:
        obj["spec"] = copy.deepcopy(old.get("spec") or {})


def validate_event(rt: ResourceType, obj: Obj) -> None:
    name = obj["metadata"].get("name", "")
    involved = obj.get("involvedObject")
    if not isinstance(involved, dict):
        raise invalid(rt.kind, rt.group, name, "involvedObject", "Required value")
    ns = involved.get("namespace")
    if ns and ns != obj["metadata"].get("namespace"):
        raise invalid(rt.kind, rt.group, name, "involvedObject.namespace",
                      f'Invalid value: "{ns}": does not match event.namespace')


def validate_cluster_property(rt: ResourceType, obj: Obj) -> None:
    """The About API CRD's schema: `spec.value`, a non-empty string, is required."""
    name = obj["metadata"].get("name", "")
    spec = obj.get("spec")
    value = spec.get("value") if isinstance(spec, dict) else None
    if value is None:
        raise invalid(rt.kind, rt.group, name, "spec.value", "Required value")
    if not isinstance(value, str) or not value:
        raise invalid(rt.kind, rt.group, name, "spec.value",
                      f"Invalid value: {json.dumps(value)}: spec.value in body should be a "
                      "non-empty string")


def prepare(rt: ResourceType, obj: Obj, old: Obj | None, allocator: Allocator) -> None:
    """Default and validate `obj` of type `rt` (`old` is the stored object on update)."""
    validate_metadata(rt, obj)
    if rt.plural == "services":
        default_service(rt, obj, old, allocator)
    elif rt.plural == "events":
        validate_event(rt, obj)
    elif rt.plural == "endpointslices":
        validate_endpoint_slice(rt, obj, old)
    elif rt.plural == "namespaces":
        default_namespace(obj, old)
    elif rt.plural == "clusterproperties":
        validate_cluster_property(rt, obj)
    for fld in ("spec", "status"):
        if fld in obj and obj[fld] is not None and not isinstance(obj[fld], dict):
            raise invalid(rt.kind, rt.group, obj["metadata"].get("name", ""), fld,
                          "Invalid value: must be an object")


__all__ = ["prepare", "validate_name", "validate_namespace"]
