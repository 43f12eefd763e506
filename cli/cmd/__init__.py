"""The commands of `mcsync`, one module each (kubectl's `pkg/cmd/<verb>`): each declares
its words, help, flags, the settings it reads and its run function in a `Spec` (its
`COMMAND`, or `COMMANDS` where one module holds several), and a list command its table as
a list of columns (`cli.columns`). `COMMANDS` is their order in
`mcsync --help`; `cli.args` builds the parser from it and `cli.dispatch` runs from it.
"""

from __future__ import annotations

from cli.cmd import (
    clusteradmin,
    clusters,
    completion,
    config,
    conflicts,
    endpoints,
    exports,
    get,
    imports,
    sandbox,
    status,
    version,
)
from cli.cmd.spec import Spec

COMMANDS: tuple[Spec, ...] = (
    clusters.COMMAND,
    *clusteradmin.COMMANDS,
    exports.COMMAND,
    imports.COMMAND,
    endpoints.COMMAND,
    conflicts.COMMAND,
    version.COMMAND,
    get.COMMAND,
    config.COMMAND,
    completion.COMMAND,
    status.COMMAND,
    *sandbox.COMMANDS,
)
BY_NAME: dict[str, Spec] = {spec.name: spec for spec in COMMANDS}
