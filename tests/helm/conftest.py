"""Render the charts offline with Helm's own engine and load what they make.

The charts are rendered by helm-python-sdk (Helm v4 as a library), so a test sees exactly
what `helm template` / `helm install` would produce, including values.schema.json
enforcement and `fail` in templates. Every rendered object is then loaded into the
`kubernetes` client's model for its kind and serialised back: a misspelt or misplaced field
(which the API server would reject, or worse silently drop) makes the round trip differ,
so the assertions about probes or security contexts are about objects Kubernetes would
accept as written.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import helm_python
import kubernetes.client
import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
HUB_CHART = REPO / "helm" / "mcsync-hub"
AGENT_CHART = REPO / "helm" / "mcsync-agent"
RELEASE = "mc"
NAMESPACE = "mcsync-system"

# Kinds with no model in the kubernetes client, checked by hand where used.
_NO_MODEL = {
    ("monitoring.coreos.com/v1", "ServiceMonitor"),
    ("monitoring.coreos.com/v1", "PrometheusRule"),
}


@dataclass
class Rendered:
    """A rendered release: its objects (hooks included) and the raw manifest text."""

    objects: list[dict[str, Any]]
    text: dict[str, str] = field(default_factory=dict)

    def of_kind(self, kind: str) -> list[dict[str, Any]]:
        return [o for o in self.objects if o["kind"] == kind]

    def one(self, kind: str, name: str | None = None) -> dict[str, Any]:
        found = [o for o in self.of_kind(kind) if name is None or o["metadata"]["name"] == name]
        assert len(found) == 1, f"expected one {kind} {name or ''}, found {len(found)}"
        return found[0]

    def manifest(self, kind: str, name: str | None = None) -> str:
        """The rendered YAML of one object, to search for literals that must not be there."""
        return yaml.safe_dump(self.one(kind, name))


def render(chart_dir: Path, values: dict[str, Any] | None = None) -> Rendered:
    """Render a chart as an install of release `mc` in namespace `mcsync-system`."""
    with helm_python.Chart.load(chart_dir) as chart:
        manifests = chart.render(values or {}, name=RELEASE, namespace=NAMESPACE, is_install=True)
    objects: list[dict[str, Any]] = []
    for path, text in sorted(manifests.items()):
        if path.endswith("NOTES.txt"):
            continue
        for doc in yaml.safe_load_all(text):
            if doc:
                assert isinstance(doc, dict), f"{path}: a YAML document that is not an object"
                objects.append(doc)
    return Rendered(objects=objects, text=manifests)


def render_error(chart_dir: Path, values: dict[str, Any]) -> str:
    """Render expecting Helm to refuse the values; answer Helm's message."""
    with pytest.raises(helm_python.HelmError) as caught:
        render(chart_dir, values)
    return str(caught.value)


def assert_lint_clean(chart_dir: Path, values: dict[str, Any]) -> None:
    """`helm lint --strict` finds no error and nothing at warning level or above."""
    report = helm_python.lint(chart_dir, values, strict=True, namespace=NAMESPACE)
    assert report["errors"] == []
    assert [m for m in report["messages"] if m["severity"] >= 2] == []


def crds(chart_dir: Path) -> list[dict[str, Any]]:
    """The CRDs Helm installs from the chart's crds/ directory."""
    with helm_python.Chart.load(chart_dir) as chart:
        return [yaml.safe_load(c["data"]) for c in chart.crds]


def _strip_none(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _strip_none(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_strip_none(v) for v in value]
    return value


def _first_difference(a: Any, b: Any, path: str = "") -> str | None:
    if type(a) is not type(b):
        return f"{path or '.'}: {a!r} != {b!r}"
    if isinstance(a, dict):
        for key in sorted(set(a) | set(b)):
            if key not in a or key not in b:
                return f"{path}.{key}: present on one side only (unknown or misplaced field?)"
            found = _first_difference(a[key], b[key], f"{path}.{key}")
            if found:
                return found
        return None
    if isinstance(a, list):
        if len(a) != len(b):
            return f"{path}: lists of different length"
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            found = _first_difference(x, y, f"{path}[{i}]")
            if found:
                return found
        return None
    return None if a == b else f"{path}: {a!r} != {b!r}"


def load_model(obj: dict[str, Any]) -> Any:
    """Load a rendered object into its kubernetes client model; fail on any field it drops.

    The model class comes from apiVersion and kind (apps/v1 Deployment -> V1Deployment).
    The client's models check types (a string replica count fails) but silently ignore
    unknown keys, hence the comparison of the serialised model with the input.
    """
    version = obj["apiVersion"].rsplit("/", 1)[-1]
    class_name = version[0].upper() + version[1:] + obj["kind"]
    model_class = getattr(kubernetes.client, class_name, None)
    assert model_class is not None, f"no kubernetes client model {class_name}"
    model = model_class.from_dict(obj)
    back = kubernetes.client.ApiClient().sanitize_for_serialization(model)
    difference = _first_difference(back, _strip_none(obj))
    assert difference is None, f"{obj['kind']} {obj['metadata']['name']}: {difference}"
    return model


def load_all(rendered: Rendered) -> None:
    """Every object of a release loads into its model, or is a kind known to have none."""
    for obj in rendered.objects:
        if (obj["apiVersion"], obj["kind"]) in _NO_MODEL:
            continue
        load_model(obj)


def pod_specs(rendered: Rendered) -> Iterator[tuple[str, dict[str, Any]]]:
    """(object name, pod spec) of every workload: Deployments, StatefulSets and Jobs."""
    for obj in rendered.objects:
        if obj["kind"] in {"Deployment", "StatefulSet", "Job", "DaemonSet"}:
            yield obj["metadata"]["name"], obj["spec"]["template"]["spec"]


def containers(rendered: Rendered) -> Iterator[tuple[str, dict[str, Any], dict[str, Any]]]:
    """(where, pod spec, container) for every container and init container."""
    for name, spec in pod_specs(rendered):
        for container in spec.get("initContainers", []) + spec["containers"]:
            yield f"{name}/{container['name']}", spec, container


def assert_hardened(rendered: Rendered) -> None:
    """Every container runs as a non-root uid, read-only, unprivileged, no capabilities,
    under the RuntimeDefault seccomp profile: what the "restricted" Pod Security Standard
    asks, plus a read-only root filesystem."""
    seen = 0
    for where, pod, container in containers(rendered):
        seen += 1
        pod_ctx = pod.get("securityContext", {})
        ctx = container.get("securityContext", {})
        assert pod_ctx.get("runAsNonRoot") is True, where
        assert ctx.get("runAsNonRoot", pod_ctx.get("runAsNonRoot")) is True, where
        uid = ctx.get("runAsUser", pod_ctx.get("runAsUser"))
        assert isinstance(uid, int) and uid > 0, f"{where}: runAsUser {uid!r}"
        assert ctx.get("readOnlyRootFilesystem") is True, where
        assert ctx.get("allowPrivilegeEscalation") is False, where
        assert ctx.get("privileged", False) is False, where
        assert ctx.get("capabilities", {}).get("drop") == ["ALL"], where
        assert not ctx.get("capabilities", {}).get("add"), where
        seccomp = ctx.get("seccompProfile", pod_ctx.get("seccompProfile", {}))
        assert seccomp.get("type") == "RuntimeDefault", where
        # A read-only root needs a writable /tmp for Python's tempfile and friends.
        tmp_mounts = [m for m in container.get("volumeMounts", []) if m["mountPath"] == "/tmp"]
        assert len(tmp_mounts) == 1, f"{where}: no /tmp mount"
        volume = next(v for v in pod["volumes"] if v["name"] == tmp_mounts[0]["name"])
        assert "emptyDir" in volume, f"{where}: /tmp is not an emptyDir"
    assert seen, "no containers rendered"


def args_of(container: dict[str, Any]) -> list[str]:
    return [str(a) for a in container.get("command", []) + container.get("args", [])]


def flag_values(container: dict[str, Any], flag: str) -> list[str]:
    """Values of `--flag=value` (or `--flag value`) in a container's command line."""
    args = args_of(container)
    found = []
    for i, arg in enumerate(args):
        if arg.startswith(flag + "="):
            found.append(arg.split("=", 1)[1])
        elif arg == flag and i + 1 < len(args) and not args[i + 1].startswith("--"):
            found.append(args[i + 1])
    return found


def container_named(pod: dict[str, Any], name: str) -> dict[str, Any]:
    return next(c for c in pod["containers"] if c["name"] == name)


def install_doc_values(filename: str) -> dict[str, Any]:
    """The values file that docs/install.md writes with `cat > FILENAME <<'EOF'`, parsed.

    The install guide is tested against the charts so its commands keep matching their
    values as both evolve.
    """
    text = (REPO / "docs" / "install.md").read_text()
    start = text.index(f"cat > {filename} <<'EOF'\n") + len(f"cat > {filename} <<'EOF'\n")
    values = yaml.safe_load(text[start : text.index("\nEOF\n", start)])
    assert isinstance(values, dict)
    return values


def render_as(chart_dir: Path, release: str, namespace: str, values: dict[str, Any]) -> Rendered:
    """Render under a given release name and namespace (as the install guide names them)."""
    with helm_python.Chart.load(chart_dir) as chart:
        manifests = chart.render(values, name=release, namespace=namespace, is_install=True)
    objects = [
        doc
        for path, text in sorted(manifests.items())
        if not path.endswith("NOTES.txt")
        for doc in yaml.safe_load_all(text)
        if doc
    ]
    return Rendered(objects=objects, text=manifests)
