"""The verbs (create, get, list, update, patch, delete) with Kubernetes' rules.

This is the generic apiserver registry in miniature, over `Store`:
- server-set metadata (uid, creationTimestamp, resourceVersion, generation) that clients
  cannot overwrite;
- `generation` starts at 1 and is bumped only when something other than metadata and
  status changes (and once when graceful deletion starts, as `rest.BeforeDelete` does);
- the status subresource: the main endpoint keeps the stored `.status`, the `/status`
  endpoint changes only `.status`;
- optimistic concurrency: a stale `metadata.resourceVersion` on update/patch is a 409;
- finalizers: DELETE of an object with finalizers only sets deletionTimestamp; emptying
  the finalizers of such an object deletes it; no new finalizers once deletion started;
- an update that changes nothing writes nothing (no new resourceVersion, no event);
- namespaces: a namespaced create needs its Namespace (404 `namespaces "x" not found`,
  403 while it terminates); DELETE of a Namespace only marks it Terminating, and the
  garbage collector (`collector.py`) empties and then removes it;
- a Service's cluster IPs are freed when it is deleted or gives them up.
Objects returned here are the stored form; `app.py` stamps the requested apiVersion.
"""

from __future__ import annotations

import base64
import binascii
import copy
import json
import secrets
import threading
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sandbox.emulator import errors
from sandbox.emulator.allocator import Allocator
from sandbox.emulator.errors import KubeError
from sandbox.emulator.patch import apply_patch
from sandbox.emulator.resources import NAMESPACES, ResourceType
from sandbox.emulator.selectors import FieldSelector, LabelSelector
from sandbox.emulator.store import Obj, ObjKey, Store
from sandbox.emulator.strategies import prepare, validate_name, validate_namespace

SERVER_META = ("uid", "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds",
               "generation")
_NAME_SUFFIX_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"


def rfc3339_now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _content(obj: Obj) -> Obj:
    """What `generation` tracks: everything but metadata, status and type info."""
    return {k: v for k, v in obj.items() if k not in ("metadata", "status", "apiVersion", "kind")}


def _cluster_ips(obj: Obj | None) -> list[str]:
    ips = ((obj or {}).get("spec") or {}).get("clusterIPs") or []
    return [ip for ip in ips if isinstance(ip, str) and ip and ip != "None"]


def _without_rv(obj: Obj) -> Obj:
    out = copy.deepcopy(obj)
    out.get("metadata", {}).pop("resourceVersion", None)
    out.pop("apiVersion", None)
    out.pop("kind", None)
    return out


@dataclass(frozen=True)
class ListPage:
    items: list[Obj]
    resource_version: int
    continue_token: str | None
    remaining: int | None


class Registry:
    """Kubernetes verb semantics over one `Store`."""

    def __init__(self, store: Store, *, clock: Callable[[], str] = rfc3339_now) -> None:
        self.store = store
        self.clock = clock
        self.allocator = Allocator()
        self._injected: Counter[ObjKey] = Counter()
        # The keys of the objects that name a uid among their owners (the garbage
        # collector's index, installed by it), for `propagationPolicy: Orphan`.
        self.dependents: Callable[[str], list[ObjKey]] = lambda uid: []
        self._inject_lock = threading.Lock()

    @staticmethod
    def key(rt: ResourceType, namespace: str | None, name: str) -> ObjKey:
        return (rt.storage_key, (namespace or "") if rt.namespaced else "", name)

    def _check_namespace(self, rt: ResourceType, namespace: str, name: str) -> None:
        """A namespaced create needs its Namespace, and one that is not terminating."""
        ns = self.store.get(self.key(NAMESPACES, None, namespace))
        if ns is None:
            raise errors.not_found(NAMESPACES.plural, NAMESPACES.group, namespace)
        if ns["metadata"].get("deletionTimestamp"):
            raise errors.namespace_terminating(rt.plural, rt.group, name, namespace)

    def finalize_namespace(self, name: str) -> bool:
        """Remove a terminating Namespace once nothing is left in it (the namespace
        controller's last step); answers whether it is gone."""
        key = self.key(NAMESPACES, None, name)
        with self.store.transaction():
            ns = self.store.get(key)
            if ns is None:
                return True
            if not ns["metadata"].get("deletionTimestamp") or self.store.keys_in_namespace(name):
                return False
            self.store.commit("DELETED", key, ns, ns)
            return True

    def _committed(self, rt: ResourceType, old: Obj | None, new: Obj | None) -> None:
        """Free the cluster IPs a Service gave up (deleted, downgraded, made ExternalName)."""
        if rt.plural == "services":
            kept = set(_cluster_ips(new))
            self.allocator.release([ip for ip in _cluster_ips(old) if ip not in kept])

    # -- test hooks ----------------------------------------------------------------------

    def inject_conflict(self, rt: ResourceType, namespace: str | None, name: str,
                        times: int = 1) -> None:
        """The next `times` updates/patches (main or status) of the object answer 409."""
        with self._inject_lock:
            self._injected[self.key(rt, namespace, name)] += times

    def _take_injected(self, key: ObjKey) -> bool:
        with self._inject_lock:
            if self._injected[key] > 0:
                self._injected[key] -= 1
                return True
            return False

    # -- read ----------------------------------------------------------------------------

    def get(self, rt: ResourceType, namespace: str | None, name: str) -> Obj:
        obj = self.store.get(self.key(rt, namespace, name))
        if obj is None:
            raise errors.not_found(rt.plural, rt.group, name)
        return obj

    def list(
        self,
        rt: ResourceType,
        namespace: str | None,
        *,
        labels: LabelSelector,
        fields: FieldSelector,
        limit: int | None = None,
        continue_token: str | None = None,
    ) -> ListPage:
        items, rv = self.store.list_objects(rt.storage_key, namespace)
        items = [o for o in items if labels.matches(o) and fields.matches(o)]
        if continue_token:
            list_rv, start = _decode_continue(continue_token)
            if list_rv < self.store.compacted_rv:
                raise errors.expired(
                    "The provided continue parameter is too old to display a consistent list "
                    "result. You can start a new list without the continue parameter."
                )
            rv = list_rv  # pages of one list report the first page's resourceVersion
            items = [o for o in items if _sort_key(o) > start]
        if limit and limit > 0 and len(items) > limit:
            page = copy.deepcopy(items[:limit])
            token = _encode_continue(rv, _sort_key(page[-1]))
            remaining = len(items) - limit if labels.empty and fields.empty else None
            return ListPage(page, rv, token, remaining)
        return ListPage(copy.deepcopy(items), rv, None, None)

    # -- create --------------------------------------------------------------------------

    def create(self, rt: ResourceType, namespace: str | None, body: Any) -> Obj:
        obj = _require_object(body)
        obj.pop("apiVersion", None)  # stored version-free; the response names the version
        obj.pop("kind", None)
        meta = obj["metadata"]
        if meta.get("namespace") and namespace and meta["namespace"] != namespace:
            raise errors.bad_request("the namespace of the provided object does not match "
                                     "the namespace sent on the request")
        if meta.get("resourceVersion"):
            raise errors.bad_request("resourceVersion should not be set on objects to be "
                                     "created")
        if not meta.get("name"):
            if not meta.get("generateName"):
                raise errors.invalid(rt.kind, rt.group, "", "metadata.name",
                                     "Required value: name or generateName is required")
            meta["name"] = meta["generateName"] + "".join(
                secrets.choice(_NAME_SUFFIX_ALPHABET) for _ in range(5)
            )
        name = meta["name"]
        validate_name(rt, name)
        if rt.namespaced:
            assert namespace is not None
            validate_namespace(rt, name, namespace)
            meta["namespace"] = namespace
        else:
            meta.pop("namespace", None)
        for fld in SERVER_META:
            meta.pop(fld, None)
        meta["uid"] = str(uuid.uuid4())
        meta["creationTimestamp"] = self.clock()
        if rt.tracks_generation:
            meta["generation"] = 1
        if rt.has_status:
            obj.pop("status", None)  # status is written only through /status
        key = self.key(rt, namespace, name)
        with self.store.transaction():
            if rt.namespaced:
                assert namespace is not None
                self._check_namespace(rt, namespace, name)
            if self.store.get(key) is not None:
                raise errors.already_exists(rt.plural, rt.group, name)
            prepare(rt, obj, None, self.allocator)
            return self.store.commit("ADDED", key, obj, None)

    # -- update and patch ----------------------------------------------------------------

    def update(self, rt: ResourceType, namespace: str | None, name: str, body: Any, *,
               status: bool = False) -> Obj:
        obj = _require_object(body)
        meta = obj["metadata"]
        if meta.get("name", name) != name:
            raise errors.bad_request(
                f"the name of the object ({meta.get('name')}) does not match the name on "
                f"the URL ({name})"
            )
        if rt.namespaced and namespace and meta.get("namespace", namespace) != namespace:
            raise errors.bad_request("the namespace of the provided object does not match "
                                     "the namespace sent on the request")
        key = self.key(rt, namespace, name)
        with self.store.transaction():
            old = self.get(rt, namespace, name)
            self._check_preconditions(rt, key, name, old, meta.get("resourceVersion"))
            return self._write(rt, key, old, obj, status=status)

    def patch(self, rt: ResourceType, namespace: str | None, name: str, patch: Any,
              content_type: str, *, api_version: str, status: bool = False) -> Obj:
        key = self.key(rt, namespace, name)
        with self.store.transaction():
            old = self.get(rt, namespace, name)
            # Patch the object as the client sees it (its apiVersion and kind included).
            current = {"apiVersion": api_version, "kind": rt.kind, **old}
            patched = apply_patch(current, patch, content_type, custom=rt.custom,
                                  plural=rt.plural)
            if not isinstance(patched.get("metadata"), dict):
                raise errors.bad_request("the patch removed metadata")
            # A resourceVersion in the patch is a precondition, like one in an update body.
            self._check_preconditions(rt, key, name, old,
                                      patched["metadata"].get("resourceVersion"))
            patched["metadata"]["name"] = name
            if namespace and rt.namespaced:
                patched["metadata"]["namespace"] = namespace
            return self._write(rt, key, old, patched, status=status)

    def _check_preconditions(self, rt: ResourceType, key: ObjKey, name: str, old: Obj,
                             rv: Any) -> None:
        if self._take_injected(key):
            raise errors.conflict(rt.plural, rt.group, name)
        if rv not in (None, "") and str(rv) != old["metadata"]["resourceVersion"]:
            raise errors.conflict(rt.plural, rt.group, name)

    def _write(self, rt: ResourceType, key: ObjKey, old: Obj, obj: Obj, *, status: bool) -> Obj:
        """Merge server-owned parts of `old` into `obj`, validate, and commit if changed."""
        obj.pop("apiVersion", None)
        obj.pop("kind", None)
        if status:
            # /status: only .status comes from the client; everything else stays.
            new = copy.deepcopy(old)
            if obj.get("status") is None:
                new.pop("status", None)
            else:
                new["status"] = obj["status"]
        else:
            new = obj
            meta = new["metadata"]
            for fld in SERVER_META:
                if fld in old["metadata"]:
                    meta[fld] = old["metadata"][fld]
                else:
                    meta.pop(fld, None)
            if rt.has_status:
                if "status" in old:
                    new["status"] = copy.deepcopy(old["status"])
                else:
                    new.pop("status", None)
            self._check_finalizers(rt, old, new)
            prepare(rt, new, old, self.allocator)
            if rt.tracks_generation and _content(new) != _content(old):
                meta["generation"] = int(old["metadata"].get("generation") or 0) + 1
        new["metadata"]["resourceVersion"] = old["metadata"]["resourceVersion"]
        if _without_rv(new) == _without_rv(old):
            return old  # nothing changed: no write, no new resourceVersion, no event
        if new["metadata"].get("deletionTimestamp") and not new["metadata"].get("finalizers"):
            # The last finalizer is gone: the object is deleted now. The DELETED event
            # carries the last stored state, as etcd's delete event does.
            self.store.commit("DELETED", key, old, old)
            self._committed(rt, old, None)
            new["metadata"]["resourceVersion"] = str(self.store.resource_version)
            return new
        stored = self.store.commit("MODIFIED", key, new, old)
        self._committed(rt, old, stored)
        return stored

    @staticmethod
    def _check_finalizers(rt: ResourceType, old: Obj, new: Obj) -> None:
        if not old["metadata"].get("deletionTimestamp"):
            return
        before = set(old["metadata"].get("finalizers") or [])
        added = [f for f in new["metadata"].get("finalizers") or [] if f not in before]
        if added:
            listed = ", ".join(f'"{f}"' for f in added)
            raise errors.invalid(
                rt.kind, rt.group, old["metadata"]["name"], "metadata.finalizers",
                f"Forbidden: no new finalizers can be added if the object is being deleted, "
                f"found new finalizers []string{{{listed}}}",
            )

    # -- delete --------------------------------------------------------------------------

    def _orphan(self, uid: str) -> None:
        """Drop the ownerReferences to `uid` from its dependents, so they outlive it."""
        for key in self.dependents(uid):
            obj = self.store.get(key)
            if obj is None:
                continue
            new = copy.deepcopy(obj)
            kept = [r for r in new["metadata"].get("ownerReferences") or []
                    if not (isinstance(r, dict) and r.get("uid") == uid)]
            if kept:
                new["metadata"]["ownerReferences"] = kept
            else:
                new["metadata"].pop("ownerReferences", None)
            self.store.commit("MODIFIED", key, new, obj)

    def delete(self, rt: ResourceType, namespace: str | None, name: str,
               options: Any = None) -> tuple[Obj, bool]:
        """Delete or start deleting; answers (object, deleted now?)."""
        key = self.key(rt, namespace, name)
        preconditions: dict[str, Any] = {}
        if isinstance(options, dict) and isinstance(options.get("preconditions"), dict):
            preconditions = options["preconditions"]
        with self.store.transaction():
            old = self.get(rt, namespace, name)
            want_rv = preconditions.get("resourceVersion")
            want_uid = preconditions.get("uid")
            if want_uid and want_uid != old["metadata"]["uid"]:
                raise KubeError(
                    409, "Conflict", f"Precondition failed: UID in precondition: {want_uid}, "
                    f"UID in object meta: {old['metadata']['uid']}", name=name, group=rt.group,
                    kind=rt.plural)
            if want_rv and want_rv != old["metadata"]["resourceVersion"]:
                raise KubeError(
                    409, "Conflict", f"Precondition failed: ResourceVersion in precondition: "
                    f"{want_rv}, ResourceVersion in object meta: "
                    f"{old['metadata']['resourceVersion']}", name=name, group=rt.group,
                    kind=rt.plural)
            finalized_by_controller = rt is NAMESPACES and (old.get("spec") or {}).get(
                "finalizers")
            if _orphans(options):
                self._orphan(old["metadata"]["uid"])
            if old["metadata"].get("finalizers") or finalized_by_controller:
                if old["metadata"].get("deletionTimestamp"):
                    return old, False  # already being deleted: nothing to do
                new = copy.deepcopy(old)
                new["metadata"]["deletionTimestamp"] = self.clock()
                new["metadata"]["deletionGracePeriodSeconds"] = 0
                if rt.tracks_generation and new["metadata"].get("generation"):
                    new["metadata"]["generation"] += 1  # as rest.BeforeDelete does
                if rt is NAMESPACES:
                    new["status"] = {**(new.get("status") or {}), "phase": "Terminating"}
                return self.store.commit("MODIFIED", key, new, old), False
            self.store.commit("DELETED", key, old, old)
            self._committed(rt, old, None)
            deleted = copy.deepcopy(old)
            deleted["metadata"]["resourceVersion"] = str(self.store.resource_version)
            return deleted, True


def _orphans(options: Any) -> bool:
    """DeleteOptions asking to orphan the dependents (`propagationPolicy: Orphan`, or the
    older `orphanDependents: true`)."""
    if not isinstance(options, dict):
        return False
    return options.get("propagationPolicy") == "Orphan" or options.get(
        "orphanDependents") is True


def _require_object(body: Any) -> Obj:
    if not isinstance(body, dict):
        raise errors.bad_request("the request body must be a JSON object")
    body = copy.deepcopy(body)
    meta = body.get("metadata")
    if meta is None:
        body["metadata"] = {}
    elif not isinstance(meta, dict):
        raise errors.bad_request("metadata must be an object")
    return body


def _sort_key(obj: Obj) -> str:
    meta = obj.get("metadata") or {}
    return f"{meta.get('namespace', '')}/{meta.get('name', '')}"


def _encode_continue(rv: int, start: str) -> str:
    raw = json.dumps({"v": "emulator/v1", "rv": rv, "start": start}).encode()
    return base64.urlsafe_b64encode(raw).decode()


def _decode_continue(token: str) -> tuple[int, str]:
    try:
        data = json.loads(base64.urlsafe_b64decode(token.encode()))
        return int(data["rv"]), str(data["start"])
    except (binascii.Error, ValueError, KeyError, TypeError) as exc:
        raise errors.bad_request(f"invalid continue token: {exc}") from exc
