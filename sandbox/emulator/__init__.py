"""A Kubernetes API emulator that the official `kubernetes` client talks to unchanged.

Modules, one idea each:
- `resources` — which resources are served and how each behaves (flags, not branches);
- `store` — objects, the global resourceVersion counter, bounded event history, fan-out;
- `registry` — the verbs with Kubernetes' rules (preconditions, generation, status
  subresource, finalizers, namespaces); `strategies` — per-kind defaulting/validation;
  `allocator` — cluster IPs per IP family and node ports;
- `collector` — kube-controller-manager's garbage collector (ownerReferences) and
  namespace controller, on a background thread; `crds` — the CRD objects of the custom
  resources served;
- `tables` — server-side printing (`kubectl get`); `openapi` — `/openapi/v3` for kubectl;
- `selectors`, `patch` — label/field selectors, merge/JSON patches; `strategic` —
  strategic merge patches of the built-ins;
- `watch` — NDJSON watch streams (replay, live, bookmarks, 410 Expired);
- `discovery` — `/api`, `/apis`, `/version`; `app` — the ASGI app and `/emulator/…`
  controls; `state` — one cluster's state plus test controls;
- `server` — uvicorn in a thread; `__main__` — the same as a process.
"""

from sandbox.emulator.server import EmulatorServer
from sandbox.emulator.state import EmulatorState, RequestRecord

__all__ = ["EmulatorServer", "EmulatorState", "RequestRecord"]
