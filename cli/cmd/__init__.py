"""The commands of `mcsync`, one module each (kubectl's `pkg/cmd/<verb>`): each declares
its words, help, flags, the settings it reads and its run function in a `Spec`, and a list
command its table as a list of columns (`cli.columns`). `COMMANDS` is their order in
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
    clusters.DECLARED,
    clusteradmin.REGISTER,
    clusteradmin.SET_SCOPE,
    clusteradmin.DEREGISTER,
    clusteradmin.ALLOW_WITHDRAWAL,
    clusteradmin.ROTATE_TOKEN,
    exports.DECLARED,
    imports.DECLARED,
    endpoints.DECLARED,
    conflicts.DECLARED,
    version.DECLARED,
    get.DECLARED,
    config.DECLARED,
    completion.DECLARED,
    status.DECLARED,
    *sandbox.DECLARED,
)
BY_NAME: dict[str, Spec] = {spec.name: spec for spec in COMMANDS}
