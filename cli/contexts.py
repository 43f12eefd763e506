"""`mcsync config …`: list, show, choose and write the contexts of the config file.

Reading and writing the file is `cli.config`'s; applying a context to a command is
`cli.args`'s. These commands change only the file, never the hub, and a context that is
not there is an error naming the file (exit 1), as `kubectl config use-context` does.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from cli import columns, render
from cli.columns import Column
from cli.commands import CommandError, Context
from cli.config import Config, ConfigError, load, save

# One context as `config get-contexts` lists it: whether it is the current one, its name,
# its settings (the config file's keys).
ContextRow = tuple[bool, str, Mapping[str, str]]

# As kubectl's: `*` marks the current context.
COLUMNS: tuple[Column[ContextRow], ...] = (
    Column("CURRENT", lambda c, now: "*" if c[0] else ""),
    Column("NAME", lambda c, now: c[1]),
    Column("HUB-URL", lambda c, now: render.or_none(c[2].get("hub-url"))),
    Column("TOKEN-FILE", lambda c, now: render.or_none(c[2].get("token-file"))),
    Column("CERTIFICATE-AUTHORITY",
           lambda c, now: render.or_none(c[2].get("certificate-authority"))),
)


def _load(ctx: Context) -> Config:
    assert ctx.options.config_path is not None
    path = Path(ctx.options.config_path)
    try:
        return load(path, explicit=False)
    except ConfigError as exc:
        raise CommandError(str(exc)) from None


def config(ctx: Context) -> int:
    opts = ctx.options
    current = _load(ctx)
    action = opts.config_action
    if action == "get-contexts":
        rows = [(name == current.current, name, settings)
                for name, settings in current.contexts.items()]
        table = columns.table(COLUMNS, rows, now=ctx.now())
        out, err = render.listing_output(table, headers=not opts.no_headers)
        ctx.out.write(out)
        ctx.err.write(err)
        return 0
    if action == "current-context":
        if current.current is None:
            raise CommandError(f"no current context is set in {current.path}")
        ctx.out.write(current.current + "\n")
        return 0
    name = opts.context
    assert name is not None
    if action == "use-context":
        if name not in current.contexts:
            raise CommandError(f"no context named {name!r} in {current.path}")
        current.current = name
        save(current)
        ctx.out.write(f"Switched to context {name!r}.\n")
        return 0
    settings = current.contexts.setdefault(name, {})
    created = not settings
    settings.update(
        {key: str(Path(value).expanduser().absolute()) if key in ("token-file",
         "certificate-authority") else value for key, value in opts.context_settings}
    )
    if current.current is None:
        current.current = name
    save(current)
    ctx.out.write(f"Context {name!r} {'created' if created else 'modified'}.\n")
    return 0
