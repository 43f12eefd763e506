"""The hub's configuration: one `HubSettings` object — flags, `MCSYNC_*` variables, a
`--config` file.

A pydantic model, so that the command line, the environment, the config file and tests
all go through the same validators. The layers
are read, in the order flag > variable > file > default, by `shared.settingscli`, the
layer all three programs share; it also derives the flags, `--help`'s list of variables
and the one-line errors naming the flag (docs/reference.md#flags) from this model. Nothing reads the
environment anywhere else in the hub.

Defaults and why:

* `host` is `127.0.0.1`: README's first command starts a hub with a freshly generated
  admin token, and on a laptop or a shared workstation that must not be reachable from
  the network before its operator decides so. The image and the chart, where the
  container's network namespace is the boundary and agents in other clusters must reach
  it, pass `--host 0.0.0.0` explicitly.
* `database_url` is a SQLite file in the working directory, so `mcsync-hub` alone gives
  a working hub; production points it at PostgreSQL.
* Tokens are never flags (a flag is visible in `ps`): `MCSYNC_ADMIN_TOKEN` /
  `MCSYNC_READER_TOKEN` or the `*_token_file` paths (`hub.api.credentials`).
* `clusterset_name` is unset: a hub names no clusterset unless told, and its agents then
  neither create nor check the About API's `clusterset.k8s.io` (docs/reference.md#export-path);
  naming one is an operator's decision that other tools (Submariner, Karmada) will read.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

from pydantic import ConfigDict, Field, SecretStr, field_validator, model_validator

from hub.dburl import async_url, parse, redact
from shared import constants
from shared.aboutapi import id_problem
from shared.scope import DEFAULT_DENY_EXPORT_NAMESPACES, check_patterns
from shared.settingscli import Flag, ProgramSettings
from shared.version import DEFAULT_MIN_AGENT_VERSION, parse_version

DEFAULT_ADMIN_TOKEN_FILE = Path(constants.ADMIN_TOKEN_FILE_NAME)


def sqlite_file(database_url: str) -> Path | None:
    """The file of a `sqlite:///path` URL (relative or absolute), None for anything else
    (PostgreSQL, an in-memory SQLite database)."""
    head, sep, rest = database_url.partition(":///")
    if not sep or head.split("+")[0] != "sqlite":
        return None
    path = rest.split("?", 1)[0]
    return None if not path or path == ":memory:" else Path(path)


class HubSettings(ProgramSettings):
    """Everything the hub process can be told; every field is a flag of `serve` and an
    `MCSYNC_<NAME>` variable (`shared.settingscli`), the tokens a variable only."""

    model_config = ConfigDict(extra="ignore", validate_default=True)

    host: str = Field(
        default="127.0.0.1", min_length=1, description="interface to listen on (0.0.0.0: all)"
    )
    port: int = Field(default=8080, ge=1, le=65535, description="TCP port to listen on")
    database_url: Annotated[str, Flag(echo=False)] = Field(
        default="sqlite:///./mcsync.db",
        description="sqlite:///path, postgresql://user@host/db or, for an HA pair, "
        "postgresql://user@h1:5432,h2:5432/db?target_session_attrs=read-write",
    )
    # How long a PostgreSQL connection may stay silent before the hub counts it lost: the
    # connect timeout, the checkout ping's, the primary probe's, and the TCP keepalives'
    # and user timeout's order (`hub.store.primary`; docs/reference.md#ha-postgresql: a killed
    # primary sends no FIN). Short enough that a replica answers 503 well before a client's own
    # timeout.
    database_timeout_seconds: float = Field(
        default=5.0,
        gt=0,
        le=600,
        description="seconds a silent PostgreSQL connection is given before it counts as lost",
    )
    migrate: Annotated[bool, Flag(names=("--no-migrate",), const=False)] = Field(
        default=True, description="do not apply migrations at start"
    )
    admin_token: Annotated[SecretStr | None, Flag(environment_only=True)] = Field(
        default=None, description="the admin token itself (else --admin-token-file)"
    )
    reader_token: Annotated[SecretStr | None, Flag(environment_only=True)] = Field(
        default=None, description="the reader token itself (else --reader-token-file)"
    )
    admin_token_file: Path | None = Field(
        default=None,
        description=f"admin token file; only the default, {DEFAULT_ADMIN_TOKEN_FILE} beside a "
        "SQLite database (else in the working directory), is generated (mode 0600) when absent",
    )
    reader_token_file: Path | None = Field(default=None, description="reader token file")
    # docs/reference.md#credentials: how long a rotated member token keeps working beside
    # its replacement, unless the agent uses the new one first. An hour covers a Secret
    # update reaching a pod (kubelet syncs mounted Secrets within a minute or two) with
    # room for an agent that is restarting meanwhile.
    token_grace_seconds: float = Field(
        default=3600.0,
        ge=0,
        le=86400 * 365,
        description="seconds a rotated member token stays valid beside the new one "
        "(0: it stops at once)",
    )
    cluster_ttl: float = Field(
        default=90.0, gt=0, le=86400 * 365, description="seconds without a heartbeat → Stale"
    )
    # docs/reference.md#failover: above this fraction of Stale clusters (of those ever heard from)
    # the hub suspects itself and withholds no endpoints (`hub.store.withdrawals`).
    stale_panic_fraction: float = Field(
        default=0.5,
        description="withhold no Stale cluster's endpoints while more than this fraction of "
        "the clusters is Stale; in (0, 1]",
    )
    max_body_bytes: int = Field(
        default=1024 * 1024, ge=1024, le=1024 * 1024 * 1024, description="largest request body"
    )
    log_format: Literal["json", "text"] = Field(default="text", description="json or text")
    log_level: Literal["debug", "info", "warning", "error"] = Field(
        default="info", description="debug, info, warning or error"
    )
    min_agent_version: str = Field(
        default=DEFAULT_MIN_AGENT_VERSION, description="oldest agent version that may export"
    )
    history_limit: int = Field(
        default=100_000, ge=1, description="revisions of change history kept for watches"
    )
    pool_size: int = Field(
        default=10, ge=1, le=1000, description="database connections per hub process"
    )
    watch_bookmark_seconds: float = Field(
        default=10.0, gt=0, le=3600, description="BOOKMARK interval of idle watches"
    )
    watch_max_timeout_seconds: int = Field(
        default=3600, ge=1, description="longest timeoutSeconds a watch may ask for"
    )
    # Watches are bounded so that clients that do not read cannot hold the hub:
    # one token (one member cluster) may hold this many open on a replica, more are 429 …
    watch_limit_per_token: int = Field(
        default=100, ge=1, le=1_000_000, description="open watches per token per replica"
    )
    # … and a watch whose client falls this far behind is ended with a 410 ERROR event (it
    # relists): 1,000 events is ten times a typical full-state sync's burst.
    watch_buffer_events: int = Field(
        default=1000,
        ge=1,
        le=1_000_000,
        description="events a watch may fall behind before it is ended with 410",
    )
    watch_buffer_bytes: int = Field(
        default=4 * 1024 * 1024,
        ge=64 * 1024,
        le=1024**3,
        description="bytes a watch may fall behind before it is ended with 410",
    )
    retry_after_seconds: int = Field(
        default=5, ge=1, le=3600, description="Retry-After of 503 answers"
    )
    # Slow and idle clients (`hub.connections`). A request head must arrive within
    # header_timeout_seconds of the connection opening (or of its first byte, on a reused
    # connection): 10 s, Go's usual ReadHeaderTimeout, is ample on any network a member
    # agent uses. keep_alive_timeout_seconds closes idle connections; above the 5 s after
    # which httpx clients (the agent's, the CLI's) drop an idle connection themselves, so
    # the client closes first (the hub closing first races a request sent on it). The agent
    # keeps its idle connection past its longest wait between heartbeats (41 s at the
    # default 30 s interval, `member.hubclient.idle_connection_seconds`), so the default is
    # above that: a quiet agent's heartbeats reuse one connection instead of opening a new
    # one per beat (docs/reference.md#fleet-scale).
    header_timeout_seconds: float = Field(
        default=10.0, gt=0, le=3600, description="time a client has to send a request head"
    )
    keep_alive_timeout_seconds: int = Field(
        default=75, ge=1, le=3600, description="idle time before a kept-alive connection closes"
    )
    # At most this many client connections; lowered at start to what the file-descriptor
    # limit allows after the hub's own reserve (`hub.connections.fd_ceiling`).
    max_connections: int = Field(
        default=4096, ge=1, le=1_000_000, description="most client connections held open"
    )
    backlog: int = Field(
        default=2048, ge=1, le=65535, description="connections the kernel queues before accept"
    )
    shutdown_grace_seconds: int = Field(
        default=20, ge=0, le=3600, description="time in-flight requests get after SIGTERM"
    )
    clusterset_name: str | None = Field(
        default=None,
        description="the clusterset's name, which agents write into the About API's "
        "ClusterProperty clusterset.k8s.io (default: none)",
    )

    # docs/reference.md#scope-and-limits scope and quotas: namespaces no member may export from,
    # whatever its MemberCluster's spec says; and how many records one member may hold.
    deny_export_namespace: list[str] = Field(
        default_factory=lambda: list(DEFAULT_DENY_EXPORT_NAMESPACES),
        description="refuse every member's exports and slices in this namespace or '*' glob "
        "(default: kube-system, kube-public, kube-node-lease)",
    )
    max_exports_per_cluster: int = Field(
        default=10_000, ge=1, le=10**9, description="exports one member cluster may create"
    )
    max_endpointslices_per_cluster: int = Field(
        default=100_000,
        ge=1,
        le=10**9,
        description="EndpointSliceExports one member cluster may create",
    )

    @field_validator("deny_export_namespace", mode="before")
    @classmethod
    def _deny_split(cls, value: object) -> object:
        if isinstance(value, str):  # the variable: comma-separated
            return [part.strip() for part in value.split(",") if part.strip()]
        return value

    @field_validator("deny_export_namespace")
    @classmethod
    def _deny_patterns(cls, value: list[str]) -> list[str]:
        return check_patterns(value, "deny-export-namespace")

    @field_validator("database_url")
    @classmethod
    def _database_url(cls, value: str) -> str:
        try:
            async_url(value)
        except ValueError as exc:
            message = str(exc)
            try:
                password = parse(value).password
            except Exception:
                password = None
            if password:
                message = message.replace(str(password), "***")
            raise ValueError(message) from None
        return value

    @field_validator("clusterset_name")
    @classmethod
    def _clusterset_name(cls, value: str | None) -> str | None:
        if value is None:
            return None
        problem = id_problem(value)  # KEP-2149's rule, the one the agent checks too
        if problem is not None:
            raise ValueError(f"{value!r} {problem}")
        return value

    @field_validator("cluster_ttl")
    @classmethod
    def _cluster_ttl(cls, value: float) -> float:
        shortest = constants.HEARTBEATS_PER_TTL * constants.HEARTBEAT_INTERVAL_MIN_SECONDS
        if value < shortest:
            raise ValueError(
                f"must be at least {shortest:g} seconds: an agent beats "
                f"{constants.HEARTBEATS_PER_TTL} times per TTL and at most once every "
                f"{constants.HEARTBEAT_INTERVAL_MIN_SECONDS:g} s, so that one late heartbeat "
                "never makes its cluster Stale"
            )
        return value

    @field_validator("stale_panic_fraction")
    @classmethod
    def _stale_panic_fraction(cls, value: float) -> float:
        if not 0 < value <= 1:  # NaN fails too
            raise ValueError(f"must be in (0, 1], got {value}")
        return value

    @field_validator("min_agent_version")
    @classmethod
    def _min_agent_version(cls, value: str) -> str:
        parse_version(value)  # raises ValueError naming the text
        return value.strip()

    @field_validator("admin_token", "reader_token")
    @classmethod
    def _token(cls, value: SecretStr | None) -> SecretStr | None:
        if value is not None and not value.get_secret_value().strip():
            raise ValueError("must not be empty")
        return value

    @model_validator(mode="after")
    def _one_source_per_token(self) -> HubSettings:
        if self.admin_token is not None and self.admin_token_file is not None:
            raise ValueError(
                "give the admin token either as MCSYNC_ADMIN_TOKEN or as a token file, not both"
            )
        if self.reader_token is not None and self.reader_token_file is not None:
            raise ValueError(
                "give the reader token either as MCSYNC_READER_TOKEN or as a token file, not both"
            )
        return self

    @property
    def effective_admin_token_file(self) -> Path:
        """The admin token file: the one given, else where the generated token goes —
        beside a SQLite database file (the hub's state stays in one place, whatever the
        working directory), else (PostgreSQL) the working directory."""
        if self.admin_token_file is not None:
            return self.admin_token_file
        database = sqlite_file(self.database_url)
        if database is not None:
            return database.parent / DEFAULT_ADMIN_TOKEN_FILE
        return DEFAULT_ADMIN_TOKEN_FILE

    @property
    def redacted_database_url(self) -> str:
        return redact(self.database_url)
