"""The agent's member token, re-read when its file changes (docs/reference.md#credentials).

In Kubernetes the token is a Secret mounted as a directory: when an admin rotates it
(`mcsync clusters rotate-token`) and updates the Secret, the kubelet swaps the volume's
`..data` symlink to a new directory, so the path names a new inode. The hub keeps the old
token valid for a grace period, or until the agent first uses the new one, so the agent
only has to notice within that time — no restart, no watcher thread:

* every request asks `current()`, which looks at the file (one `stat`) at most once per
  `check_seconds` and reads it again when its inode, device, size or modification time
  changed;
* a 401 from the hub asks `refresh()`, which reads the file at once: the hub may have
  retired the old token (the new one was used) before this process looked.

A file that cannot be read, or holds no token, while it changes (a tool that truncates
before writing) leaves the current token in use; the next look tries again.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path

logger = logging.getLogger(__name__)

CHECK_SECONDS = 1.0

FileKey = tuple[int, int, int, int]


def _key(path: Path) -> FileKey | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_ino, st.st_dev, st.st_size, st.st_mtime_ns)


def _read(path: Path) -> str | None:
    try:
        token = path.read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError):
        return None
    if not token or any(ch.isspace() for ch in token):
        return None
    return token


class TokenSource:
    """The token to send now: fixed, or the content of a file that may change. Thread-safe."""

    def __init__(
        self,
        token: str,
        *,
        path: Path | None = None,
        check_seconds: float = CHECK_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._token = token
        self._path = path
        self._check_seconds = check_seconds
        self._clock = clock
        self._lock = threading.Lock()
        self._key = _key(path) if path is not None else None
        self._next_check = clock() + check_seconds
        self.reloads = 0

    @property
    def token(self) -> str:
        """The token in use, without looking at the file."""
        return self._token

    def current(self) -> str:
        """The token, re-read first when the file changed since the last look."""
        if self._path is None or self._clock() < self._next_check:
            return self._token
        with self._lock:
            if self._clock() >= self._next_check:
                self._next_check = self._clock() + self._check_seconds
                if _key(self._path) != self._key:
                    self._load()
        return self._token

    def refresh(self) -> bool:
        """Read the file now (after a 401); whether the token changed."""
        if self._path is None:
            return False
        with self._lock:
            self._next_check = self._clock() + self._check_seconds
            return self._load()

    def _load(self) -> bool:
        assert self._path is not None
        key = _key(self._path)
        token = _read(self._path)
        if token is None:
            logger.warning("the token file holds no token now; the current token stays in use",
                           extra={"path": str(self._path)})
            return False
        self._key = key
        if token == self._token:
            return False
        self._token = token
        self.reloads += 1
        logger.info("the member token changed; using the new one", extra={"path": str(self._path)})
        return True
