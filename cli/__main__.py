"""Entry point of `mcsync` (and `python -m cli`): options in, exit code out, no tracebacks.

Exit codes are a promise to scripts: 0 when the command did what it was asked (an empty
result included), 1 when the hub refused, did not have the object, or could not be
reached, or the command could not finish (one `error:` line on stderr carrying the hub's
own message, the URL, or the reason), 2 for a usage mistake in flags, `MCSYNC_*`
variables or the config file. Ctrl-C ends a `--watch` with 0 — that is how a watch is
meant to end — and anything else with 130, the shell's convention. A closed pipe
(`mcsync exports | head -1`) ends quietly.
"""

from __future__ import annotations

import os
import ssl
import sys
from collections.abc import Mapping, Sequence
from typing import TextIO, cast

import httpx

from cli.args import Options, UsageError, parse_args
from cli.client import HubClient, HubError
from cli.commands import CommandError, Context
from cli.dispatch import run
from cli.hints import next_step
from cli.terminal import EscapingStream

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130


def _verify(options: Options) -> ssl.SSLContext | bool:
    """The TLS check of the hub's certificate: the system's CAs, or the given CA file, or
    none at all with --insecure-skip-tls-verify."""
    if options.insecure_skip_tls_verify:
        return False
    if options.certificate_authority is None:
        return True
    try:
        return ssl.create_default_context(cafile=os.path.expanduser(options.certificate_authority))
    except (OSError, ssl.SSLError) as exc:
        reason = getattr(exc, "strerror", None) or str(exc)
        raise UsageError(
            f"mcsync: error: argument --certificate-authority: cannot load "
            f"{options.certificate_authority}: {reason}"
        ) from None


def main(
    argv: Sequence[str] | None = None,
    *,
    environ: Mapping[str, str] | None = None,
    transport: httpx.BaseTransport | None = None,
    stdin: TextIO | None = None,
    out: TextIO | None = None,
    err: TextIO | None = None,
) -> int:
    """Run one command. The keyword arguments exist for tests (a fake hub's transport,
    streams to read back); the program passes none."""
    args = sys.argv[1:] if argv is None else list(argv)
    # Every line the CLI prints goes through one escaping layer (`cli.terminal`): much of
    # it is text that member clusters wrote.
    out = cast(TextIO, EscapingStream(out or sys.stdout))
    err = cast(TextIO, EscapingStream(err or sys.stderr))
    try:
        options = parse_args(args, environ)
        verify = _verify(options)
    except UsageError as exc:
        print(exc, file=err)
        return EXIT_USAGE
    if options.insecure_skip_tls_verify and options.hub_url.startswith("https://"):
        print("warning: --insecure-skip-tls-verify: the hub's certificate is not checked",
              file=err)

    def trace(line: str) -> None:
        print(line, file=err, flush=True)

    client = HubClient(
        base_url=options.hub_url, token=options.token, timeout=options.request_timeout,
        verify=verify, trace=trace if options.verbose else None, transport=transport,
    )
    context = Context(options=options, client=client, out=out, err=err,
                      stdin=stdin if stdin is not None else sys.stdin)
    try:
        with client:
            code = run(context)
        out.flush()  # here, so that a closed pipe is caught below, not at exit
        return code
    except UsageError as exc:
        print(exc, file=err)
        return EXIT_USAGE
    except (HubError, CommandError) as exc:
        message = (exc.message + next_step(exc, options) if isinstance(exc, HubError)
                   else str(exc))
        out.flush()
        print(f"error: {message}", file=err)
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
