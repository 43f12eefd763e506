"""Write a kubeconfig that points the official client (or an agent process) at an emulator.

Cluster, user and context are all named after the emulated cluster, so a test running
several clusters can tell their kubeconfigs apart. Plain HTTP needs no TLS settings; the
token is accepted but not checked by the emulator.
"""

from __future__ import annotations

from pathlib import Path

import yaml


def kubeconfig_dict(*, name: str, url: str, token: str = "emulator-token",
                    namespace: str = "default") -> dict[str, object]:
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": name, "cluster": {"server": url}}],
        "users": [{"name": name, "user": {"token": token}}],
        "contexts": [{"name": name, "context": {"cluster": name, "user": name,
                                                "namespace": namespace}}],
        "current-context": name,
        "preferences": {},
    }


def write_kubeconfig(path: Path, *, name: str, url: str, token: str = "emulator-token") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(kubeconfig_dict(name=name, url=url, token=token),
                                   sort_keys=False))
    return path
