"""What one `mcsync` invocation asked for, checked: the frozen `Options` that
`cli.args.parse_args` answers and every command reads, and the words it is made of.

Apart from `cli.args` (which builds the parser from the commands' own modules, `cli.cmd`)
so that a command module can name `Options` without importing the parser that imports it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from cli.selector import Selector

PROG = "mcsync"
DEFAULT_HUB_URL = "http://127.0.0.1:8080"
DEFAULT_REQUEST_TIMEOUT = 30.0
DEFAULT_PAGE_SIZE = 500
OUTPUTS = ("table", "wide", "json", "yaml", "name", "jsonpath=TEMPLATE")

Output = Literal["table", "wide", "json", "yaml", "name", "jsonpath"]
Command = Literal[
    "clusters",
    "clusters register",
    "clusters deregister",
    "clusters allow-withdrawal",
    "clusters set-scope",
    "clusters rotate-token",
    "exports",
    "imports",
    "endpoints",
    "conflicts",
    "get",
    "version",
    "config",
    "completion",
    "sandbox",
    "sandbox stop-agent",
    "sandbox start-agent",
    "status",
]
Kind = Literal["export", "import", "cluster", "conflict"]
ConfigAction = Literal["get-contexts", "current-context", "use-context", "set-context"]
Shell = Literal["bash", "zsh", "fish"]
SHELLS: tuple[Shell, ...] = ("bash", "zsh", "fish")



@dataclass(frozen=True)
class Options:
    """Everything one invocation asked for, checked."""

    command: Command
    hub_url: str = DEFAULT_HUB_URL
    token: str | None = None
    output: Output = "table"
    watch: bool = False
    watch_from_env: bool = False  # MCSYNC_WATCH, not --watch, asked for it
    request_timeout: float = DEFAULT_REQUEST_TIMEOUT
    page_size: int = DEFAULT_PAGE_SIZE
    namespace: str | None = None
    cluster: str | None = None
    name: str | None = None
    conflict: bool | None = None
    kind: Kind | None = None
    jsonpath: str | None = None  # the template of -o jsonpath=…, checked
    no_headers: bool = False
    verbose: bool = False
    selector: Selector | None = None
    certificate_authority: str | None = None
    insecure_skip_tls_verify: bool = False
    # clusters register / deregister
    labels: tuple[tuple[str, str], ...] = ()
    member_token_file: str | None = None
    overwrite: bool = False
    yes: bool = False
    # clusters register / set-scope: spec.exportNamespaces / importNamespaces
    # (docs/reference.md#scope-and-limits); None: not given (register: absent, every namespace;
    # set-scope: kept)
    export_namespaces: tuple[str, ...] | None = None
    import_namespaces: tuple[str, ...] | None = None
    all_export_namespaces: bool = False
    all_import_namespaces: bool = False
    # exports --invalid (docs/reference.md#cli)
    invalid: bool = False
    # version, config, completion
    client_only: bool = False
    config_path: str | None = None
    context: str | None = None
    config_action: ConfigAction | None = None
    context_settings: tuple[tuple[str, str], ...] = ()
    shell: Shell | None = None
    # sandbox
    hub_port: int = 0

    @property
    def wide(self) -> bool:
        return self.output == "wide"

