"""`apiextensions.k8s.io/v1` CustomResourceDefinition objects for the resources served as CRDs.

A real cluster serves ServiceExport and ServiceImport because their CRDs are installed, and
operators (and `kubectl get crd`, `kubectl explain`) look at those objects. The emulator
installs one CRD per custom `ResourceType` at start, built from the same entry that drives
the serving, so what the CRD says (versions, storage version, status subresource, short
names, categories, printer columns) is what is served. The schema is an open object
(`x-kubernetes-preserve-unknown-fields`): the emulator does not validate against the
upstream schema.
"""

from __future__ import annotations

from typing import Any

from sandbox.emulator.resources import ResourceType
from shared.constants import MCS_GROUP

# The upstream MCS CRDs' labels (sigs.k8s.io/mcs-api v0.5.0), which MCS installers look for;
# the About API's CRD has none upstream.
UPSTREAM_LABELS = {
    "multicluster.x-k8s.io/release-version": "v0.5.0",
    "multicluster.x-k8s.io/crd-schema-revision": "0",
}
OPEN_SCHEMA: dict[str, Any] = {
    "openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
}
# The storage version of the MCS CRDs upstream: v1beta1 when served, else v1alpha1.
STORAGE_PREFERENCE = ("v1beta1", "v1alpha1")


def crd_name(rt: ResourceType) -> str:
    return f"{rt.plural}.{rt.group}"


def storage_version(rt: ResourceType) -> str:
    return next((v for v in STORAGE_PREFERENCE if v in rt.versions), rt.versions[0])


def crd_object(rt: ResourceType) -> dict[str, Any]:
    """The CustomResourceDefinition that would make a real apiserver serve `rt`."""
    names: dict[str, Any] = {"plural": rt.plural, "singular": rt.singular, "kind": rt.kind,
                             "listKind": rt.list_kind}
    if rt.short_names:
        names["shortNames"] = list(rt.short_names)
    if rt.categories:
        names["categories"] = list(rt.categories)
    storage = storage_version(rt)
    versions = []
    for version in sorted(rt.versions):  # upstream lists v1alpha1 before v1beta1
        entry: dict[str, Any] = {"name": version, "served": True, "storage": version == storage,
                                 "schema": OPEN_SCHEMA}
        if rt.has_status:
            entry["subresources"] = {"status": {}}
        if rt.printer_columns:
            entry["additionalPrinterColumns"] = [c.crd_form() for c in rt.printer_columns]
        versions.append(entry)
    return {
        "metadata": {"name": crd_name(rt),
                     "labels": dict(UPSTREAM_LABELS) if rt.group == MCS_GROUP else {}},
        "spec": {"group": rt.group, "scope": "Namespaced" if rt.namespaced else "Cluster",
                 "names": names, "versions": versions},
        "status": {
            "acceptedNames": names,
            "storedVersions": [storage],
            "conditions": [
                {"type": "NamesAccepted", "status": "True", "reason": "NoConflicts",
                 "message": "no conflicts found"},
                {"type": "Established", "status": "True", "reason": "InitialNamesAccepted",
                 "message": "the initial names have been accepted"},
            ],
        },
    }
