"""The records the CoreDNS `multicluster` plugin answers, from the objects of one cluster.

mcsync ships no DNS (docs/reference.md#import-path): in a real fleet the CoreDNS `multicluster`
plugin (in CoreDNS since 1.12.2) answers `clusterset.local` from what mcsync writes. The emulated
clusters run no CoreDNS, so the DNS conformance tests (`test_conformance.py`, ported from
upstream's clusterip_service_dns.go and headless_service_dns.go) ask this model instead: it
reads exactly what the plugin reads and answers what it answers (`plugin/multicluster` in
coredns/coredns, read for this model, none of its code copied):

* its informers: ServiceImports (name, namespace, `spec.type`, `spec.ips`, `spec.ports`),
  Namespaces (a name in a namespace the cluster lacks is NXDOMAIN), and EndpointSlices
  labelled `multicluster.kubernetes.io/service-name`, indexed by that label and namespace,
  each slice's cluster being its `multicluster.kubernetes.io/source-cluster` label; an
  endpoint counts when `conditions.ready` is true or absent;
* names: `<svc>.<ns>.svc.<zone>` and `<hostname>.<cluster>.<svc>.<ns>.svc.<zone>`, where an
  endpoint's hostname is its `hostname`, else its address with `.`/`:` turned into `-`;
* a ClusterSetIP import answers A/AAAA with `spec.ips` (of the family asked) and SRV with
  one record per port, target `<svc>.<ns>.svc.<zone>`; a Headless import (and any
  `<hostname>.<cluster>` name) answers from the ready endpoints, SRV targets being
  `<hostname>.<cluster>.<svc>.<ns>.svc.<zone>`. Answers are deduplicated as CoreDNS's
  backend lookup does: A/AAAA by address, SRV by (target, port).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from shared.constants import LABEL_MCS_SERVICE_NAME, LABEL_MCS_SOURCE_CLUSTER

ZONE = "clusterset.local"


@dataclass(frozen=True, order=True)
class Srv:
    """One SRV answer as nslookup shows it: the port and the target name."""

    port: int
    target: str


@dataclass(frozen=True)
class _Endpoint:
    cluster: str
    hostname: str
    address: str
    ports: tuple[int, ...]


def endpoint_hostname(address: str, hostname: str | None) -> str:
    """The plugin's name for an endpoint: its hostname, else its address dashed."""
    if hostname:
        return hostname
    return address.replace(".", "-").replace(":", "-")


class MulticlusterDns:
    """The answers of the `multicluster` plugin for `zone` over one cluster's objects."""

    def __init__(
        self,
        *,
        service_imports: Iterable[Mapping[str, Any]],
        endpoint_slices: Iterable[Mapping[str, Any]],
        namespaces: Iterable[str],
        zone: str = ZONE,
    ) -> None:
        self.zone = zone.strip(".")
        self._namespaces = set(namespaces)
        self._imports = {
            (si["metadata"]["namespace"], si["metadata"]["name"]): si for si in service_imports
        }
        self._endpoints: dict[tuple[str, str], list[_Endpoint]] = {}
        for eps in endpoint_slices:
            meta = eps.get("metadata") or {}
            labels = meta.get("labels") or {}
            service = labels.get(LABEL_MCS_SERVICE_NAME)
            if not service:
                continue  # the plugin's informer selects on this label
            ports = tuple(int(p["port"]) for p in eps.get("ports") or [] if "port" in p) or (-1,)
            found = self._endpoints.setdefault((meta.get("namespace", ""), service), [])
            for endpoint in eps.get("endpoints") or []:
                if (endpoint.get("conditions") or {}).get("ready") is False:
                    continue
                for address in endpoint.get("addresses") or []:
                    found.append(_Endpoint(
                        cluster=labels.get(LABEL_MCS_SOURCE_CLUSTER, ""),
                        hostname=endpoint_hostname(address, endpoint.get("hostname")),
                        address=address, ports=ports))

    def _parse(self, qname: str) -> tuple[str, str, str, str] | None:
        """(endpoint, cluster, service, namespace) of a name in the zone, or None."""
        name = qname.strip(".").lower()
        suffix = f".svc.{self.zone}"
        if not name.endswith(suffix):
            return None
        labels = name[: -len(suffix)].split(".")
        if len(labels) == 2:
            return "", "", labels[0], labels[1]
        if len(labels) == 4:
            return labels[0], labels[1], labels[2], labels[3]
        return None

    def _ready(self, namespace: str, service: str, endpoint: str,
               cluster: str) -> list[_Endpoint]:
        return [e for e in self._endpoints.get((namespace, service), [])
                if not endpoint
                or (e.cluster.lower() == cluster and e.hostname.lower() == endpoint)]

    def addresses(self, qname: str, qtype: str) -> list[str]:
        """The A (`qtype="A"`) or AAAA answers, sorted; [] for no answer."""
        parsed = self._parse(qname)
        if parsed is None:
            return []
        endpoint, cluster, service, namespace = parsed
        si = self._imports.get((namespace, service))
        if si is None or namespace not in self._namespaces:
            return []
        if si["spec"].get("type") == "Headless" or endpoint:
            hosts = [e.address for e in self._ready(namespace, service, endpoint, cluster)]
        elif si["spec"].get("ports"):
            hosts = list(si["spec"].get("ips") or [])
        else:
            hosts = []  # the plugin answers a ClusterSetIP per port: none, no answer
        version = 4 if qtype == "A" else 6
        return sorted({h for h in hosts if ipaddress.ip_address(h).version == version})

    def srv(self, qname: str) -> list[Srv]:
        """The SRV answers of a service name, sorted."""
        parsed = self._parse(qname)
        if parsed is None:
            return []
        endpoint, cluster, service, namespace = parsed
        si = self._imports.get((namespace, service))
        if si is None or namespace not in self._namespaces:
            return []
        base = f"{service}.{namespace}.svc.{self.zone}"
        if si["spec"].get("type") == "Headless" or endpoint:
            answers = {Srv(port, f"{e.hostname}.{e.cluster}.{base}")
                       for e in self._ready(namespace, service, endpoint, cluster)
                       for port in e.ports}
        else:
            answers = {Srv(int(p["port"]), base) for p in si["spec"].get("ports") or []
                       for _ in si["spec"].get("ips") or []}
        return sorted(answers)
