"""Server-side printing: `meta.k8s.io/v1` Table answers, as `kubectl get` asks for them.

kubectl sends `Accept: application/json;as=Table;v=v1;g=meta.k8s.io,…` and prints the
columns the server chooses. A CRD's table is `Name` plus its `additionalPrinterColumns`
(simple JSONPath; a `date` column shows an age, a list shows as JSON, as the apiextensions
table convertor does). Built-ins get the columns their apiserver printers have
(`kubectl get svc`: Type, Cluster-IP, External-IP, Port(s), Age; EndpointSlices:
AddressType, Ports, Endpoints, Age; Namespaces: Status, Age), anything else Name and Age.
Each row carries the object's metadata (PartialObjectMetadata), from which kubectl takes
the namespace column of `-A`, or the whole object with `includeObject=Object`.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sandbox.emulator.resources import PrinterColumn, ResourceType
from sandbox.emulator.store import Obj

TABLE_VERSIONS = ("v1", "v1beta1")
NONE = "<none>"


def wants_table(accept: str) -> str | None:
    """The meta.k8s.io Table version an Accept header asks for first, or None."""
    for media_range in accept.split(","):
        params = dict(
            p.strip().split("=", 1) for p in media_range.split(";")[1:] if "=" in p
        )
        if (params.get("as") == "Table" and params.get("g") == "meta.k8s.io"
                and params.get("v") in TABLE_VERSIONS):
            return params["v"]
    return None


def human_duration(seconds: float) -> str:
    """k8s.io/apimachinery's `duration.HumanDuration`, as kubectl shows ages."""
    if seconds < -1:
        return "<invalid>"
    s = max(int(seconds), 0)
    minutes, hours, days = s // 60, s // 3600, s // 86400
    if s < 120:
        return f"{s}s"
    if minutes < 10:
        return f"{minutes}m{s % 60}s" if s % 60 else f"{minutes}m"
    if minutes < 180:
        return f"{minutes}m"
    if hours < 8:
        return f"{hours}h{minutes % 60}m" if minutes % 60 else f"{hours}h"
    if hours < 48:
        return f"{hours}h"
    if hours < 192:
        return f"{days}d{hours % 24}h" if hours % 24 else f"{days}d"
    if days < 365 * 2:
        return f"{days}d"
    if days < 365 * 8:
        return f"{days // 365}y{days % 365}d" if days % 365 else f"{days // 365}y"
    return f"{days // 365}y"


def age(timestamp: Any, now: datetime | None = None) -> str:
    if not isinstance(timestamp, str):
        return "<unknown>"
    try:
        then = datetime.fromisoformat(timestamp.replace("Z", "+00:00"))
    except ValueError:
        return "<unknown>"
    return human_duration(((now or datetime.now(UTC)) - then).total_seconds())


def json_path(obj: Any, path: str) -> Any:
    """Evaluate a simple JSONPath (`.spec.ips`, `.status.conditions[0].type`); None if absent."""
    node = obj
    for part in path.lstrip(".").split("."):
        name, _, index = part.partition("[")
        if name:
            node = node.get(name) if isinstance(node, dict) else None
        if index:
            i = index.rstrip("]")
            node = node[int(i)] if isinstance(node, list) and i.isdigit() and int(i) < len(
                node) else None
        if node is None:
            return None
    return node


def _custom_cell(column: PrinterColumn, obj: Obj) -> Any:
    value = json_path(obj, column.json_path)
    if value is None:
        return None
    if column.type == "date":
        return age(value)
    if column.type == "string":
        return value if isinstance(value, str) else json.dumps(value, separators=(",", ":"))
    return value


@dataclass(frozen=True)
class Column:
    name: str
    type: str
    cell: Callable[[Obj], Any]
    description: str = ""
    priority: int = 0
    format: str = ""

    def definition(self) -> dict[str, Any]:
        return {"name": self.name, "type": self.type, "format": self.format,
                "description": self.description, "priority": self.priority}


def _meta(obj: Obj) -> dict[str, Any]:
    return obj.get("metadata") or {}


def _spec(obj: Obj) -> dict[str, Any]:
    return obj.get("spec") or {}


NAME = Column("Name", "string", lambda o: _meta(o).get("name", ""),
              "Name must be unique within a namespace.", format="name")
AGE = Column("Age", "string", lambda o: age(_meta(o).get("creationTimestamp")),
             "CreationTimestamp is a timestamp representing the server time when this object "
             "was created.")


def _service_ports(obj: Obj) -> str:
    ports = _spec(obj).get("ports") or []
    parts = [f"{p.get('port')}:{p['nodePort']}/{p.get('protocol', 'TCP')}" if p.get("nodePort")
             else f"{p.get('port')}/{p.get('protocol', 'TCP')}" for p in ports]
    return ",".join(parts) or NONE


def _service_external_ip(obj: Obj) -> str:
    spec = _spec(obj)
    if spec.get("type") == "ExternalName":
        return str(spec.get("externalName") or NONE)
    ingress = ((obj.get("status") or {}).get("loadBalancer") or {}).get("ingress") or []
    ips = [i.get("ip") or i.get("hostname") for i in ingress] + list(
        spec.get("externalIPs") or [])
    if ips:
        return ",".join(str(ip) for ip in ips if ip)
    return "<pending>" if spec.get("type") == "LoadBalancer" else NONE


def _selector(obj: Obj) -> str:
    selector = _spec(obj).get("selector") or {}
    return ",".join(f"{k}={v}" for k, v in sorted(selector.items())) or NONE


def _slice_ports(obj: Obj) -> str:
    ports = [str(p["port"]) for p in obj.get("ports") or [] if p.get("port") is not None]
    return ",".join(ports) if ports else "<unset>"


def _slice_endpoints(obj: Obj) -> str:
    addresses = [a for e in obj.get("endpoints") or [] for a in e.get("addresses") or []]
    if not addresses:
        return "<unset>"
    shown = ",".join(addresses[:3])
    return f"{shown} + {len(addresses) - 3} more..." if len(addresses) > 3 else shown


def _event_object(obj: Obj) -> str:
    involved = obj.get("involvedObject") or {}
    return f"{str(involved.get('kind', '')).lower()}/{involved.get('name', '')}"


BUILT_IN_COLUMNS: dict[str, tuple[Column, ...]] = {
    "services": (
        NAME,
        Column("Type", "string", lambda o: _spec(o).get("type", ""),
               "The type of the service."),
        Column("Cluster-IP", "string", lambda o: _spec(o).get("clusterIP") or NONE,
               "The cluster IP of the service."),
        Column("External-IP", "string", _service_external_ip,
               "The external IPs of the service."),
        Column("Port(s)", "string", _service_ports, "The ports of the service."),
        AGE,
        Column("Selector", "string", _selector, "The selector of the service.", priority=1),
    ),
    "endpointslices": (
        NAME,
        Column("AddressType", "string", lambda o: o.get("addressType", ""),
               "The type of addresses in this slice."),
        Column("Ports", "string", _slice_ports, "The ports of the endpoints."),
        Column("Endpoints", "string", _slice_endpoints, "The addresses of the endpoints."),
        AGE,
    ),
    "namespaces": (
        NAME,
        Column("Status", "string", lambda o: (o.get("status") or {}).get("phase", ""),
               "The status of the namespace."),
        AGE,
    ),
    "leases": (
        NAME,
        Column("Holder", "string", lambda o: _spec(o).get("holderIdentity") or "",
               "The holder of the lease."),
        AGE,
    ),
    "events": (
        Column("Last Seen", "string",
               lambda o: age(o.get("lastTimestamp") or o.get("eventTime")
                             or _meta(o).get("creationTimestamp")),
               "Time when this event was last seen."),
        Column("Type", "string", lambda o: o.get("type", ""), "Type of this event."),
        Column("Reason", "string", lambda o: o.get("reason", ""), "Reason of this event."),
        Column("Object", "string", _event_object, "The object this event is about."),
        Column("Message", "string", lambda o: o.get("message", ""), "The message."),
    ),
    "customresourcedefinitions": (
        NAME,
        Column("Created At", "date", lambda o: _meta(o).get("creationTimestamp", ""),
               "The time the CRD was created."),
    ),
}


def columns(rt: ResourceType) -> tuple[Column, ...]:
    if rt.custom:
        custom = tuple(
            Column(c.name, c.type,
                   functools.partial(_custom_cell, c), c.description, c.priority)
            for c in rt.printer_columns
        ) or (AGE,)
        return (NAME, *custom)
    return BUILT_IN_COLUMNS.get(rt.plural, (NAME, AGE))


def _row_object(obj: Obj, api_version: str, kind: str, include: str) -> dict[str, Any] | None:
    if include == "None":
        return None
    if include == "Object":
        body = {k: v for k, v in obj.items() if k not in ("apiVersion", "kind")}
        return {"apiVersion": api_version, "kind": kind, **body}
    return {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1",
            "metadata": obj.get("metadata") or {}}


def table(rt: ResourceType, api_version: str, objs: list[Obj], *, table_version: str = "v1",
          list_meta: dict[str, Any] | None = None, include_object: str = "Metadata",
          ) -> dict[str, Any]:
    """A `Table` of `objs` (already in the stored form) with `rt`'s columns."""
    cols = columns(rt)
    rows = []
    for obj in objs:
        row: dict[str, Any] = {"cells": [c.cell(obj) for c in cols]}
        embedded = _row_object(obj, api_version, rt.kind, include_object)
        if embedded is not None:
            row["object"] = embedded
        rows.append(row)
    return {
        "kind": "Table",
        "apiVersion": f"meta.k8s.io/{table_version}",
        "metadata": list_meta or {},
        "columnDefinitions": [c.definition() for c in cols],
        "rows": rows,
    }
