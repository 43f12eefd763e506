"""Table-driven tests of the emulator's pure pieces: selectors, patch formats, printing."""

from __future__ import annotations

from typing import Any

import pytest

from sandbox.emulator.errors import KubeError
from sandbox.emulator.patch import apply_patch, json_patch, merge_patch
from sandbox.emulator.selectors import (
    COMMON_FIELDS,
    parse_field_selector,
    parse_label_selector,
)
from sandbox.emulator.strategic import strategic_merge
from sandbox.emulator.tables import human_duration, json_path, wants_table


def _obj(labels: dict[str, str] | None = None, name: str = "x", ns: str = "a") -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": ns, "labels": labels or {}}}


@pytest.mark.parametrize(("selector", "labels", "expected"), [
    ("", {}, True),
    ("app=web", {"app": "web"}, True),
    ("app=web", {"app": "api"}, False),
    ("app==web", {"app": "web"}, True),
    ("app!=web", {}, True),
    ("app!=web", {"app": "web"}, False),
    ("app in (web,api)", {"app": "api"}, True),
    ("app in (web, api)", {"app": "db"}, False),
    ("app notin (web)", {}, True),
    ("app notin (web)", {"app": "web"}, False),
    ("app", {"app": ""}, True),
    ("!app", {"app": "x"}, False),
    ("!app", {}, True),
    ("example.com/team=a,app in (web),!legacy", {"example.com/team": "a", "app": "web"}, True),
    ("example.com/team=a,app in (web),!legacy", {"example.com/team": "a", "app": "web",
                                                  "legacy": "1"}, False),
    ("tier=", {"tier": ""}, True),
])
def test_label_selector(selector: str, labels: dict[str, str], expected: bool) -> None:
    assert parse_label_selector(selector).matches(_obj(labels)) is expected


@pytest.mark.parametrize("selector", ["app in (web", "app)", "a=b=c", "-bad=x", "app=bad value"])
def test_label_selector_rejects_garbage(selector: str) -> None:
    with pytest.raises(KubeError) as info:
        parse_label_selector(selector)
    assert info.value.code == 400


def test_field_selector() -> None:
    sel = parse_field_selector("metadata.name=x,metadata.namespace!=b", allowed=COMMON_FIELDS)
    assert sel.matches(_obj(name="x", ns="a"))
    assert not sel.matches(_obj(name="x", ns="b"))
    assert not sel.matches(_obj(name="y", ns="a"))
    with pytest.raises(KubeError):
        parse_field_selector("spec.type=x", allowed=COMMON_FIELDS)


@pytest.mark.parametrize(("target", "patch", "expected"), [
    ({"a": 1, "b": {"c": 2}}, {"b": {"d": 3}}, {"a": 1, "b": {"c": 2, "d": 3}}),
    ({"a": 1, "b": 2}, {"a": None}, {"b": 2}),
    ({"l": [1, 2]}, {"l": [3]}, {"l": [3]}),
    ({"a": {"b": 1}}, {"a": "x"}, {"a": "x"}),
])
def test_merge_patch(target: Any, patch: Any, expected: Any) -> None:
    before = repr(target)
    assert merge_patch(target, patch) == expected
    assert repr(target) == before  # inputs are not modified


def test_json_patch_operations() -> None:
    doc = {"metadata": {"finalizers": ["a"]}, "spec": {"x": 1}}
    out = json_patch(doc, [
        {"op": "add", "path": "/metadata/finalizers/-", "value": "b"},
        {"op": "add", "path": "/metadata/finalizers/0", "value": "z"},
        {"op": "replace", "path": "/spec/x", "value": 2},
        {"op": "copy", "from": "/spec/x", "path": "/spec/y"},
        {"op": "move", "from": "/spec/y", "path": "/spec/w"},
        {"op": "remove", "path": "/metadata/finalizers/1"},
        {"op": "add", "path": "/metadata/labels", "value": {"a~b/c": "1"}},
        {"op": "test", "path": "/metadata/labels/a~0b~1c", "value": "1"},
    ])
    assert out == {"metadata": {"finalizers": ["z", "b"], "labels": {"a~b/c": "1"}},
                   "spec": {"x": 2, "w": 2}}
    assert doc == {"metadata": {"finalizers": ["a"]}, "spec": {"x": 1}}
    with pytest.raises(KubeError) as missing:
        json_patch(doc, [{"op": "replace", "path": "/spec/nope", "value": 1}])
    assert missing.value.code == 422


def test_apply_patch_media_types() -> None:
    doc = {"metadata": {"finalizers": ["a", "b"]}}
    strategic = apply_patch(doc, {"metadata": {"finalizers": ["b"]}},
                            "application/strategic-merge-patch+json", custom=False)
    assert strategic == {"metadata": {"finalizers": ["a", "b"]}}
    with pytest.raises(KubeError) as crd:
        apply_patch(doc, {}, "application/strategic-merge-patch+json", custom=True)
    assert crd.value.code == 415
    with pytest.raises(KubeError) as apply:
        apply_patch(doc, {}, "application/apply-patch+yaml", custom=False)
    assert apply.value.code == 415


@pytest.mark.parametrize(("seconds", "shown"), [
    (-5, "<invalid>"), (0, "0s"), (59, "59s"), (119, "119s"), (125, "2m5s"), (600, "10m"),
    (3 * 3600 + 60, "3h1m"), (9 * 3600, "9h"), (3 * 86400 + 3600, "3d1h"), (30 * 86400, "30d"),
])
def test_ages_print_as_kubectl_prints_them(seconds: float, shown: str) -> None:
    assert human_duration(seconds) == shown


@pytest.mark.parametrize(("accept", "version"), [
    ("application/json;as=Table;v=v1;g=meta.k8s.io,application/json", "v1"),
    ("application/json;as=Table;v=v1beta1;g=meta.k8s.io", "v1beta1"),
    ("application/json", None),
    ("application/json;as=PartialObjectMetadata;v=v1;g=meta.k8s.io", None),
])
def test_table_negotiation(accept: str, version: str | None) -> None:
    assert wants_table(accept) == version


def test_printer_column_json_path() -> None:
    obj = {"spec": {"ips": ["10.0.0.1"], "ports": [{"port": 80}]}}
    assert json_path(obj, ".spec.ips") == ["10.0.0.1"]
    assert json_path(obj, ".spec.ports[0].port") == 80
    assert json_path(obj, ".spec.ports[3].port") is None
    assert json_path(obj, ".status.clusters") is None


SVC = {"metadata": {"name": "web", "finalizers": ["a"]},
       "spec": {"selector": {"app": "web"},
                "ports": [{"name": "http", "port": 80, "targetPort": 8080},
                          {"name": "https", "port": 443, "targetPort": 8443}]}}


@pytest.mark.parametrize(("patch", "ports"), [
    # Merge by port: one element changes, the other stays.
    ({"spec": {"ports": [{"port": 80, "targetPort": 9090}]}},
     [("http", 80, 9090), ("https", 443, 8443)]),
    # kubectl apply's patch when a port number changes.
    ({"spec": {"$setElementOrder/ports": [{"port": 81}, {"port": 443}],
               "ports": [{"name": "http", "port": 81}, {"$patch": "delete", "port": 80}]}},
     [("http", 81, None), ("https", 443, 8443)]),
    ({"spec": {"$setElementOrder/ports": [{"port": 443}, {"port": 80}]}},
     [("https", 443, 8443), ("http", 80, 8080)]),
    ({"spec": {"ports": [{"$patch": "replace"}, {"name": "dns", "port": 53}]}},
     [("dns", 53, None)]),
])
def test_strategic_merge_of_service_ports(patch: dict[str, Any],
                                          ports: list[tuple[str, int, int | None]]) -> None:
    result = strategic_merge(SVC, patch, "services")
    assert [(p["name"], p["port"], p.get("targetPort")) for p in result["spec"]["ports"]] == ports
    assert result["spec"]["selector"] == {"app": "web"}


def test_strategic_merge_directives_on_maps_and_atomic_lists() -> None:
    replaced = strategic_merge(SVC, {"spec": {"selector": {"$patch": "replace", "x": "y"}}},
                               "services")
    assert replaced["spec"]["selector"] == {"x": "y"}
    deleted = strategic_merge(SVC, {"spec": {"selector": {"$patch": "delete"}}}, "services")
    assert "selector" not in deleted["spec"]
    retained = strategic_merge(SVC, {"spec": {"$retainKeys": ["ports"]}}, "services")
    assert set(retained["spec"]) == {"ports"}
    slice_ = {"endpoints": [{"addresses": ["10.0.0.1"]}, {"addresses": ["10.0.0.2"]}]}
    atomic = strategic_merge(slice_, {"endpoints": [{"addresses": ["10.0.0.3"]}]},
                             "endpointslices")
    assert atomic["endpoints"] == [{"addresses": ["10.0.0.3"]}]  # EndpointSlice lists replace
    with pytest.raises(KubeError):
        strategic_merge(SVC, {"spec": {"ports": [{"name": "no-key"}]}}, "services")
