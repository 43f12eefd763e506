"""The cluster's identity in KEP-2149's About API (docs/reference.md#export-path), read at start and
kept.

Multi-cluster tools (the CoreDNS `multicluster` plugin, Submariner, Karmada, AWS's MCS
controller) find a cluster's id in the cluster-scoped `ClusterProperty`
`cluster.clusterset.k8s.io` and its clusterset's name in `clusterset.k8s.io`. mcsync takes
part in that agreement instead of keeping an id of its own:

* Start (`resolve_cluster_id`): without `--cluster-id` the id is the property's value; with
  both, they must be equal, since two ids for one cluster would put its endpoints under one
  name in mcsync's `source-cluster` labels and under another in every other tool. Where the
  About API is installed and the property is absent, the agent creates it with its id.
* First heartbeat answer (`ClustersetProperty.observe`): the hub says its clusterset's name
  (`--clusterset-name`); the agent creates `clusterset.k8s.io` with it where it is absent,
  and stops when the property names another clusterset (this cluster belongs elsewhere:
  exporting into the wrong clusterset is worse than not running).
* Values are checked with KEP-2149's rule (`shared.aboutapi.id_problem`); a cluster id must
  also be an mcsync cluster name (a DNS-1123 label), or the hub would refuse it.
* A cluster without the About API is normal: nothing is read or written and `--cluster-id`
  is required.

Every problem is one line (`ClusterIdentityError`, or `ClustersetProperty.fatal`) that names
both values and what to change; `__main__` prints it and exits 2.

Writes are create-only, with a GET first: an existing property is never rewritten, and a
409 (another replica created it first) is read back and compared like a found one.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

import urllib3
from kubernetes import client as k8s

from member.kube.client import ApiException, request_json
from shared.aboutapi import (
    ABOUT_GROUP,
    ABOUT_VERSIONS,
    CLUSTER_ID_PROPERTY,
    CLUSTER_PROPERTY_KIND,
    CLUSTER_PROPERTY_PLURAL,
    CLUSTERSET_PROPERTY,
    id_problem,
)
from shared.models import is_dns1123_label

__all__ = [
    "AboutApi",
    "ClusterIdentityError",
    "ClustersetProperty",
    "resolve_cluster_id",
]

logger = logging.getLogger(__name__)


class ClusterIdentityError(Exception):
    """The cluster's identity cannot be settled; the message is the one line to print."""


class AboutApi:
    """`ClusterProperty` reads and creates at the version the cluster serves, if any."""

    def __init__(self, api: k8s.ApiClient) -> None:
        self._api = api
        self.version = _served_version(api)

    @property
    def installed(self) -> bool:
        return self.version is not None

    def _path(self, name: str = "") -> str:
        base = f"/apis/{ABOUT_GROUP}/{self.version}/{CLUSTER_PROPERTY_PLURAL}"
        return f"{base}/{name}" if name else base

    def read(self, name: str) -> str | None:
        """The property's `spec.value`, or None when it does not exist."""
        try:
            obj = request_json(self._api, "GET", self._path(name))
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise
        return _value(obj)

    @property
    def collection_path(self) -> str:
        """The ClusterProperty collection's path at the served version (installed only)."""
        return self._path()

    def create(self, name: str, value: str) -> str:
        """Create the property unless it exists; answers the value it now holds."""
        body = {"apiVersion": f"{ABOUT_GROUP}/{self.version}", "kind": CLUSTER_PROPERTY_KIND,
                "metadata": {"name": name}, "spec": {"value": value}}
        try:
            created = request_json(self._api, "POST", self._path(), body=body)
        except ApiException as exc:
            if exc.status != 409:
                raise
            found = self.read(name)  # another replica (or tool) was first
            return found if found is not None else value
        logger.info("created ClusterProperty %s = %s", name, value)
        return _value(created)


def _served_version(api: k8s.ApiClient) -> str | None:
    """The preferred served About API version, or None when the group is not served."""
    try:
        group = request_json(api, "GET", f"/apis/{ABOUT_GROUP}")
    except ApiException as exc:
        if exc.status == 404:
            return None
        raise ClusterIdentityError(
            f"cannot tell whether the About API ({ABOUT_GROUP}) is installed: the Kubernetes "
            f"API answered {exc.status} {exc.reason}"
        ) from None
    except (urllib3.exceptions.HTTPError, OSError) as exc:
        raise ClusterIdentityError(
            f"cannot tell whether the About API ({ABOUT_GROUP}) is installed: {exc}"
        ) from None
    served = {str(v.get("version")) for v in (group or {}).get("versions") or []}
    return next((v for v in ABOUT_VERSIONS if v in served), None)


def _value(obj: Any) -> str:
    spec = (obj or {}).get("spec") or {}
    value = spec.get("value")
    return value if isinstance(value, str) else ""


def _cluster_id_problem(value: str) -> str | None:
    problem = id_problem(value)
    if problem is None and not is_dns1123_label(value):
        problem = ("is a KEP-2149 id but not an mcsync cluster name (a DNS-1123 label: "
                   "lower-case letters, digits and '-', at most 63 characters)")
    return problem


def resolve_cluster_id(about: AboutApi, *, given: str | None) -> str:
    """This cluster's id: `--cluster-id` and/or `cluster.clusterset.k8s.io`, which must
    agree; creates the property where the About API is installed and it is absent."""
    try:
        return _resolve(about, given=given)
    except ApiException as exc:
        raise ClusterIdentityError(
            f"cannot read or create ClusterProperty {CLUSTER_ID_PROPERTY}: the Kubernetes API "
            f"answered {exc.status} {exc.reason} (the member chart grants get and create)"
        ) from None
    except (urllib3.exceptions.HTTPError, OSError) as exc:
        raise ClusterIdentityError(
            f"cannot read ClusterProperty {CLUSTER_ID_PROPERTY}: {exc}") from None


def _resolve(about: AboutApi, *, given: str | None) -> str:
    where = f"ClusterProperty {CLUSTER_ID_PROPERTY}"
    if not about.installed:
        if given is None:
            raise ClusterIdentityError(
                "argument --cluster-id: required: this cluster has no About API "
                f"({ABOUT_GROUP}) to read its id from; pass --cluster-id or set "
                "MCSYNC_CLUSTER_ID"
            )
        return given
    stored = about.read(CLUSTER_ID_PROPERTY)
    if stored is not None:
        problem = _cluster_id_problem(stored)
        if problem is not None:
            raise ClusterIdentityError(
                f"{where}: {stored!r} {problem}; correct the property's spec.value"
            )
        if given is not None and given != stored:
            raise ClusterIdentityError(
                f"argument --cluster-id: {given!r} disagrees with {where}, which says "
                f"{stored!r}; give the same id (or leave --cluster-id out)"
            )
        return stored
    if given is None:
        raise ClusterIdentityError(
            f"argument --cluster-id: required: {where} does not exist yet; pass --cluster-id "
            "(the agent then creates the property) or create the property"
        )
    created = about.create(CLUSTER_ID_PROPERTY, given)
    if created != given:
        raise ClusterIdentityError(
            f"argument --cluster-id: {given!r} disagrees with {where}, which says "
            f"{created!r}; give the same id (or leave --cluster-id out)"
        )
    return given


class ClustersetProperty:
    """Keeps `clusterset.k8s.io` equal to the hub's clusterset name (heartbeat answers).

    `observe` runs on the heartbeat thread. It works once per name: after the property is
    found equal or created, the same name costs nothing. A disagreement or an invalid value
    sets `fatal` (the line to print) and calls `on_fatal` (the agent stops); a failed request
    is logged and retried at the next heartbeat.
    """

    def __init__(self, about: AboutApi, *, hub_url: str,
                 on_fatal: Callable[[], None] | None = None) -> None:
        self._about = about
        self._hub_url = hub_url
        self._on_fatal = on_fatal
        self._settled: str | None = None
        self._lock = threading.Lock()
        self.fatal: str | None = None

    def observe(self, clusterset: str | None) -> None:
        if clusterset is None or not self._about.installed:
            return
        with self._lock:
            if self._settled == clusterset or self.fatal is not None:
                return
            try:
                stored = self._about.read(CLUSTERSET_PROPERTY)
                if stored is None:
                    stored = self._about.create(CLUSTERSET_PROPERTY, clusterset)
            except (ApiException, urllib3.exceptions.HTTPError, OSError) as exc:
                logger.warning("cannot read or create ClusterProperty %s (retried at the next "
                               "heartbeat): %s", CLUSTERSET_PROPERTY, exc)
                return
            where = f"ClusterProperty {CLUSTERSET_PROPERTY}"
            problem = id_problem(stored)
            if problem is not None:
                self._stop(f"{where}: {stored!r} {problem}; correct the property's spec.value")
            elif stored != clusterset:
                self._stop(
                    f"{where} says this cluster belongs to clusterset {stored!r}, but the hub "
                    f"at {self._hub_url} serves clusterset {clusterset!r}; point the agent at "
                    "its own clusterset's hub or correct the property"
                )
            else:
                self._settled = clusterset

    def _stop(self, line: str) -> None:
        self.fatal = line
        logger.error("%s", line)
        if self._on_fatal is not None:
            self._on_fatal()
