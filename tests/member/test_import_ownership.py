"""Ownership by uid chain, derived names that never collide, and per-object isolation in
the import reconcilers (docs/reference.md#export-path, #import-path), against the fakes of
`test_import_reconcilers`: one row per outcome.

* A foreign object — one carrying mcsync's labels but no ownerReference to our owner, or
  none of our labels — is never updated, adopted or deleted; it gets one Warning Event,
  and when it is in the way the key completes as soon as it goes (its event queues the
  key: `InTheWay.cleared`).
* `s84a58` and `s255c6d` share the first 10 hex characters of SHA-256: imported together
  they get two derived Services and two ClusterSetIPs, settle in a bounded number of
  writes, and withdrawing one leaves the other as it was.
* A mirrored slice the API server refuses holds up no other slice of its key.
"""

from __future__ import annotations

import hashlib
import itertools
from collections.abc import Callable
from typing import Any

import pytest
from kubernetes.client.exceptions import ApiException

from member.imports.importfeed import feed_entry, import_item_key
from member.imports.importspec import (
    derived_service_name,
    derived_service_names,
    mirrored_slice_name,
)
from member.imports.mirroredslices import SliceWriteErrors
from shared.models import EndpointSliceExport, ServiceImport
from tests.member.test_import_reconcilers import KEY, World, hub_import, hub_slice

MANAGED = {"app.kubernetes.io/managed-by": "mcsync"}
NAMES = derived_service_names("hello")
M1 = mirrored_slice_name("hello", "a", "hello-1")
M2 = mirrored_slice_name("hello", "b", "hello-2")
# Two Service names whose derived names collide at 10 hex characters (40 bits).
A, B = "s84a58", "s255c6d"
_rv = itertools.count(1000)


@pytest.fixture
def world() -> World:
    return World()


def test_the_two_names_really_collide_at_ten_hex_characters() -> None:
    digest = {n: hashlib.sha256(n.encode()).hexdigest() for n in (A, B)}
    assert digest[A][:10] == digest[B][:10] and digest[A][:20] != digest[B][:20]
    assert derived_service_name(A) == derived_service_name(B)
    assert [len(n) for n in derived_service_names(A)] == [17, 27, 63]


def _put(cache: Any, kind: str, name: str, **metadata: Any) -> dict[str, Any]:
    obj = {
        "apiVersion": "v1" if kind == "Service" else "discovery.k8s.io/v1",
        "kind": kind,
        "metadata": {
            "name": name,
            "namespace": "demo",
            "uid": f"theirs-{name}",
            "resourceVersion": str(next(_rv)),
            **metadata,
        },
    }
    obj["spec" if kind == "Service" else "endpoints"] = {} if kind == "Service" else []
    cache.items[f"demo/{name}"] = obj
    return obj


def _labelled_service(world: World, name: str, **metadata: Any) -> dict[str, Any]:
    labels = {**MANAGED, "multicluster.kubernetes.io/service-name": "hello"}
    return _put(world.services, "Service", name, labels=labels, **metadata)


def _labelled_slice(world: World, name: str) -> dict[str, Any]:
    """A slice carrying every label a mirrored slice of demo/hello has, and no owner."""
    labels = {
        **MANAGED,
        "multicluster.kubernetes.io/service-name": "hello",
        "kubernetes.io/service-name": NAMES[0],
        "endpointslice.kubernetes.io/managed-by": "mcsync.io",
    }
    obj = _put(world.slices, "EndpointSlice", name, labels=labels)
    world.index.observe(None, obj)
    return obj


def _gone(world: World, cache: Any, kind: str, name: str) -> list[str]:
    """Its owner deletes a foreign object: the informer event's keys to queue again."""
    obj = cache.items.pop(f"demo/{name}")
    if kind == "EndpointSlice":
        world.index.observe(obj, None)
        world.changed.mark(KEY, None)
    return sorted(world.in_the_way.cleared(kind, obj))


def _derived(world: World, key: str = KEY) -> dict[str, Any] | None:
    return world.svc._derived.ours(key, world.imports.get(key))


def _import(world: World) -> None:
    world.feed(hub_import())
    world.feed(hub_slice("hello-1", "10.0.0.1"))
    world.feed(hub_slice("hello-2", "10.0.0.2", cluster="b"))


# -- foreign objects: left alone, warned about once, and the way cleared -------------------


def _service_with_our_labels_on_the_name(world: World) -> tuple[Any, str, str]:
    _labelled_service(world, NAMES[0])
    return world.services, "Service", NAMES[0]


def _users_service_on_the_name(world: World) -> tuple[Any, str, str]:
    _put(world.others, "Service", NAMES[0])
    return world.others, "Service", NAMES[0]


@pytest.mark.parametrize(
    "in_the_way",
    [
        pytest.param(_service_with_our_labels_on_the_name, id="our labels, no owner"),
        pytest.param(_users_service_on_the_name, id="a user's Service"),
    ],
)
def test_a_foreign_service_on_the_derived_name_is_left_alone_and_the_next_name_taken(
    world: World, in_the_way: Callable[[World], tuple[Any, str, str]]
) -> None:
    cache, _, name = in_the_way(world)
    before = dict(cache.items[f"demo/{name}"])
    _import(world)
    writes = world.converge()
    assert ("Service", "delete") not in writes and ("Service", "update") not in writes
    assert cache.items[f"demo/{name}"] == before  # untouched
    ours = _derived(world)
    assert ours is not None and ours["metadata"]["name"] == NAMES[1]
    si = world.imports.get(KEY)
    assert si is not None and si["spec"]["ips"] == ours["spec"]["clusterIPs"]
    name_a = mirrored_slice_name("hello", "a", "hello-1", derived=NAMES[1])
    mirrored = world.slices.get(f"demo/{name_a}")
    assert mirrored is not None
    assert mirrored["metadata"]["labels"]["kubernetes.io/service-name"] == NAMES[1]
    assert mirrored["metadata"]["ownerReferences"][0]["uid"] == ours["metadata"]["uid"]
    assert world.events.recorded == [("Warning", "DerivedServiceNameTaken")]
    assert world.events.about[0][:2] == ("Service", name)
    assert world.converge() == []  # settled: no more writes, no second Event
    assert len(world.events.recorded) == 1


def _restarted(world: World) -> World:
    """A new agent over the same cluster and hub: fresh reconcilers, nothing remembered."""
    fresh = World()
    for name in ("imports", "services", "slices", "others", "namespaces"):
        getattr(fresh, name).items = getattr(world, name).items
    for obj in world.hub.items.values():
        fresh.feed(obj)
    for obj in world.slices.items.values():
        fresh.index.observe(None, obj)
    return fresh


def test_a_restarted_agent_keeps_the_longer_name_once_the_way_is_clear(world: World) -> None:
    _labelled_service(world, NAMES[0])
    _import(world)
    world.converge()
    ips = world.imports.items[KEY]["spec"]["ips"]
    del world.services.items[f"demo/{NAMES[0]}"]  # the foreign Service goes
    fresh = _restarted(world)
    assert fresh.converge() == []  # nothing moves back to the shorter name
    ours = _derived(fresh)
    assert ours is not None and ours["metadata"]["name"] == NAMES[1]
    assert fresh.imports.items[KEY]["spec"]["ips"] == ips


def test_every_name_taken_the_key_waits_and_completes_when_one_goes(world: World) -> None:
    for name in NAMES:
        _put(world.others, "Service", name)
    _import(world)
    assert world.converge() == [("ServiceImport", "create"), ("ServiceImport", "status")]
    assert _derived(world) is None
    assert sorted(r for _, r in world.events.recorded) == ["DerivedServiceNameTaken"] * 3
    world.converge()
    assert len(world.events.recorded) == 3  # once per object, not per retry
    assert _gone(world, world.others, "Service", NAMES[1]) == [KEY]
    writes = world.converge()
    assert ("Service", "create") in writes and ("EndpointSlice", "create") in writes
    ours = _derived(world)
    assert ours is not None and ours["metadata"]["name"] == NAMES[1]


def test_an_orphan_of_ours_is_left_to_the_garbage_collector_without_a_warning(
    world: World,
) -> None:
    """Our ServiceImport was deleted and made again: the derived Service that named the old
    one is the garbage collector's; the key waits for it, on its own name, no Event."""
    _labelled_service(
        world,
        NAMES[0],
        ownerReferences=[
            {"apiVersion": "multicluster.x-k8s.io/v1beta1", "kind": "ServiceImport",
             "name": "hello", "uid": "an-earlier-one", "controller": True}
        ],
    )
    _import(world)
    writes = world.converge()
    assert [w for w in writes if w[0] != "ServiceImport"] == []
    assert world.events.recorded == []
    assert _gone(world, world.services, "Service", NAMES[0]) == [KEY]
    world.converge()
    ours = _derived(world)
    assert ours is not None and ours["metadata"]["name"] == NAMES[0]


@pytest.mark.parametrize(
    ("name", "blocked"),
    [
        pytest.param(M1, True, id="on a mirrored slice's name: that slice waits"),
        pytest.param(f"{NAMES[0]}-0123456789", False, id="elsewhere: not deleted"),
    ],
)
def test_a_slice_with_our_labels_and_no_owner_is_left_alone(
    world: World, name: str, blocked: bool
) -> None:
    _labelled_slice(world, name)
    before = dict(world.slices.items[f"demo/{name}"])
    _import(world)
    writes = world.converge()
    assert ("EndpointSlice", "delete") not in writes
    assert world.slices.items[f"demo/{name}"] == before
    assert f"demo/{M2}" in world.slices.items  # the other source's slice is mirrored
    assert world.events.recorded == [("Warning", "EndpointSliceNotManaged")]
    assert world.events.about[0][:2] == ("EndpointSlice", name)
    assert world.converge() == [] and len(world.events.recorded) == 1
    if blocked:
        assert _gone(world, world.slices, "EndpointSlice", name) == [KEY]
        assert world.writes_of(world.eps.reconcile) == [("EndpointSlice", "create")]
        ours = world.slices.items[f"demo/{M1}"]
        assert ours["metadata"]["ownerReferences"][0]["uid"] == _derived(world)["metadata"]["uid"]  # type: ignore[index]


def test_a_slice_of_ours_whose_labels_were_edited_is_repaired_not_recreated(
    world: World,
) -> None:
    _import(world)
    world.converge()
    mine = world.slices.items[f"demo/{M1}"]
    world.index.observe(mine, None)  # its service-name label no longer names the key
    mine["metadata"] = {**mine["metadata"], "labels": {**MANAGED}, "resourceVersion": "1"}
    world.changed.mark(KEY, None)
    assert world.writes_of(world.eps.reconcile) == [("EndpointSlice", "update")]
    assert world.events.recorded == []


# -- per-object isolation ------------------------------------------------------------------


def test_a_slice_the_api_server_refuses_holds_up_no_other(world: World) -> None:
    refused = world.eps._writer.refuse  # type: ignore[attr-defined]
    refused[M1] = ApiException(status=422, reason="Unprocessable Entity")
    _import(world)
    for reconciler in (world.si, world.svc, world.si):
        reconciler.reconcile(KEY)
    with pytest.raises(SliceWriteErrors) as failed:
        world.eps.reconcile(KEY)
    assert list(failed.value.failures) == [M1]
    assert f"demo/{M2}" in world.slices.items  # written, though M1 sorts first
    assert f"demo/{M1}" not in world.slices.items
    # Another source's change is written while the refused slice is still refused.
    world.feed(hub_slice("hello-2", "10.0.0.9", cluster="b"))
    assert world.writes_of(world.eps.reconcile) == [("EndpointSlice", "update")]
    # Once the API server takes it, the retry (the whole key) writes that slice alone.
    del refused[M1]
    assert world.writes_of(world.eps.reconcile) == [("EndpointSlice", "create")]


# -- derived-name collisions ---------------------------------------------------------------


def _hub_import_of(name: str) -> dict[str, Any]:
    return feed_entry(
        ServiceImport.model_validate(
            {
                "metadata": {"name": name, "namespace": "demo", "resourceVersion": str(next(_rv))},
                "spec": {"type": "ClusterSetIP", "ports": [{"name": "http", "port": 80}]},
                "status": {
                    "clusters": [{"cluster": "a"}],
                    "ports": [{"name": "http", "port": 80, "clusters": ["a"]}],
                },
            }
        )
    )


def _hub_slice_of(name: str, address: str) -> dict[str, Any]:
    return feed_entry(
        EndpointSliceExport.model_validate(
            {
                "metadata": {
                    "name": f"{name}-1",
                    "namespace": "demo",
                    "resourceVersion": str(next(_rv)),
                },
                "spec": {
                    "serviceName": name,
                    "clusterId": "a",
                    "addressType": "IPv4",
                    "ports": [{"name": "http", "port": 8080}],
                    "endpoints": [{"addresses": [address], "conditions": {"ready": True}}],
                },
            }
        )
    )


def _feed(world: World, obj: dict[str, Any] | None, *, delete: str | None = None) -> None:
    if obj is not None:
        key = import_item_key(obj)
        world.view.observe(world.hub.items.get(key), obj)
        world.hub.items[key] = obj
    if delete is not None:
        world.view.observe(world.hub.items.pop(delete), None)


def _converge(world: World, keys: list[str]) -> list[tuple[str, str]]:
    start = len(world.calls)
    for _ in range(6):
        before = len(world.calls)
        for key in keys:
            for reconciler in (world.si, world.svc, world.si, world.eps):
                reconciler.reconcile(key)
        if len(world.calls) == before:
            return world.calls[start:]
    pytest.fail(f"no steady state after 6 rounds: {world.calls[start:]}")


@pytest.mark.parametrize("first", [A, B], ids=["s84a58 first", "s255c6d first"])
def test_colliding_names_get_two_derived_services_and_keep_them(world: World, first: str) -> None:
    second = B if first == A else A
    keys = [f"demo/{first}", f"demo/{second}"]
    for name, address in ((first, "10.0.0.1"), (second, "10.0.0.2")):
        _feed(world, _hub_import_of(name))
        _feed(world, _hub_slice_of(name, address))
    writes = _converge(world, keys)
    assert len(writes) == 12  # six per key, as for any key: no ping-pong
    services = {k: _derived(world, k) for k in keys}
    assert services[keys[0]]["metadata"]["name"] == derived_service_names(first)[0]  # type: ignore[index]
    assert services[keys[1]]["metadata"]["name"] == derived_service_names(second)[1]  # type: ignore[index]
    ips = {k: world.imports.items[k]["spec"]["ips"] for k in keys}
    assert ips[keys[0]] != ips[keys[1]]
    for key, address in zip(keys, ("10.0.0.1", "10.0.0.2"), strict=True):
        service = services[key]
        assert service is not None
        (mirrored,) = world.index.objects(key).values()
        assert mirrored["metadata"]["labels"]["kubernetes.io/service-name"] == (
            service["metadata"]["name"]
        )
        assert mirrored["metadata"]["ownerReferences"][0]["uid"] == service["metadata"]["uid"]
        assert mirrored["endpoints"].unpack()[0]["addresses"] == [address]
    assert world.events.recorded == []  # another key's derived Service is no foreign object

    # The first is withdrawn: the second keeps its Service, name and ClusterSetIP.
    kept = services[keys[1]]
    _feed(world, None, delete=import_item_key(_hub_slice_of(first, "10.0.0.1")))
    _feed(world, None, delete=keys[0])
    start = len(world.calls)
    for reconciler in (world.eps, world.svc, world.si):  # dependents first, while ours
        reconciler.reconcile(keys[0])
    writes = world.calls[start:]
    assert sorted(writes) == [
        ("EndpointSlice", "delete"),
        ("Service", "delete"),
        ("ServiceImport", "delete"),
    ]
    assert _converge(world, keys) == []
    assert _derived(world, keys[1]) == kept
    assert world.imports.items[keys[1]]["spec"]["ips"] == ips[keys[1]]
