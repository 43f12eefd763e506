"""Entry point of `mcsync` (and `python -m cli`): options in, exit code out, no tracebacks.

Exit codes are a promise to scripts: 0 when the command did what it was asked (an empty
result included), 1 when the hub refused, did not have the object, or could not be
reached (one `error:` line on stderr carrying the hub's own message or the URL), 2 for a
usage mistake in flags or `MCSYNC_*` variables. Ctrl-C ends a `--watch` with 0 — that
is how a watch is meant to end — and anything else with 130, the shell's convention. A
closed pipe (`mcsync exports | head -1`) ends quietly.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

from cli.args import UsageError, parse_args
from cli.client import HubClient, HubError
from cli.commands import Context, run

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130


def main(argv: Sequence[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else list(argv)
    try:
        options = parse_args(args)
    except UsageError as exc:
        print(exc, file=sys.stderr)
        return EXIT_USAGE
    client = HubClient(
        base_url=options.hub_url, token=options.token, timeout=options.request_timeout
    )
    try:
        with client:
            code = run(Context(options=options, client=client, out=sys.stdout, err=sys.stderr))
        sys.stdout.flush()  # here, so that a closed pipe is caught below, not at exit
        return code
    except HubError as exc:
        print(f"error: {exc.message}", file=sys.stderr)
        return EXIT_FAILED
    except KeyboardInterrupt:
        return EXIT_OK if options.watch else EXIT_INTERRUPTED
    except BrokenPipeError:
        # The reader went away; point stdout at nothing so the exit flush cannot fail.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
