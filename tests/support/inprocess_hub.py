"""The hub served from the test process: the agent tests' hub when its process is not what
they test.

`InProcessHub` answers like `tests.member.agent_support.HubProcess` (same URL, tokens,
`request`/`register`/`export`/`exports`, `stop()`/`start()` on the same port and database)
but runs what `mcsync-hub serve` runs — its flags parsed by `hub.__main__.parse`, the
migrations, the store, `create_app` and `HubServer` over a socket from `hub.listen` — on
an event loop in a thread of the test process, so a test pays no interpreter start-up and
imports. Its log lines (the hub's format, tokens redacted) go to `log_path` as the
process's do. Tests of the process itself (exit codes, signals) keep `HubProcess`.

`stop(kill=True)` ends the server without the graceful drain (uvicorn's force exit): the
agents see the connections close, as when the process dies.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.member.agent_support import HubProcess, hub_directory, served, wait_for


@dataclass
class InProcessHub(HubProcess):
    """`HubProcess`, served by a thread of the test process."""

    _thread: threading.Thread | None = field(default=None, repr=False)
    _server: Any = field(default=None, repr=False)
    _failure: BaseException | None = field(default=None, repr=False)

    def start(self) -> None:
        from hub.__main__ import parse

        argv = ["serve", "--host", "127.0.0.1", "--port", str(self.port),
                "--database-url", self.database_url, *self.extra_args]
        environ = {"MCSYNC_ADMIN_TOKEN": self.admin_token,
                   "MCSYNC_READER_TOKEN": self.reader_token}
        _, settings = parse(argv, environ)
        self._failure = None
        self._server = None
        started = threading.Event()
        self._thread = threading.Thread(
            target=self._run, args=(settings, started), name=f"hub-{self.port}", daemon=True
        )
        self._thread.start()
        wait_for(lambda: started.is_set(), what="the in-process hub to start")
        if self._failure is not None:
            raise RuntimeError(f"the in-process hub did not start: {self._failure!r}")
        wait_for(self.answers_ready, what="the hub's /readyz")

    def _run(self, settings: Any, started: threading.Event) -> None:
        handler = _log_to(self.log_path, settings)
        try:
            asyncio.run(self._serve(settings, started))
        except BaseException as exc:  # reported by start(), or by the next request failing
            self._failure = exc
        finally:
            started.set()
            _stop_logging(handler)

    async def _serve(self, settings: Any, started: threading.Event) -> None:
        from hub import listen
        from hub.app import create_app, open_store
        from hub.serve import _credentials, _migrate, server_config

        listening = listen.bind(settings.host, settings.port, backlog=settings.backlog)
        try:
            if settings.migrate:
                await _migrate(settings)
            store = await open_store(settings)
            try:
                app = create_app(settings, store=store, credentials=_credentials(settings))
                server = _test_hub_server(server_config(settings, app), app=app)
                self._server = server
                started.set()
                await server.serve(sockets=[listening])
            finally:
                await store.close()
        finally:
            listening.close()

    def stop(self, *, kill: bool = False) -> None:
        thread, server = self._thread, self._server
        if thread is None or not thread.is_alive():
            return
        if server is not None:
            if kill:
                server.force_exit = True
            server.should_exit = True
        thread.join(30)
        assert not thread.is_alive(), "the in-process hub did not stop within 30 s"
        self._thread = None


# The hub's loggers: its own, its modules', uvicorn's (which it routes to its own format).
_HUB_LOGGERS = ("mcsync", "hub", "uvicorn")


class _FromThread(logging.Filter):
    """Only the records of the thread that made it: the hub's event loop."""

    def __init__(self) -> None:
        super().__init__()
        self.ident = threading.get_ident()

    def filter(self, record: logging.LogRecord) -> bool:
        return threading.get_ident() == self.ident


def _log_to(path: Path, settings: Any) -> logging.Handler:
    """What the hub process writes to stderr (`hub.logs`: its format, token redaction),
    into `path`, where `HubProcess` has its log; on the calling thread's records only."""
    from shared.logs import JsonFormatter, RedactBearer, TextFormatter, TraceContext

    handler = logging.FileHandler(path, encoding="utf-8")
    handler.setFormatter(JsonFormatter() if settings.log_format == "json" else TextFormatter())
    handler.addFilter(_FromThread())
    handler.addFilter(RedactBearer())
    handler.addFilter(TraceContext())
    handler.setLevel(settings.log_level.upper())
    with _logging_lock:
        _hub_handlers.append(handler)
        logging.getLogger().addHandler(handler)
        for name in _HUB_LOGGERS:
            logging.getLogger(name).setLevel(min(h.level for h in _hub_handlers))
    return handler


def _stop_logging(handler: logging.Handler) -> None:
    with _logging_lock:
        logging.getLogger().removeHandler(handler)
        _hub_handlers.remove(handler)
        for name in _HUB_LOGGERS:
            level = min((h.level for h in _hub_handlers), default=logging.NOTSET)
            logging.getLogger(name).setLevel(level)
    handler.close()


_logging_lock = threading.Lock()
_hub_handlers: list[logging.Handler] = []


def _test_hub_server(config: Any, *, app: Any) -> Any:
    """`hub.serve.HubServer` minus what is the process's alone: it freezes the garbage
    collector (`gc.freeze`, a larger young generation), which would change the test
    process's for every test after."""
    from hub.serve import HubServer

    class TestHubServer(HubServer):
        async def startup(self, sockets: Any = None) -> None:
            threshold = gc.get_threshold()
            await super().startup(sockets=sockets)
            gc.unfreeze()
            gc.set_threshold(*threshold)

    return TestHubServer(config, app=app)


@pytest.fixture
def inprocess_hub(tmp_path: Path) -> Iterator[InProcessHub]:
    """`hub_process`, served from the test process (SQLite file in tmp_path)."""
    yield from served(InProcessHub(directory=hub_directory(tmp_path)))


@pytest.fixture
def inprocess_backend_hub(database_url: str, tmp_path: Path) -> Iterator[InProcessHub]:
    """`backend_hub`, served from the test process (the variant's `database_url`)."""
    yield from served(InProcessHub(directory=hub_directory(tmp_path), database=database_url))
