"""The configured admin and reader tokens (docs/reference.md#credentials): loaded at
start, reloaded without a restart.

Sources, in order: `MCSYNC_ADMIN_TOKEN` / `MCSYNC_READER_TOKEN`, else the token files.
Each source may hold several tokens, all valid at once, so that a token can be rotated
without downtime: a variable separates them with commas, a file puts one per line (blank
lines and `#` comments ignored). To rotate, add the new token, move every client to it,
then remove the old one; the hub takes a changed file on `SIGHUP` or by itself within a
second of the change (`Credentials.reload_if_changed`, a `stat` per second at most, on
the request path: no thread, no watcher to stop). A reload that finds a file unusable
keeps the tokens it had and logs why: a running hub never locks its operators out over
a half-written file.

A token file is the key to the fleet, so the hub refuses, at start, one that others could
read or replace (`check_file_access`): it must belong to the hub's user and give group
and others no access at all, or, as PostgreSQL accepts for its key files, belong to root
and give at most read access to the group (a Kubernetes Secret volume with
`defaultMode: 0440` and the pod's `fsGroup`). Anything else stops the hub with one line
naming the file.

When no admin token is configured anywhere, the hub makes one at first start and writes
it to the *default* admin token file (`mcsync-admin-token` beside a SQLite database, else
in the working directory: `HubSettings.effective_admin_token_file`), created with `O_EXCL` and
mode 0600 so that it is never readable by anyone else, not even for an instant; later
starts read the same file back, under the same access rule. Two replicas racing to
create it both end with the token of whichever created the file (the loser's `O_EXCL`
fails and it reads the winner's).

A token file given explicitly (`--admin-token-file`) must exist: a mistyped path used to
create a fresh admin token there silently (as root, at `/nonexistent`), and the operator's
real token then stopped working without a word. An admin token shorter than 32 characters
is accepted with a warning: it is the key to every cluster's exports.

Only the file's *path* is ever logged. Every problem raises `CredentialsError` whose
message names the flag and the problem, which the CLI prints as its one line.
"""

from __future__ import annotations

import errno
import hmac
import logging
import os
import secrets
import stat
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pydantic import SecretStr

from hub.logs import fields
from hub.settings import HubSettings

log = logging.getLogger("mcsync.hub.credentials")

GENERATED_TOKEN_BYTES = 32
# A token shorter than this draws a warning at start (a generated one has 43 characters).
MIN_ADMIN_TOKEN_CHARS = 32
# How often, at most, a request looks whether a token file changed.
RELOAD_CHECK_SECONDS = 1.0

ConfiguredRole = Literal["admin", "reader"]


class CredentialsError(ValueError):
    """A token source is unusable; the message names the flag and the problem."""


def check_file_access(path: Path, *, flag: str, st: os.stat_result | None = None) -> None:
    """CredentialsError unless `path` is owned by the hub's user with no access for group
    and others, or by root with at most group read (see the module's docstring)."""
    if st is None:
        try:
            st = path.stat()
        except FileNotFoundError:
            raise CredentialsError(f"{flag}: {path} does not exist") from None
        except OSError as exc:
            raise CredentialsError(f"{flag}: cannot read {path}: {exc.strerror or exc}") from None
    mode = stat.S_IMODE(st.st_mode)
    me = os.geteuid()
    if st.st_uid == me and not mode & 0o077:
        return
    if st.st_uid == 0 and not mode & 0o037:
        return
    raise CredentialsError(
        f"{flag}: {path} must belong to the hub's user (uid {me}) and be unreadable by group "
        f"and others (chmod 600, chown {me}); it belongs to uid {st.st_uid} with mode "
        f"{mode:04o}"
    )


def split_tokens(text: str) -> tuple[str, ...]:
    """The tokens of a variable's value (comma-separated) or a file (one per line)."""
    tokens: list[str] = []
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        tokens.extend(part.strip() for part in line.split(",") if part.strip())
    return tuple(dict.fromkeys(tokens))


def _read_token_file(path: Path, *, flag: str) -> tuple[str, ...]:
    try:
        with open(path, encoding="utf-8") as handle:
            check_file_access(path, flag=flag, st=os.fstat(handle.fileno()))
            text = handle.read()
    except FileNotFoundError:
        raise CredentialsError(f"{flag}: {path} does not exist") from None
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise CredentialsError(f"{flag}: cannot read {path}: {reason}") from None
    tokens = split_tokens(text)
    if not tokens:
        raise CredentialsError(f"{flag}: {path} is empty")
    if any(any(c.isspace() for c in token) for token in tokens):
        raise CredentialsError(f"{flag}: {path} must hold one token per line, without spaces")
    return tokens


def _env_tokens(value: SecretStr | None) -> tuple[str, ...]:
    return () if value is None else split_tokens(value.get_secret_value())


def _file_key(path: Path) -> tuple[int, int, int, int] | None:
    """What tells that a file changed: inode (a Secret update swaps a symlink), device,
    modification time, size. None when it cannot be read."""
    try:
        st = path.stat()
    except OSError:
        return None
    return (st.st_ino, st.st_dev, st.st_mtime_ns, st.st_size)


def _matches(candidate: bytes, tokens: Sequence[bytes]) -> bool:
    """Whether `candidate` is one of `tokens`, comparing with every one in constant time."""
    found = False
    for token in tokens:
        found |= hmac.compare_digest(candidate, token)
    return found


def _create_admin_token_file(path: Path) -> bool:
    """Write a fresh token into `path` unless it exists; True when this call created it."""
    token = secrets.token_urlsafe(GENERATED_TOKEN_BYTES)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return False
    except OSError as exc:
        reason = exc.strerror or errno.errorcode.get(exc.errno or 0, str(exc))
        raise CredentialsError(f"--admin-token-file: cannot create {path}: {reason}") from None
    try:
        os.write(fd, (token + "\n").encode("ascii"))
        os.fsync(fd)
    finally:
        os.close(fd)
    return True


def check_token_sources(settings: HubSettings) -> None:
    """Raise CredentialsError for an unusable token file, without generating anything.

    Lets the CLI refuse a bad file before it touches the database, while the admin token
    itself is generated only once the database has answered.
    """
    if settings.reader_token_file is not None:
        _read_token_file(settings.reader_token_file, flag="--reader-token-file")
    if settings.admin_token is None:
        path = settings.effective_admin_token_file
        if path.exists() or settings.admin_token_file is not None:
            _read_token_file(path, flag="--admin-token-file")
        elif not path.parent.is_dir():
            raise CredentialsError(
                f"--admin-token-file: cannot create {path}: its directory does not exist"
            )


@dataclass(frozen=True)
class _Loaded:
    admin: tuple[str, ...]
    reader: tuple[str, ...]
    admin_token_file: Path | None
    generated: bool


def _load(settings: HubSettings, *, generate: bool) -> _Loaded:
    reader = _env_tokens(settings.reader_token)
    if settings.reader_token_file is not None:
        reader = _read_token_file(settings.reader_token_file, flag="--reader-token-file")

    source: Path | None = None
    generated = False
    if settings.admin_token is not None:
        admin = _env_tokens(settings.admin_token)
        if not admin:
            raise CredentialsError("MCSYNC_ADMIN_TOKEN: holds no token")
    else:
        source = settings.effective_admin_token_file
        # Only the default location is ever created; an explicit path must exist.
        generated = generate and settings.admin_token_file is None and _create_admin_token_file(
            source
        )
        admin = _read_token_file(source, flag="--admin-token-file")
    if set(reader) & set(admin):
        raise CredentialsError(
            "the reader token must differ from the admin token (it would grant admin rights)"
        )
    return _Loaded(admin=admin, reader=reader, admin_token_file=source, generated=generated)


class Credentials:
    """The admin and reader tokens valid now, and the files they came from.

    `role_of` is what authentication asks; `reload` (on `SIGHUP`) and `reload_if_changed`
    (from the request path, at most once a second) take new file contents in.
    """

    def __init__(
        self,
        settings: HubSettings | None,
        loaded: _Loaded,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._settings = settings
        self._clock = clock
        self.admin_token_file = loaded.admin_token_file
        self.generated = loaded.generated
        self._set(loaded)
        self._next_check = clock() + RELOAD_CHECK_SECONDS
        self._keys = self._file_keys()
        self.reloads = 0  # tests and the log read it

    def _set(self, loaded: _Loaded) -> None:
        self._admin = tuple(t.encode("utf-8") for t in loaded.admin)
        self._reader = tuple(t.encode("utf-8") for t in loaded.reader)
        self.admin = SecretStr(loaded.admin[0])
        self.reader = SecretStr(loaded.reader[0]) if loaded.reader else None

    def _files(self) -> list[Path]:
        if self._settings is None:
            return []
        files = [self._settings.reader_token_file, self.admin_token_file]
        return [path for path in files if path is not None]

    def _file_keys(self) -> list[tuple[int, int, int, int] | None]:
        return [_file_key(path) for path in self._files()]

    def role_of(self, token: str) -> ConfiguredRole | None:
        """`admin` or `reader` when `token` is one of theirs, else None."""
        self.reload_if_changed()
        candidate = token.encode("utf-8")
        if _matches(candidate, self._admin):
            return "admin"
        if _matches(candidate, self._reader):
            return "reader"
        return None

    def reload_if_changed(self) -> bool:
        """Reload when a token file changed since the last look (looked at most once per
        `RELOAD_CHECK_SECONDS`); whether the tokens were reloaded."""
        if self._settings is None:
            return False
        now = self._clock()
        if now < self._next_check:
            return False
        self._next_check = now + RELOAD_CHECK_SECONDS
        keys = self._file_keys()
        if keys == self._keys:
            return False
        return self.reload()

    def reload(self) -> bool:
        """Read the token sources again; on a problem keep the current tokens and log it."""
        if self._settings is None:
            return False
        self._keys = self._file_keys()
        try:
            loaded = _load(self._settings, generate=False)
        except CredentialsError as exc:
            log.error("token files not reloaded, the current tokens stay valid: %s", exc)
            return False
        self._set(loaded)
        self.reloads += 1
        log.info(
            "tokens reloaded",
            extra=fields(admin_tokens=len(self._admin), reader_tokens=len(self._reader)),
        )
        return True


def load_credentials(settings: HubSettings) -> Credentials:
    """The admin and reader tokens of `settings`, generating the admin token file if needed."""
    loaded = _load(settings, generate=True)
    source = loaded.admin_token_file
    if source is not None:
        if loaded.generated:
            log.warning(
                "no admin token was configured: generated one and wrote it to the admin "
                "token file (mode 0600); read it from there",
                extra=fields(path=str(source.resolve())),
            )
        else:
            log.info("admin token read from file", extra=fields(path=str(source.resolve())))
    if any(len(token) < MIN_ADMIN_TOKEN_CHARS for token in loaded.admin):
        log.warning(
            "the admin token is short: use at least %d random characters "
            "(python3 -c 'import secrets; print(secrets.token_urlsafe(32))')",
            MIN_ADMIN_TOKEN_CHARS,
            extra=fields(length=min(len(token) for token in loaded.admin)),
        )
    return Credentials(settings, loaded)
