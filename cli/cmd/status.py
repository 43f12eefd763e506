"""`mcsync status`: the fleet at a glance; the page is `cli.status`'s."""

from __future__ import annotations

from cli import status
from cli.cmd.spec import Spec

COMMAND = Spec(
    "status",
    "the fleet at a glance: hub, token, database, clusters by state, exports, conflicts, "
    "imports; exit 1 when something needs attention",
    status.status,
)
