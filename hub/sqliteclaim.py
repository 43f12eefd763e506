"""One hub per SQLite file: the serving hub holds an exclusive lock on its database file.

Two hubs on one SQLite file do not fail loudly: both start, both answer, and each keeps
its own in-memory feed, so a watcher of one never hears of the other's writes and two
sweepers judge staleness from two clocks. A second hub started by mistake (a forgotten
terminal, a second `mcsync-hub` in the same directory) must therefore stop at start with
one line naming the file, before it migrates or serves anything.

The claim is `flock(2)` on the database file itself, taken without waiting: it is
released by the kernel however the holder ends (even `kill -9`), so a crashed hub never
leaves a stale claim behind, and it needs no lock file of its own beside the database.
SQLite's own locking uses POSIX record locks (`fcntl`), which on Linux are independent of
`flock`, so the claim never blocks SQLite. PostgreSQL needs none of this: several
replicas over one PostgreSQL database is the supported way to run more than one hub.
"""

from __future__ import annotations

import errno
import fcntl
import os
from pathlib import Path


class SQLiteClaimError(Exception):
    """The SQLite file cannot be claimed; the message is the one line to print."""


class SQLiteClaim:
    """The serving hub's exclusive claim on `path`; `release()` (or exit) gives it back."""

    def __init__(self, path: Path) -> None:
        self.path = path
        try:
            # 0600: the database holds token hashes and every cluster's records, and the
            # file may be created here, before SQLite opens it (SQLite takes an empty file
            # as an empty database).
            self._fd: int | None = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        except OSError as exc:
            raise SQLiteClaimError(
                f"--database-url: cannot open the SQLite database {path}: {exc.strerror}"
            ) from None
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            os.close(self._fd)
            self._fd = None
            if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN):
                raise SQLiteClaimError(
                    f"--database-url: another mcsync-hub is already serving the SQLite "
                    f"database {path}; stop it first, or give this one its own file "
                    "(--database-url / MCSYNC_DATABASE_URL). Several hubs need PostgreSQL."
                ) from None
            raise SQLiteClaimError(
                f"--database-url: cannot lock the SQLite database {path}: {exc.strerror}"
            ) from None

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def missing_directory(path: Path) -> str | None:
    """The one line for a SQLite file whose directory does not exist, else None: said
    before anything else is checked, so the database is named rather than a token file
    that would have been written beside it."""
    directory = path.parent if str(path.parent) else Path(".")
    if directory.is_dir():
        return None
    return (
        f"--database-url: cannot create the SQLite database {path}: its directory "
        f"{directory} does not exist (create it, or point --database-url / "
        "MCSYNC_DATABASE_URL elsewhere)"
    )
