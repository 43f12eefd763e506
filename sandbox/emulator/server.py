"""Serve an emulator with uvicorn: in a background thread (tests) or in the foreground.

Each emulated cluster is its own `EmulatorServer` on its own loopback port, so a test can
run several member clusters at once. The listening socket is bound before uvicorn starts,
which makes port 0 (any free port) race-free and lets the URL be known up front.
"""

from __future__ import annotations

import socket
import threading
import time

import uvicorn

from sandbox.emulator.app import create_app
from sandbox.emulator.state import EmulatorState


def bind_socket(host: str, port: int) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(128)
    sock.set_inheritable(True)
    return sock


def make_server(state: EmulatorState, *, test_controls: bool = False) -> uvicorn.Server:
    config = uvicorn.Config(
        create_app(state, test_controls=test_controls),
        log_level="warning",
        lifespan="off",
        access_log=False,
        timeout_graceful_shutdown=2,
        # A watch may stay open for many minutes: never close idle keep-alives early.
        timeout_keep_alive=30,
    )
    return uvicorn.Server(config)


class EmulatorServer:
    """One emulated cluster served on a loopback port by a background uvicorn thread.

    Only tests and benchmarks run an emulator in their own process, so its HTTP test
    controls are on by default here; `python -m sandbox.emulator` (what `mcsync sandbox`
    starts) serves them only with `--test-controls`.
    """

    def __init__(self, state: EmulatorState | None = None, *, host: str = "127.0.0.1",
                 port: int = 0, test_controls: bool = True) -> None:
        self.state = state or EmulatorState()
        self.host = host
        self._sock = bind_socket(host, port)
        self.port: int = self._sock.getsockname()[1]
        self._server = make_server(self.state, test_controls=test_controls)
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def start(self, *, timeout: float = 10.0) -> EmulatorServer:
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": [self._sock]},
            name=f"kube-emulator-{self.port}", daemon=True,
        )
        self._thread.start()
        deadline = time.monotonic() + timeout
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError(f"emulator on {self.url} did not start")
            time.sleep(0.01)
        return self

    def stop(self, *, timeout: float = 10.0) -> None:
        # Open watch streams would hold graceful shutdown; end them first.
        self.state.unpause()
        self.state.close_watches()
        self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout)
        self._sock.close()
        self.state.close()

    def __enter__(self) -> EmulatorServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
