"""Cluster IPs per IP family and node ports, handed out as the apiserver's allocators do.

The emulated cluster is dual-stack: Services get IPv4 addresses from 10.96.0.0/12 and IPv6
addresses from fd00:10:96::/108 (kubeadm's and kind's defaults), one per entry of
`spec.ipFamilies`. An address is in use from allocation (or from a create that names it)
until its Service is deleted, so two Services never share one, and a create that names an
address outside the range or in use is refused, as the real allocator refuses it. Node
ports come from 30000-32767 and are not tracked (the agent never reads them back).
"""

from __future__ import annotations

import ipaddress
import itertools
import threading

IPV4 = "IPv4"
IPV6 = "IPv6"
FAMILIES = (IPV4, IPV6)
SERVICE_CIDRS = {
    IPV4: ipaddress.ip_network("10.96.0.0/12"),
    IPV6: ipaddress.ip_network("fd00:10:96::/108"),
}
# The first addresses are the apiserver's own (10.96.0.1 `kubernetes`) and DNS (.10): skip.
_FIRST_OFFSET = 11


class AllocationError(ValueError):
    """A requested address cannot be used; the message is the apiserver's detail text."""


def family_of(ip: str) -> str | None:
    """`IPv4`/`IPv6` for a valid address, None for anything else."""
    try:
        return IPV4 if ipaddress.ip_address(ip).version == 4 else IPV6
    except ValueError:
        return None


class Allocator:
    """Cluster IPs per family (never two Services on one address) and node ports."""

    def __init__(self, families: tuple[str, ...] = FAMILIES) -> None:
        # The families the cluster's service CIDRs serve, primary first (a single-stack
        # cluster has one): Services asking for another are refused, as kube-apiserver does.
        self.families = families
        self._lock = threading.Lock()
        self._used: set[str] = set()
        self._next = dict.fromkeys(FAMILIES, _FIRST_OFFSET)
        self._ports = itertools.cycle(range(30000, 32768))

    def allocate(self, family: str) -> str:
        """The next free address of `family`'s service range."""
        network = SERVICE_CIDRS[family]
        with self._lock:
            for _ in range(network.num_addresses):
                offset = self._next[family]
                self._next[family] = offset + 1 if offset + 1 < network.num_addresses - 1 \
                    else _FIRST_OFFSET
                ip = str(network.network_address + offset)
                if ip not in self._used:
                    self._used.add(ip)
                    return ip
        raise AllocationError(f"range is full: no free {family} cluster IP")

    def reserve(self, ip: str) -> None:
        """Take an address a create names; refuse it outside the range or when in use."""
        family = family_of(ip)
        if family is None:
            raise AllocationError(f'"{ip}": must be a valid IP address, (e.g. 10.9.8.7 or '
                                  "2001:db8::ffff)")
        network = SERVICE_CIDRS[family]
        if ipaddress.ip_address(ip) not in network:
            raise AllocationError(f'"{ip}": provided IP is not in the valid range. The range '
                                  f"of valid IPs is {network}")
        with self._lock:
            if ip in self._used:
                raise AllocationError(f'"{ip}": provided IP is already allocated')
            self._used.add(ip)

    def release(self, ips: list[str]) -> None:
        with self._lock:
            for ip in ips:
                self._used.discard(ip)

    def node_port(self) -> int:
        return next(self._ports)
