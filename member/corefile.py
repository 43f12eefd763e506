"""`python -m member.corefile add|remove`: the `multicluster` stanza in the cluster's Corefile.

The member chart's `coredns.multicluster.enabled` value runs this as a Helm hook Job
(docs/reference.md#import-path, docs/install.md): after install and upgrade it adds, to the root
server block (`.:53 {`) of the CoreDNS ConfigMap's `Corefile`,

    # mcsync: the MCS clusterset zone (helm value coredns.multicluster.enabled)
    multicluster clusterset.local

so that the CoreDNS `multicluster` plugin (in CoreDNS since 1.12.2) answers
`<svc>.<ns>.svc.clusterset.local` from the ServiceImports and EndpointSlices mcsync writes;
before the release is deleted it takes its two lines out again. CoreDNS's `reload` plugin
(in the default Corefile) picks the change up; the chart grants CoreDNS the read of
ServiceImports that the plugin needs.

What it leaves alone: a Corefile that already has a `multicluster` line (whoever wrote it
keeps it; `remove` only removes the lines this module added, found by their comment), and a
ConfigMap it would not change (no write). A Corefile without a `.:53 {` block, or a missing
ConfigMap, is one line naming it, exit 1: CoreDNS is managed elsewhere there, and
docs/install.md shows the stanza to add by hand. A conflicting update (409) is read and
tried again, a few times.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Sequence
from typing import Any

from member.kube.client import ApiException, KubeConfigError, load_api_client, request_json

__all__ = ["MARKER", "CorefileError", "add_stanza", "main", "remove_stanza"]

MARKER = "# mcsync: the MCS clusterset zone (helm value coredns.multicluster.enabled)"
DEFAULT_ZONE = "clusterset.local"
_ROOT_BLOCK = re.compile(r"^(\s*)\.(:53)?\s*\{\s*$")
_CONFLICT_RETRIES = 5


class CorefileError(Exception):
    """The Corefile cannot be edited; the message is the one line to print."""


def add_stanza(corefile: str, *, zone: str = DEFAULT_ZONE) -> str:
    """`corefile` with the `multicluster` stanza in its root server block (unchanged when a
    `multicluster` line is there already)."""
    lines = corefile.splitlines(keepends=True)
    if any(line.split()[:1] == ["multicluster"] for line in lines):
        return corefile
    for i, line in enumerate(lines):
        found = _ROOT_BLOCK.match(line.rstrip("\n"))
        if found is None:
            continue
        indent = _body_indent(lines[i + 1:], found.group(1))
        stanza = [f"{indent}{MARKER}\n", f"{indent}multicluster {zone}\n"]
        return "".join([*lines[: i + 1], *stanza, *lines[i + 1:]])
    raise CorefileError("the Corefile has no root server block ('.:53 {'): add the "
                        f"stanza 'multicluster {zone}' to the right block by hand")


def remove_stanza(corefile: str) -> str:
    """`corefile` without the two lines `add_stanza` added (unchanged when absent)."""
    lines = corefile.splitlines(keepends=True)
    for i, line in enumerate(lines):
        if line.strip() == MARKER and i + 1 < len(lines) and \
                lines[i + 1].split()[:1] == ["multicluster"]:
            return "".join([*lines[:i], *lines[i + 2:]])
    return corefile


def _body_indent(rest: Sequence[str], block_indent: str) -> str:
    """The indentation of the block's first directive (four spaces more if none)."""
    for line in rest:
        if line.strip():
            return line[: len(line) - len(line.lstrip())]
    return block_indent + "    "


def edit_configmap(api: Any, *, namespace: str, name: str, action: str, zone: str) -> bool:
    """Apply `action` ("add" or "remove") to the ConfigMap's Corefile; answers whether it
    wrote."""
    path = f"/api/v1/namespaces/{namespace}/configmaps/{name}"
    for _ in range(_CONFLICT_RETRIES):
        try:
            configmap = request_json(api, "GET", path)
        except ApiException as exc:
            if exc.status == 404:
                raise CorefileError(f"ConfigMap {namespace}/{name} does not exist: is CoreDNS "
                                    "managed elsewhere? (docs/install.md)") from None
            raise
        data = configmap.get("data") or {}
        corefile = data.get("Corefile")
        if corefile is None:
            raise CorefileError(f"ConfigMap {namespace}/{name} has no Corefile key")
        edited = add_stanza(corefile, zone=zone) if action == "add" else remove_stanza(corefile)
        if edited == corefile:
            return False
        configmap["data"] = {**data, "Corefile": edited}
        try:
            request_json(api, "PUT", path, body=configmap)  # carries its resourceVersion
        except ApiException as exc:
            if exc.status == 409:
                continue
            raise
        return True
    raise CorefileError(f"ConfigMap {namespace}/{name} kept changing under us "
                        f"({_CONFLICT_RETRIES} conflicts)")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m member.corefile",
        description="add or remove the CoreDNS multicluster stanza of mcsync's chart")
    parser.add_argument("action", choices=("add", "remove"))
    parser.add_argument("--namespace", default="kube-system", help="CoreDNS's namespace")
    parser.add_argument("--configmap", default="coredns", help="CoreDNS's ConfigMap")
    parser.add_argument("--zone", default=DEFAULT_ZONE, help="the clusterset zone")
    parser.add_argument("--kubeconfig", default=None,
                        help="kubeconfig (default: in-cluster, then ~/.kube/config)")
    args = parser.parse_args(argv)
    try:
        api = load_api_client(kubeconfig=args.kubeconfig)
        wrote = edit_configmap(api, namespace=args.namespace, name=args.configmap,
                               action=args.action, zone=args.zone)
    except (CorefileError, KubeConfigError) as exc:
        print(f"{parser.prog}: error: {exc}", file=sys.stderr)
        return 1
    except ApiException as exc:
        print(f"{parser.prog}: error: the Kubernetes API answered {exc.status} {exc.reason} "
              f"for ConfigMap {args.namespace}/{args.configmap}", file=sys.stderr)
        return 1
    done = {"add": "added to", "remove": "removed from"}[args.action]
    print(f"multicluster stanza {done if wrote else 'already as wanted in'} "
          f"{args.namespace}/{args.configmap}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
