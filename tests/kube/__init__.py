"""Kubernetes API emulator fixtures for mcsync tests, and the emulator's own tests.

The member agent talks to Kubernetes only through the official `kubernetes` client over
HTTP. Rather than mocking that client, tests point it at `sandbox.emulator` (shipped,
since `mcsync sandbox` runs it): a small, real HTTP server that honours the API semantics
the agent relies on (resourceVersions, watches, finalizers, status subresources, 409/410
answers). Use it through the fixtures in `tests.kube.fixtures`.
"""
