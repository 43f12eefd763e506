"""The database URL as operators write it: what the hub accepts, and the async driver's URL.

This module is what `hub.settings` needs to validate `--database-url`: it imports the
URL parser of SQLAlchemy's Core and nothing of the store (no engine, pool, driver or
alembic), so a process that only checks its flags stays cheap (docs/decisions.md#start-up-cost).

Operators write plain URLs (`sqlite:///path`, `postgresql://user@host/db`); the async
driver is the store's business, so `async_url` maps them to aiosqlite / asyncpg and
refuses anything else with a message naming the scheme.

`normalize` reads the libpq multi-host form of a PostgreSQL URL, as operators write it
for an HA pair. `postgresql://user@h1:5433,h2:5434/db?target_session_attrs=read-write` is
how libpq, psql and every PostgreSQL HA guide (Patroni, CloudNativePG's replica clusters, managed
services) spell "try these servers in turn and keep the one that takes writes"
(docs/reference.md#ha-postgresql). SQLAlchemy's URL parser reads the netloc as one host and one port
and fails with `invalid literal for int()`; it does understand the same list as repeated `host`
query parameters (`?host=h1:5433&host=h2:5434`), which its asyncpg dialect hands to
asyncpg as host and port lists, and asyncpg then does what libpq does with them,
`target_session_attrs` included. So this module only rewrites the netloc into that query
form before anything else parses the URL; one address (a Service, a VIP) passes through
untouched.

`target_session_attrs` is checked here, at start, against the values asyncpg knows, so a
typo is the one-line `--database-url` error of docs/reference.md#flags and not a failure at first
connect.
"""

from __future__ import annotations

from urllib.parse import parse_qsl, quote, urlencode, urlsplit

from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import ArgumentError

# What asyncpg (like libpq) accepts for target_session_attrs.
DEFAULT_PORT = 5432
SESSION_ATTRS = ("any", "primary", "standby", "prefer-standby", "read-write", "read-only")


def _hosts(netloc_hosts: str) -> list[str]:
    """`h1:5433,h2` → `["h1:5433", "h2"]`, each port checked; ValueError naming the host."""
    hosts: list[str] = []
    for index, item in enumerate(netloc_hosts.split(","), start=1):
        host, colon, port = item.rpartition(":") if not item.endswith("]") else (item, "", "")
        if not colon:
            host, port = item, ""
        if not host:
            raise ValueError(f"not a database URL: host {index} of its host list is empty")
        if port and not (port.isdigit() and 1 <= int(port) <= 65535):
            raise ValueError(
                f"not a database URL: the port {port!r} of host {index} ({host!r}) "
                "is not a number from 1 to 65535"
            )
        # SQLAlchemy's asyncpg dialect wants every port of a list: libpq's default.
        hosts.append(f"{host}:{port or DEFAULT_PORT}")
    return hosts


def normalize(url: str) -> str:
    """`url` with a libpq host list moved into `host` query parameters; any other URL as
    given. Raises ValueError naming the problem for a malformed host list or an unknown
    `target_session_attrs`."""
    try:
        parts = urlsplit(url)
    except ValueError as exc:
        raise ValueError(f"not a database URL: {exc}") from None
    query = parse_qsl(parts.query, keep_blank_values=True)
    for key, value in query:
        if key == "target_session_attrs" and value not in SESSION_ATTRS:
            raise ValueError(
                f"target_session_attrs {value!r} is not one of {', '.join(SESSION_ATTRS)}"
            )
    userinfo, at, hostlist = parts.netloc.rpartition("@")
    if "," not in hostlist:
        return url
    hosts = _hosts(hostlist)
    query = [(k, v) for k, v in query if k != "host"] + [("host", h) for h in hosts]
    # Built by hand: urlunsplit drops the `//` of an empty netloc for schemes it does not
    # know, and `postgresql://@/db` is not what SQLAlchemy reads.
    fragment = f"#{parts.fragment}" if parts.fragment else ""
    encoded = urlencode(query, quote_via=quote)
    return f"{parts.scheme}://{userinfo}{at}{parts.path}?{encoded}{fragment}"


_SQLITE_DRIVERS = {"sqlite", "sqlite+aiosqlite"}
_POSTGRES_DRIVERS = {"postgresql", "postgres", "postgresql+asyncpg"}


def parse(url: str) -> URL:
    """`url` (a libpq host list included) as SQLAlchemy reads it; ValueError when it cannot."""
    try:
        return make_url(normalize(url))
    except ArgumentError as exc:
        raise ValueError(f"not a database URL: {url!r} ({exc})") from None


def async_url(url: str) -> str:
    """The SQLAlchemy async URL for a plain `sqlite:///…` or `postgresql://…` URL.

    Raises ValueError naming the scheme when it is neither SQLite nor PostgreSQL, or
    names a driver other than the ones the hub ships.
    """
    parsed = parse(url)
    driver = parsed.drivername
    if driver in _SQLITE_DRIVERS:
        return parsed.set(drivername="sqlite+aiosqlite").render_as_string(hide_password=False)
    if driver in _POSTGRES_DRIVERS:
        if not parsed.database:
            raise ValueError(f"PostgreSQL URL names no database: {url!r}")
        return parsed.set(drivername="postgresql+asyncpg").render_as_string(hide_password=False)
    raise ValueError(
        f"unsupported database URL scheme {driver!r}: use sqlite:///path or "
        "postgresql://user@host/database"
    )


def backend_of(url: str) -> str:
    """`sqlite` or `postgresql` for a URL `async_url` accepts."""
    return "sqlite" if async_url(url).startswith("sqlite") else "postgresql"


def redact(url: str) -> str:
    """`url` with its password (if any) replaced, for log lines and error messages."""
    try:
        return parse(url).render_as_string(hide_password=True)
    except Exception:  # not parseable: it carries no recognisable password either
        return url
