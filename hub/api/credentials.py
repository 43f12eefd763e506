"""The configured admin and reader tokens (SPEC §4.4, §7), loaded once at start.

Sources, in order: `MCSYNC_ADMIN_TOKEN` / `MCSYNC_READER_TOKEN`, else the token files.
When no admin token is configured anywhere, the hub makes one at first start and writes
it to the *default* admin token file (`mcsync-admin-token` beside a SQLite database, else
in the working directory: `HubSettings.effective_admin_token_file`), created with `O_EXCL` and
mode 0600 so that it is never readable by anyone else, not even for an instant; later
starts read the same file back. Two replicas racing to create it both end with the token
of whichever created the file (the loser's `O_EXCL` fails and it reads the winner's).

A token file given explicitly (`--admin-token-file`) must exist: a mistyped path used to
create a fresh admin token there silently (as root, at `/nonexistent`), and the operator's
real token then stopped working without a word. An admin token shorter than 32 characters
is accepted with a warning: it is the key to every cluster's exports.

Only the file's *path* is ever logged. Every problem raises `CredentialsError` whose
message names the flag and the problem, which the CLI prints as its one line.
"""

from __future__ import annotations

import errno
import logging
import os
import secrets
import stat
from dataclasses import dataclass
from pathlib import Path

from pydantic import SecretStr

from hub.logs import fields
from hub.settings import HubSettings

log = logging.getLogger("mcsync.hub.credentials")

GENERATED_TOKEN_BYTES = 32
# A token shorter than this draws a warning at start (a generated one has 43 characters).
MIN_ADMIN_TOKEN_CHARS = 32


class CredentialsError(ValueError):
    """A token source is unusable; the message names the flag and the problem."""


@dataclass(frozen=True)
class Credentials:
    admin: SecretStr
    reader: SecretStr | None
    # Where the admin token came from when it came from a file (None: from the environment).
    admin_token_file: Path | None = None
    generated: bool = False


def _read_token_file(path: Path, *, flag: str) -> SecretStr:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise CredentialsError(f"{flag}: {path} does not exist") from None
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise CredentialsError(f"{flag}: cannot read {path}: {reason}") from None
    token = text.strip()
    if not token:
        raise CredentialsError(f"{flag}: {path} is empty")
    if any(c.isspace() for c in token):
        raise CredentialsError(f"{flag}: {path} must hold one token without whitespace")
    return SecretStr(token)


def _warn_if_shared(path: Path) -> None:
    try:
        mode = path.stat().st_mode
    except OSError:
        return
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        log.warning(
            "token file is readable by other users; chmod 600 it",
            extra=fields(path=str(path.resolve()), mode=oct(mode & 0o777)),
        )


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


def load_credentials(settings: HubSettings) -> Credentials:
    """The admin and reader tokens of `settings`, generating the admin token file if needed."""
    reader: SecretStr | None = settings.reader_token
    if settings.reader_token_file is not None:
        reader = _read_token_file(settings.reader_token_file, flag="--reader-token-file")
        _warn_if_shared(settings.reader_token_file)

    if settings.admin_token is not None:
        admin = settings.admin_token
        source: Path | None = None
        generated = False
    else:
        source = settings.effective_admin_token_file
        # Only the default location is ever created; an explicit path must exist.
        generated = settings.admin_token_file is None and _create_admin_token_file(source)
        admin = _read_token_file(source, flag="--admin-token-file")
        if generated:
            log.warning(
                "no admin token was configured: generated one and wrote it to the admin "
                "token file (mode 0600); read it from there",
                extra=fields(path=str(source.resolve())),
            )
        else:
            _warn_if_shared(source)
            log.info("admin token read from file", extra=fields(path=str(source.resolve())))

    if len(admin.get_secret_value()) < MIN_ADMIN_TOKEN_CHARS:
        log.warning(
            "the admin token is short: use at least %d random characters "
            "(python3 -c 'import secrets; print(secrets.token_urlsafe(32))')",
            MIN_ADMIN_TOKEN_CHARS,
            extra=fields(length=len(admin.get_secret_value())),
        )
    if reader is not None and reader.get_secret_value() == admin.get_secret_value():
        raise CredentialsError(
            "the reader token must differ from the admin token (it would grant admin rights)"
        )
    return Credentials(admin=admin, reader=reader, admin_token_file=source, generated=generated)
