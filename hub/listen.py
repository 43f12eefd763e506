"""The hub's listening socket, bound before anything else happens at start.

A port that another process holds is a mistake of its own, with its own exit code (4):
finding it after the migrations ran would have touched the database for nothing (and,
for a second hub started by mistake on one machine, migrated a database the first is
serving). So `mcsync-hub serve` binds first, then opens the database, then hands the bound
socket to uvicorn.
"""

from __future__ import annotations

import errno
import socket


class ListenError(Exception):
    """The address cannot be listened on; the message says which and why."""


def bind(host: str, port: int, *, backlog: int) -> socket.socket:
    """A listening TCP socket on host:port (the first address `host` resolves to)."""
    try:
        family, kind, proto, _, address = socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)[0]
    except socket.gaierror as exc:
        raise ListenError(f"cannot resolve {host!r}: {exc.strerror}") from None
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(backlog)
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            raise ListenError(f"{host}:{port} is in use by another process: stop it, or "
                              "choose another --port (MCSYNC_PORT)") from None
        if exc.errno == errno.EACCES:
            raise ListenError(f"{host}:{port}: permission denied (ports below 1024 need "
                              "privileges): choose another --port (MCSYNC_PORT)") from None
        raise ListenError(f"cannot listen on {host}:{port}: {exc.strerror}") from None
    return sock
