"""`mcsync clusters register`, `deregister`, `rotate-token`, `set-scope` and
`allow-withdrawal`: the writes the CLI
makes, with an admin token, and the care they need.

Registering answers the member token once; losing it, or clobbering a working one, costs a
deregistration that withdraws the cluster's exports. So:

* the token file must not exist (unless `--overwrite`), and its directory must be
  writable, *before* the hub is asked — a temporary file (mode 0600) is made next to it
  first, so a bad path fails without registering anything;
* the token goes into that temporary file, which then takes its name: linked when the
  name must be new (so a file that appeared meanwhile is still not overwritten), renamed
  over it with `--overwrite`; a reader never sees a half-written file;
* a 409 (already registered) leaves every file alone and says what to do.

Deregistering withdraws every export of the cluster in every other cluster, so it asks
first (showing how many exports go) unless `--yes`; with no terminal to ask on, it
refuses rather than assume.

`set-scope` changes the namespaces a cluster may export from and those it imports
(docs/reference.md#scope-and-limits), as `register --export-namespace/--import-namespace` set them:
a merge patch of the cluster's spec, so a list not named is kept; `--all-…` makes one absent (every
namespace).

`rotate-token` issues a cluster's member token anew (docs/reference.md#credentials) and
writes it as `register` does, to a new file (mode 0600), never to the terminal; the old
token keeps working until the agent first uses the new one or the hub's grace period
ends, so the Secret can be updated without a refused request.

`allow-withdrawal` lets a cluster's next held mass withdrawal through, once
(docs/reference.md#failover): the agent held a repair that would withdraw most of its exports at
once, and the cluster's `WithdrawalHeld` condition said so. It asks nothing: what it allows is what
the condition named, and it says whether a withdrawal is held now or the allowance waits.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from cli.client import HubError
from cli.commands import CommandError, Context, print_object
from cli.options import Options
from shared.constants import CONDITION_WITHDRAWAL_HELD
from shared.models import MemberCluster
from shared.settingscli import UsageError
from shared.timefmt import format_millis


def _temporary_beside(target: Path) -> Path:
    """An empty file, mode 0600, in `target`'s directory; CommandError naming the path."""
    directory = target.parent
    for attempt in range(100):
        candidate = directory / f".{target.name}.{os.getpid()}.{attempt}.tmp"
        try:
            fd = os.open(candidate, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            continue
        except OSError as exc:
            raise CommandError(
                f"--token-file: cannot write in {directory}: {exc.strerror or exc}"
            ) from None
        os.close(fd)
        return candidate
    raise CommandError(f"--token-file: cannot make a temporary file in {directory}")


def _store_token(temporary: Path, target: Path, token: str, *, overwrite: bool) -> None:
    with open(temporary, "w", encoding="utf-8") as out:
        os.fchmod(out.fileno(), 0o600)
        out.write(token + "\n")
        out.flush()
        os.fsync(out.fileno())
    if overwrite:
        os.replace(temporary, target)
    else:
        os.link(temporary, target)  # FileExistsError if the name was taken meanwhile
        temporary.unlink()


def register(ctx: Context) -> int:
    opts = ctx.options
    assert opts.name is not None and opts.member_token_file is not None
    target = Path(opts.member_token_file).expanduser()
    if target.is_dir():
        raise CommandError(f"--token-file: {target} is a directory")
    if target.exists() and not opts.overwrite:
        raise CommandError(
            f"--token-file: {target} exists; pass --overwrite to replace it (the token it "
            "holds stops being kept)"
        )
    temporary = _temporary_beside(target)
    try:
        try:
            registered = ctx.client.register_cluster(
                opts.name, dict(opts.labels), _scope_spec(opts)
            )
        except HubError as exc:
            if exc.code == 409:
                raise CommandError(
                    f"cluster {opts.name} is already registered; its token was shown only "
                    f"when it was registered (to issue a new one: mcsync clusters deregister "
                    f"{opts.name}, which withdraws its exports, then register it again)"
                ) from None
            raise
        try:
            _store_token(temporary, target, registered.token, overwrite=opts.overwrite)
        except OSError as exc:
            raise CommandError(
                f"cluster {opts.name} is registered, but its token could not be written to "
                f"{target}: {exc.strerror or exc}; deregister it and register it again"
            ) from None
    finally:
        with contextlib.suppress(FileNotFoundError):
            temporary.unlink()
    # The token is never printed, whatever the output format.
    shown = MemberCluster.model_validate(registered.model_dump(exclude={"token"}))
    if not print_object(ctx, shown):
        ctx.out.write(f"cluster/{opts.name} registered; its token is in {target} (mode 0600)\n")
    return 0


def rotate_token(ctx: Context) -> int:
    opts = ctx.options
    assert opts.name is not None and opts.member_token_file is not None
    target = Path(opts.member_token_file).expanduser()
    if target.is_dir():
        raise CommandError(f"--token-file: {target} is a directory")
    if target.exists() and not opts.overwrite:
        raise CommandError(f"--token-file: {target} exists; pass --overwrite to replace it")
    temporary = _temporary_beside(target)
    try:
        rotated = ctx.client.rotate_token(opts.name)
        try:
            _store_token(temporary, target, rotated.token, overwrite=opts.overwrite)
        except OSError as exc:
            raise CommandError(
                f"cluster {opts.name} has a new token, but it could not be written to "
                f"{target}: {exc.strerror or exc}; rotate it again (the old token still works "
                "until the grace period ends)"
            ) from None
    finally:
        with contextlib.suppress(FileNotFoundError):
            temporary.unlink()
    shown = MemberCluster.model_validate(
        rotated.model_dump(exclude={"token", "previous_token_expires"})
    )
    if not print_object(ctx, shown):
        expires = rotated.previous_token_expires
        until = (
            f"the old one works until {format_millis(expires)} or until the agent first uses "
            "the new one"
            if expires is not None
            else "the old one no longer works"
        )
        ctx.out.write(
            f"cluster/{opts.name}: new token in {target} (mode 0600); {until}. Put it in the "
            "agent's token Secret: the agent reads it again without a restart\n"
        )
    return 0


def _scope_spec(opts: Options) -> dict[str, list[str] | None]:
    """The spec fields the scope flags give (docs/reference.md#scope-and-limits): a list, or None
    for "every namespace" (`--all-…`); a field no flag names is left out."""
    spec: dict[str, list[str] | None] = {}
    for kind, given, every in (
        ("export", opts.export_namespaces, opts.all_export_namespaces),
        ("import", opts.import_namespaces, opts.all_import_namespaces),
    ):
        if given is not None:
            spec[f"{kind}Namespaces"] = list(given)
        elif every:
            spec[f"{kind}Namespaces"] = None
    return spec


def set_scope(ctx: Context) -> int:
    """`mcsync clusters set-scope`: a merge patch of the cluster's spec; the hub applies it
    to the cluster's next write and its next import list or watch."""
    opts = ctx.options
    assert opts.name is not None
    cluster = ctx.client.patch_cluster(opts.name, {"spec": _scope_spec(opts)})
    if not print_object(ctx, cluster):
        exports = cluster.spec.export_namespaces
        imports = cluster.spec.import_namespaces
        ctx.out.write(
            f"cluster/{opts.name} scoped: exports from "
            f"{', '.join(exports) if exports is not None else 'every namespace'}"
            f"{' (none)' if exports == [] else ''}; imports "
            f"{', '.join(imports) if imports is not None else 'every namespace'}"
            f"{' (none)' if imports == [] else ''}\n"
        )
    return 0


def _confirm(ctx: Context, question: str) -> bool:
    stdin = ctx.stdin
    if stdin is None or not stdin.isatty():
        raise UsageError(
            "mcsync clusters deregister: error: refusing to deregister without confirmation: "
            "stdin is not a terminal; pass --yes"
        )
    ctx.err.write(question + " [y/N] ")
    ctx.err.flush()
    return stdin.readline().strip().lower() in ("y", "yes")


def deregister(ctx: Context) -> int:
    opts = ctx.options
    assert opts.name is not None
    if not opts.yes:
        current = ctx.client.get_cluster(opts.name)  # a 404 ends here, before any question
        count = current.status.export_count
        if not _confirm(ctx, f"Deregister cluster {opts.name}? This withdraws its {count} "
                             f"export{'s' if count != 1 else ''} from every cluster."):
            raise CommandError(f"cluster {opts.name} was not deregistered")
    last = ctx.client.deregister_cluster(opts.name)
    if not print_object(ctx, last):
        count = last.status.export_count
        ctx.out.write(f"cluster/{opts.name} deregistered; {count} "
                      f"export{'s' if count != 1 else ''} withdrawn\n")
    return 0



def allow_withdrawal(ctx: Context) -> int:
    opts = ctx.options
    assert opts.name is not None
    cluster = ctx.client.allow_withdrawal(opts.name)
    if not print_object(ctx, cluster):
        held = any(
            c.type == CONDITION_WITHDRAWAL_HELD and c.status == "True"
            for c in cluster.status.conditions
        )
        if held:
            ctx.out.write(
                f"cluster/{opts.name}: its held withdrawal goes through at the agent's next "
                "heartbeat, once\n"
            )
        else:
            ctx.out.write(
                f"cluster/{opts.name}: no withdrawal is held now; the next one goes through, "
                "once\n"
            )
    return 0
