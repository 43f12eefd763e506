"""The agent's reconcilers: one per file, each a `reconcile(key)` that reads top to bottom.

`export.ExportReconciler` is the only one today: ServiceExport + Service + the hub's record
of one "namespace/name" key → the hub's record and the ServiceExport's status agree.
"""

from member.reconcilers.export import ExportReconciler, NotLeading

__all__ = ["ExportReconciler", "NotLeading"]
