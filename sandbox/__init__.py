"""mcsync's fleet on one machine: the Kubernetes API emulator and the `mcsync sandbox` launcher.

The emulator started life under `tests/`; it ships now because `mcsync sandbox`
(docs/reference.md#sandbox) runs it as the member clusters of a demo fleet, and operators point
`kubectl` at it. The tests import it from here (`sandbox.emulator`), so what ships is what is
tested.
"""
