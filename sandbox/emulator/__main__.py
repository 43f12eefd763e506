"""Run one emulated cluster as a process: `python -m sandbox.emulator --port N`.

Prints exactly one ready line, `emulator listening on http://HOST:PORT`, once the socket
accepts connections (port 0 picks a free port and the line says which), then serves until
SIGTERM/SIGINT. With `--kubeconfig PATH` it also writes a kubeconfig for the cluster.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from sandbox.emulator.kubeconfig import write_kubeconfig
from sandbox.emulator.resources import parse_mcs_versions
from sandbox.emulator.server import bind_socket, make_server
from sandbox.emulator.state import EmulatorState


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m sandbox.emulator",
                                     description="Kubernetes API emulator for mcsync tests")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--mcs-versions", default="v1beta1,v1alpha1",
                        help="served MCS versions, preferred first (default: %(default)s)")
    parser.add_argument("--about-api", action="store_true",
                        help="also serve the About API (KEP-2149 ClusterProperty) and its CRD")
    parser.add_argument("--history", type=int, default=1000,
                        help="watch events retained (default: %(default)s)")
    parser.add_argument("--bookmark-interval", type=float, default=5.0,
                        help="seconds between watch BOOKMARK events (default: %(default)s)")
    parser.add_argument("--kubeconfig", type=Path, default=None,
                        help="also write a kubeconfig for this cluster here")
    parser.add_argument("--name", default="emulated", help="cluster name in the kubeconfig")
    parser.add_argument("--namespaces", default="",
                        help="namespaces to create besides default, kube-system, kube-public "
                             "and kube-node-lease (comma-separated)")
    parser.add_argument("--endpoint-cidr", default=None,
                        help="give every Service with a selector fake ready endpoints from "
                             "this IPv4 range (an EndpointSlice controller stand-in; default: "
                             "off)")
    parser.add_argument("--cluster-property", action="append", default=[],
                        metavar="NAME=VALUE",
                        help="create this ClusterProperty at start (repeatable; needs "
                             "--about-api)")
    return parser.parse_args(argv)


def parse_properties(pairs: list[str]) -> dict[str, str]:
    """`--cluster-property NAME=VALUE` flags as a dict; ValueError naming a bad one."""
    out: dict[str, str] = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or not name or not value:
            raise ValueError(f"{pair!r} is not NAME=VALUE")
        out[name] = value
    return out


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        versions = parse_mcs_versions(args.mcs_versions)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    namespaces = tuple(n.strip() for n in args.namespaces.split(",") if n.strip())
    try:
        state = EmulatorState(mcs_versions=versions, history=args.history,
                              bookmark_interval=args.bookmark_interval, namespaces=namespaces,
                              about_api=args.about_api, endpoint_cidr=args.endpoint_cidr)
    except ValueError as exc:
        print(f"error: --endpoint-cidr: {exc}", file=sys.stderr)
        return 2
    try:
        properties = parse_properties(args.cluster_property)
    except ValueError as exc:
        print(f"error: --cluster-property: {exc}", file=sys.stderr)
        return 2
    if properties and not args.about_api:
        print("error: --cluster-property: needs --about-api (ClusterProperty is an About API "
              "object)", file=sys.stderr)
        return 2
    for name, value in properties.items():
        state.create("clusterproperties", None,
                     {"metadata": {"name": name}, "spec": {"value": value}})
    sock = bind_socket(args.host, args.port)
    url = f"http://{args.host}:{sock.getsockname()[1]}"
    if args.kubeconfig is not None:
        write_kubeconfig(args.kubeconfig, name=args.name, url=url)
    print(f"emulator listening on {url}", flush=True)
    make_server(state).run(sockets=[sock])
    return 0


if __name__ == "__main__":
    sys.exit(main())
