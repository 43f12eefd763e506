"""`mcsync-agent` / `python -m member`: parse settings, set up logs, run the agent.

Start-up problems — a bad flag, an unreadable token file, an unusable kubeconfig, a cluster
without the ServiceExport CRD — print ONE line naming the flag and the problem and exit 2
(SPEC §7), never a traceback. SIGTERM and SIGINT stop the agent gracefully (it finishes the
keys in hand and releases its Lease) and the process exits 0.

Logs are one line per decision, text or JSON (`--log-format`); the object's key rides along
as a field. A filter masks anything shaped like `Bearer <token>` as a second line of defence:
the agent never logs its token in the first place.
"""

from __future__ import annotations

import json
import logging
import re
import signal
import sys
import threading
from datetime import UTC, datetime
from types import FrameType
from typing import Any

from member.kube.client import KubeConfigError
from member.settings import SettingsError, parse_args

EXIT_USAGE = 2
_BEARER_RE = re.compile(r"(?i)(bearer\s+)[^\s\"',;]+")
# LogRecord attributes that are not "extra" fields.
_STANDARD = set(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {"message", "asctime"}


class _RedactBearer(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        cleaned = _BEARER_RE.sub(r"\1***", message)
        if cleaned != message:
            record.msg, record.args = cleaned, None
        return True


def _extras(record: logging.LogRecord) -> dict[str, Any]:
    return {k: v for k, v in vars(record).items() if k not in _STANDARD and not k.startswith("_")}


class _JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        for key, value in _extras(record).items():
            entry.setdefault(
                key, value if isinstance(value, str | int | float | bool) else str(value)
            )
        if record.exc_info:
            entry["error"] = self.formatException(record.exc_info)
        return json.dumps(entry, separators=(",", ":"))


class _TextFormatter(logging.Formatter):
    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s: %(message)s")


def setup_logging(*, log_format: str, level: str) -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_JsonFormatter() if log_format == "json" else _TextFormatter())
    handler.addFilter(_RedactBearer())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    # The HTTP libraries log every request at INFO/DEBUG; our own lines say what matters.
    for noisy in ("httpx", "httpcore", "urllib3", "kubernetes"):
        logging.getLogger(noisy).setLevel(logging.WARNING)


def _fail(message: str) -> int:
    print(f"mcsync-agent: {message}", file=sys.stderr)
    return EXIT_USAGE


def main(argv: list[str] | None = None) -> int:
    try:
        settings = parse_args(argv)
        token = settings.read_token()
    except SettingsError as exc:
        return _fail(str(exc))
    setup_logging(log_format=settings.log_format, level=settings.log_level)

    from opentelemetry import trace

    from member.app import Agent, tracer_provider_from_env

    provider = tracer_provider_from_env()
    if provider is not None:
        trace.set_tracer_provider(provider)

    try:
        agent = Agent(settings, token=token)
    except KubeConfigError as exc:
        flag = "--kubeconfig" if settings.kubeconfig else "kubeconfig"
        return _fail(f"{flag}: {exc}")
    except OSError as exc:  # e.g. the metrics port is taken
        return _fail(f"--metrics-port: cannot listen on {settings.metrics_port}: {exc.strerror}")

    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        logging.getLogger("member").info("received %s", signal.Signals(signum).name)
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    agent.run(stop)
    if provider is not None:
        provider.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
