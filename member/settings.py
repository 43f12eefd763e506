"""The agent's settings (SPEC §7): every flag, each also an `MCSYNC_*` environment variable.

`AgentSettings` is a pydantic-settings model, so flags, the environment and tests go through
the same validators; `parse_args()` is the command line on top of it. A flag given on the
command line wins over its environment variable. Repeatable flags (`--namespace`,
`--deny-namespace`) take a comma-separated list in the environment
(`MCSYNC_NAMESPACE=shop,payments`).

Bad input stops the program at start with ONE line naming the flag and the problem, exit
code 2 (`SettingsError` carries that line; `__main__` prints it). That includes the token:
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
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Field, SecretStr, ValidationError, field_validator, model_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from shared.constants import DEFAULT_DENY_NAMESPACES
from shared.models import is_dns1123_label
from shared.version import __version__

__all__ = ["AgentSettings", "SettingsError", "parse_args"]

ENV_PREFIX = "MCSYNC_"
SERVICE_ACCOUNT_NAMESPACE_FILE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")


class SettingsError(Exception):
    """A bad setting; the message is the one line to print (it names the flag)."""


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


def _flag(field: str) -> str:
    return "--" + field.replace("_", "-")


class AgentSettings(BaseSettings):
    """Everything `mcsync-agent` can be told. See `--help` for each flag."""

    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX, extra="forbid", validate_default=True, frozen=True
    )

    hub_url: str = Field(description="base URL of the hub, e.g. https://hub.example.com")
    cluster_id: str = Field(description="this member cluster's name on the hub")
    token_file: Path | None = Field(default=None, description="file holding the member token")
    hub_token: SecretStr | None = Field(
        default=None, description="the member token itself (environment only)"
    )
    hub_ca_file: Path | None = Field(
        default=None, description="CA bundle to verify the hub's TLS certificate"
    )
    kubeconfig: str | None = Field(
        default=None, description="kubeconfig file (default: in-cluster, then ~/.kube/config)"
    )
    namespace: Annotated[list[str], NoDecode] = Field(
        default_factory=list, description="namespace to watch (repeatable; default all)"
    )
    deny_namespace: Annotated[list[str], NoDecode] = Field(
        default_factory=lambda: list(DEFAULT_DENY_NAMESPACES),
        description="namespace whose exports are refused (repeatable)",
    )
    metrics_port: int = Field(
        default=9090, ge=0, le=65535, description="port of /metrics, /healthz, /readyz (0: any)"
    )
    metrics_host: str = Field(default="0.0.0.0", min_length=1)
    leader_elect: bool = Field(default=False, description="run leader election over a Lease")
    lease_namespace: str | None = Field(
        default=None, description="namespace of the Lease (default: the pod's namespace)"
    )
    lease_name: str = Field(default="mcsync-agent", min_length=1, max_length=253)
    lease_duration: float = Field(default=15.0, ge=3.0, le=3600.0)
    identity: str = Field(
        default_factory=default_identity,
        min_length=1,
        description="this replica's name in the Lease (default: host name + random suffix)",
    )
    no_import: bool = Field(
        default=False, description="do not import the fleet's ServiceImports (SPEC §2.8)"
    )
    heartbeat_interval: float = Field(default=30.0, gt=0, le=3600.0)
    workers: int = Field(default=4, ge=1, le=256)
    watch_timeout: int = Field(default=300, ge=1, le=3600, description="seconds per watch")
    log_format: Literal["json", "text"] = "text"
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"

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
    def _cluster_id(cls, value: str) -> str:
        if not is_dns1123_label(value):
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
        """The member token; `SettingsError` naming the flag when it cannot be read."""
        if self.hub_token is not None:
            token = self.hub_token.get_secret_value().strip()
            if not token:
                raise SettingsError("MCSYNC_HUB_TOKEN: is empty")
            return token
        assert self.token_file is not None
        try:
            token = self.token_file.read_text(encoding="utf-8").strip()
        except (OSError, UnicodeDecodeError) as exc:
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            raise SettingsError(f"--token-file: cannot read {self.token_file}: {reason}") from None
        if not token:
            raise SettingsError(f"--token-file: {self.token_file} is empty")
        if any(ch.isspace() for ch in token):
            raise SettingsError(
                f"--token-file: {self.token_file} holds more than one word; it must hold only "
                "the token"
            )
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


class _OneLineParser(argparse.ArgumentParser):
    """argparse, but a usage error is one line (SPEC §7) and exit code 2."""

    def error(self, message: str) -> Any:  # argparse's signature: never returns
        raise SettingsError(message)


def _parser() -> argparse.ArgumentParser:
    parser = _OneLineParser(
        prog="mcsync-agent",
        description="mcsync member agent: exports ServiceExports to the hub and reports "
        "the hub's conflict verdicts back. Every flag is also an MCSYNC_* environment "
        "variable (e.g. --hub-url is MCSYNC_HUB_URL).",
        argument_default=argparse.SUPPRESS,
    )
    add = parser.add_argument
    add("--version", action="version", version=f"mcsync-agent {__version__}")
    add("--hub-url", help="base URL of the hub (required)")
    add("--cluster-id", help="this member cluster's name on the hub (required)")
    add("--token-file", help="file holding this cluster's member token (or MCSYNC_HUB_TOKEN)")
    add("--hub-ca-file", help="CA bundle that signed the hub's TLS certificate")
    add("--kubeconfig", help="kubeconfig file (default: in-cluster, then ~/.kube/config)")
    add("--namespace", action="append", help="watch only this namespace (repeatable)")
    add(
        "--deny-namespace",
        action="append",
        help="refuse exports from this namespace (repeatable; default kube-system, kube-public)",
    )
    add("--metrics-port", help="port serving /metrics, /healthz, /readyz (default 9090)")
    add("--metrics-host", help="interface of the metrics port (default 0.0.0.0)")
    add("--leader-elect", action="store_true", help="only the Lease holder exports")
    add("--lease-namespace", help="namespace of the Lease (default: the pod's namespace)")
    add("--lease-name", help="name of the Lease (default mcsync-agent)")
    add("--lease-duration", help="seconds a Lease is held without renewal (default 15)")
    add(
        "--identity",
        help="this replica's name in the Lease (default: the host name and a random suffix)",
    )
    add("--no-import", action="store_true", help="export only: import nothing of the fleet")
    add("--heartbeat-interval", help="seconds between heartbeats to the hub (default 30)")
    add("--workers", help="reconcile workers (default 4)")
    add("--watch-timeout", help="seconds each watch request stays open (default 300)")
    add("--log-format", help="json or text (default text)")
    add("--log-level", help="DEBUG, INFO, WARNING or ERROR (default INFO)")
    return parser


def parse_args(argv: list[str] | None = None) -> AgentSettings:
    """Settings from `argv` over the environment; `SettingsError` (one line) when bad."""
    namespace = _parser().parse_args(argv)
    given: dict[str, Any] = dict(vars(namespace))
    try:
        return AgentSettings(**given)
    except ValidationError as exc:
        raise SettingsError(_one_line(exc, given=given)) from None


def _one_line(exc: ValidationError, *, given: dict[str, Any]) -> str:
    """The first problem of `exc`, named as the flag (and its variable when it came from there)."""
    error = exc.errors()[0]
    location = [str(part) for part in error.get("loc", ()) if not isinstance(part, int)]
    message = str(error.get("msg", "invalid")).removeprefix("Value error, ")
    if not location:
        return message
    field = location[0]
    env = f"{ENV_PREFIX}{field.upper()}"
    if field == "hub_token":
        return f"{env}: {message}"
    if error.get("type") == "missing":
        return f"{_flag(field)}: is required (or set {env})"
    if field not in given and env in os.environ:
        return f"{env} ({_flag(field)}): {message}"
    return f"{_flag(field)}: {message}"
