"""The agent's settings (docs/reference.md#flags): every flag, each also an `MCSYNC_*` environment
variable and a key of the `--config` file.

`AgentSettings` is a pydantic model, so flags, the environment, the config file
and tests go through the same validators; `parse_args()` reads the layers through
`shared.settingscli`, the layer the hub and the CLI use too: flag > variable > file >
default, the flags and `--help`'s list of variables derived from this model. Repeatable
flags (`--namespace`, `--deny-namespace`) take a comma-separated list in the environment
(`MCSYNC_NAMESPACE=shop,payments`) and a list in the file.

Bad input stops the program at start with ONE line naming the flag and the problem, exit
code 2 (`UsageError` carries that line; `__main__` prints it). That includes the token:
`--token-file` must be readable and non-empty, or `MCSYNC_HUB_TOKEN` set — never both,
because two sources of one secret make "which one is used?" a support question. The token
is a `SecretStr`: it never shows in a repr, a log line or an error.
"""

from __future__ import annotations

import argparse
import os
import secrets
import socket
import ssl
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import ConfigDict, Field, SecretStr, field_validator, model_validator

from shared import constants, settingscli
from shared.constants import DEFAULT_DENY_NAMESPACES
from shared.settingscli import Flag, ProgramSettings, UsageError
from shared.validation import is_dns1123_label
from shared.version import __version__

__all__ = ["PROG", "AgentSettings", "UsageError", "parse_args"]

PROG = "mcsync-agent"
SERVICE_ACCOUNT_NAMESPACE_FILE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")


def default_identity() -> str:
    """The host name plus a random suffix per process, as client-go recommends: two
    replicas on one host (hostNetwork pods, two agents started by hand) must not share an
    identity, or both would believe they hold the Lease."""
    return f"{socket.gethostname()}_{secrets.token_hex(4)}"


def _split(value: Any) -> Any:
    """A comma-separated environment value as a list; lists pass through."""
    if isinstance(value, str):
        return [part.strip() for part in value.split(",") if part.strip()]
    return value


class AgentSettings(ProgramSettings):
    """Everything `mcsync-agent` can be told. See `--help` for each flag."""

    model_config = ConfigDict(extra="forbid", validate_default=True)

    hub_url: str = Field(description="base URL of the hub, e.g. https://hub.example.com")
    cluster_id: str | None = Field(
        default=None,
        description="this member cluster's name on the hub (default: the About API's "
        "ClusterProperty cluster.clusterset.k8s.io)",
    )
    token_file: Path | None = Field(
        default=None, description="file holding the member token (or MCSYNC_HUB_TOKEN)"
    )
    hub_token: Annotated[SecretStr | None, Flag(environment_only=True)] = Field(
        default=None, description="the member token itself (else --token-file)"
    )
    hub_ca_file: Path | None = Field(
        default=None, description="CA bundle to verify the hub's TLS certificate"
    )
    kubeconfig: str | None = Field(
        default=None, description="kubeconfig file (default: in-cluster, then ~/.kube/config)"
    )
    namespace: list[str] = Field(
        default_factory=list, description="watch only this namespace (default: all)"
    )
    deny_namespace: list[str] = Field(
        default_factory=lambda: list(DEFAULT_DENY_NAMESPACES),
        description="refuse exports from this namespace (default: kube-system, kube-public)",
    )
    metrics_port: int = Field(
        default=9090, ge=0, le=65535, description="port of /metrics, /healthz, /readyz (0: any)"
    )
    metrics_host: str = Field(
        default="0.0.0.0", min_length=1, description="interface of the metrics port"
    )
    leader_elect: bool = Field(
        default=False, description="run leader election over a Lease: only its holder exports"
    )
    lease_namespace: str | None = Field(
        default=None, description="namespace of the Lease (default: the pod's namespace)"
    )
    lease_name: str = Field(
        default="mcsync-agent", min_length=1, max_length=253, description="name of the Lease"
    )
    lease_duration: float = Field(
        default=15.0, ge=3.0, le=3600.0, description="seconds a Lease is held without renewal"
    )
    identity: str = Field(
        default_factory=default_identity,
        min_length=1,
        description="this replica's name in the Lease (default: host name + random suffix)",
    )
    no_import: bool = Field(
        default=False, description="do not import the fleet's ServiceImports "
                                   "(docs/reference.md#import-path)"
    )
    heartbeat_interval: float = Field(
        default=constants.HEARTBEAT_INTERVAL_DEFAULT_SECONDS,
        gt=0,
        le=3600.0,
        description="seconds between heartbeats to the hub (shortened to a third of the hub's "
        "cluster TTL when longer)",
    )
    workers: int = Field(default=4, ge=1, le=256, description="reconcile workers")
    watch_timeout: int = Field(
        default=300,
        ge=1,
        le=3600,
        description="seconds each watch request stays open, at least (drawn from [this, 2x this))",
    )
    log_format: Literal["json", "text"] = Field(default="text", description="json or text")
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = Field(
        default="INFO", description="DEBUG, INFO, WARNING or ERROR"
    )

    @field_validator("hub_url")
    @classmethod
    def _hub_url(cls, value: str) -> str:
        value = value.strip().rstrip("/")
        if not value.startswith(("http://", "https://")) or "://" == value[-3:]:
            raise ValueError(f"must be an http:// or https:// URL, got {value!r}")
        return value

    @field_validator("hub_ca_file")
    @classmethod
    def _hub_ca_file(cls, value: Path | None) -> Path | None:
        # Checked here, so that a missing or unreadable bundle is an error naming this flag
        # at start rather than an OSError from deep inside the HTTP client.
        if value is None:
            return None
        if not value.exists():
            raise ValueError(f"{value} does not exist")
        if not value.is_file():
            raise ValueError(f"{value} is not a file")
        try:
            ssl.create_default_context(cafile=str(value))
        except ssl.SSLError as exc:
            raise ValueError(f"{value} is not a PEM CA bundle ({exc.reason or exc})") from None
        except OSError as exc:
            raise ValueError(f"cannot read {value}: {exc.strerror or exc}") from None
        return value

    @field_validator("cluster_id")
    @classmethod
    def _cluster_id(cls, value: str | None) -> str | None:
        if value is not None and not is_dns1123_label(value):
            raise ValueError(
                f"{value!r} is not a DNS-1123 label (lower-case letters, digits and '-', "
                "at most 63 characters)"
            )
        return value

    @field_validator("namespace", "deny_namespace", mode="before")
    @classmethod
    def _namespaces_split(cls, value: Any) -> Any:
        return _split(value)

    @field_validator("namespace", "deny_namespace")
    @classmethod
    def _namespaces(cls, value: list[str]) -> list[str]:
        for item in value:
            if not is_dns1123_label(item):
                raise ValueError(f"{item!r} is not a namespace name")
        return list(dict.fromkeys(value))

    @field_validator("lease_namespace")
    @classmethod
    def _lease_namespace(cls, value: str | None) -> str | None:
        if value is not None and not is_dns1123_label(value):
            raise ValueError(f"{value!r} is not a namespace name")
        return value

    @field_validator("log_level", mode="before")
    @classmethod
    def _log_level(cls, value: Any) -> Any:
        return value.upper() if isinstance(value, str) else value

    @model_validator(mode="after")
    def _one_token_source(self) -> AgentSettings:
        if self.token_file is not None and self.hub_token is not None:
            raise ValueError(
                "give the member token either with --token-file or as MCSYNC_HUB_TOKEN, not both"
            )
        if self.token_file is None and self.hub_token is None:
            raise ValueError("no member token: pass --token-file or set MCSYNC_HUB_TOKEN")
        return self

    # -- derived ---------------------------------------------------------------------------

    def read_token(self) -> str:
        """The member token; `UsageError` naming the flag when it cannot be read."""
        if self.hub_token is not None:
            token = self.hub_token.get_secret_value().strip()
            if not token:
                raise UsageError(f"{PROG}: error: MCSYNC_HUB_TOKEN: is empty")
            return token
        assert self.token_file is not None
        where = f"{PROG}: error: argument --token-file: {self.token_file}"
        try:
            token = self.token_file.read_text(encoding="utf-8").strip()
        except (OSError, UnicodeDecodeError) as exc:
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            raise UsageError(f"{where}: cannot read it: {reason}") from None
        if not token:
            raise UsageError(f"{where} is empty")
        if any(ch.isspace() for ch in token):
            raise UsageError(f"{where} holds more than one word; it must hold only the token")
        return token

    def effective_lease_namespace(self) -> str:
        """--lease-namespace, else the pod's own namespace, else "default"."""
        if self.lease_namespace:
            return self.lease_namespace
        try:
            namespace = SERVICE_ACCOUNT_NAMESPACE_FILE.read_text(encoding="utf-8").strip()
        except OSError:
            namespace = ""
        return namespace or "default"

    def watched_namespaces(self) -> list[str | None]:
        """One entry per informer: the namespaces given, or [None] for all namespaces."""
        return list(self.namespace) or [None]


# -- command line ------------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    """The flags of `AgentSettings`; the help lists every variable."""
    parser = settingscli.OneLineParser(
        prog=PROG,
        description="mcsync member agent: exports ServiceExports to the hub, imports the "
        "fleet's services and reports the hub's conflict verdicts back.",
        epilog=settingscli.environment_help(settingscli.settings_of(AgentSettings)),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"{PROG} {__version__}")
    settingscli.add_flags(parser, settingscli.settings_of(AgentSettings))
    return parser


def parse_args(
    argv: Sequence[str] | None = None, environ: Mapping[str, str] | None = None
) -> AgentSettings:
    """Settings from `argv` over the environment over the `--config` file; `UsageError`
    (one line naming the flag) when any is bad."""
    settings, _ = settingscli.load(
        AgentSettings,
        build_parser(),
        sys.argv[1:] if argv is None else argv,
        os.environ if environ is None else environ,
    )
    return settings
