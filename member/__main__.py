"""`mcsync-agent` / `python -m member`: parse settings, set up logs, run the agent.

Start-up problems — a bad flag, variable or config-file value, an unreadable token file, an
unusable kubeconfig, a cluster without the ServiceExport CRD, a cluster id that disagrees
with the About API's (`member.clusteridentity`) — print ONE line naming the flag and the
problem (`PROG: error: argument --flag: …`, as the hub and the CLI do) and
exit 2 (docs/reference.md#flags), never a traceback. SIGTERM and SIGINT stop the agent gracefully
(it finishes the keys in hand and releases its Lease) and the process exits 0.

Logs are one line per decision, text or JSON (`--log-format`, the format of `shared.logs`
that the hub writes too); the object's key and cluster ride along as fields, and the trace id
when tracing is on. A filter masks anything shaped like `Bearer <token>` as a second line of
defence: the agent never logs its token in the first place. Tracing is on only when the
standard `OTEL_*` variables ask for it (`shared.tracing`).
"""

from __future__ import annotations

import logging
import signal
import sys
import threading
from types import FrameType

from member.settings import PROG, UsageError, parse_args
from shared.logs import configure_logging

EXIT_USAGE = 2
SERVICE_NAME = "mcsync-agent"
# HTTP libraries log every request at INFO/DEBUG; our own lines say what matters.
_NOISY_LOGGERS = ("httpx", "httpcore", "urllib3", "kubernetes")


def _fail(message: str) -> int:
    # One line, whatever the message carries (a YAML parser's error spans several).
    print(f"{PROG}: error: {' '.join(message.split())}", file=sys.stderr)
    return EXIT_USAGE


def main(argv: list[str] | None = None) -> int:
    try:
        settings = parse_args(argv)
        token = settings.read_token()
    except UsageError as exc:
        print(exc, file=sys.stderr)
        return EXIT_USAGE
    configure_logging(
        log_format=settings.log_format, level=settings.log_level, quiet=_NOISY_LOGGERS
    )
    # urllib3 warns of each retry of a cluster it cannot reach; the agent says it once, in
    # its own words (the start-up error, or its reconcile and discovery lines).
    logging.getLogger("urllib3.connectionpool").setLevel(logging.ERROR)

    # Only once the flags were accepted: a refused flag imports no Kubernetes or HTTP client
    # (docs/decisions.md#start-up-cost).
    from member.app import Agent, MetricsPortError
    from member.clusteridentity import ClusterIdentityError
    from member.kube.client import KubeConfigError
    from shared.tracing import tracer_provider_from_env

    provider = tracer_provider_from_env(service_name=SERVICE_NAME)
    try:
        agent = Agent(settings, token=token, tracer_provider=provider)
    except KubeConfigError as exc:
        flag = "argument --kubeconfig" if settings.kubeconfig else "kubeconfig"
        return _fail(f"{flag}: {exc}")
    except ClusterIdentityError as exc:
        return _fail(str(exc))
    except MetricsPortError as exc:
        return _fail(f"argument {exc.flag}: {exc}")
    except OSError as exc:
        # Not a flag's fault as far as we can tell: say what failed, and on which file,
        # rather than blame a flag that had nothing to do with it.
        where = f" ({exc.filename})" if exc.filename else ""
        return _fail(f"cannot start: {exc.strerror or exc}{where}")

    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        logging.getLogger("member").info("received %s", signal.Signals(signum).name)
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    agent.run(stop)
    if provider is not None:
        provider.shutdown()
    if agent.fatal is not None:
        return _fail(agent.fatal)
    return 0


if __name__ == "__main__":
    sys.exit(main())
