"""The CLI's config file: named contexts (hub URL, token file, CA), as kubeconfig has them.

An operator who works with several hubs keeps them in `~/.config/mcsync/config` (or
`$XDG_CONFIG_HOME/mcsync/config`, or the file `--config` / `MCSYNC_CONFIG` names) and
switches with `mcsync config use-context NAME` or one-off with `--context NAME`:

    current-context: prod
    contexts:
    - name: prod
      hub-url: https://hub.example:8443
      token-file: prod.token            # relative paths are relative to this file
      certificate-authority: prod-ca.pem
    - name: dev
      hub-url: http://127.0.0.1:8080
      token-file: ~/.local/state/mcsync/mcsync-admin-token

The file is the third layer of precedence — a flag beats an `MCSYNC_*` variable, which
beats the context, which beats the default — and `cli.args` applies it; this module only
reads and writes the file. It holds paths, never a token itself. A missing default file
is an empty config; a file named explicitly that does not exist, or one that does not
parse, is an error naming the file.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

CONTEXT_KEYS = ("hub-url", "token-file", "certificate-authority", "insecure-skip-tls-verify")
PATH_KEYS = ("token-file", "certificate-authority")


class ConfigError(Exception):
    """The config file cannot be read, parsed or does not hold what was asked."""


def default_path(environ: Mapping[str, str]) -> Path:
    base = environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base).expanduser() / "mcsync" / "config"


@dataclass
class Config:
    """The parsed file; `contexts` maps a name to its settings (keys of CONTEXT_KEYS, as
    text, paths already made absolute)."""

    path: Path
    current: str | None = None
    contexts: dict[str, dict[str, str]] = field(default_factory=dict)
    exists: bool = False

    def context(self, name: str | None) -> dict[str, str]:
        """The settings of `name` (or of the current context); {} when there is none."""
        chosen = name or self.current
        if chosen is None:
            return {}
        if chosen not in self.contexts:
            where = f" in {self.path}" if self.exists else f" ({self.path} does not exist)"
            raise ConfigError(f"no context named {chosen!r}{where}")
        return self.contexts[chosen]


def _absolute(value: str, base: Path) -> str:
    path = Path(value).expanduser()
    return str(path if path.is_absolute() else base / path)


def load(path: Path, *, explicit: bool) -> Config:
    """Read the file; an absent default file is an empty Config."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        if explicit:
            raise ConfigError(f"{path} does not exist") from None
        return Config(path=path)
    except OSError as exc:
        raise ConfigError(f"cannot read {path}: {exc.strerror or exc}") from None
    try:
        data: Any = yaml.safe_load(text) or {}
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path} is not YAML: {' '.join(str(exc).split())}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping with current-context and contexts")
    config = Config(path=path, exists=True)
    current = data.get("current-context")
    if current is not None and not isinstance(current, str):
        raise ConfigError(f"{path}: current-context must be a name")
    config.current = current or None
    raw_contexts = data.get("contexts") or []
    if not isinstance(raw_contexts, list):
        raise ConfigError(f"{path}: contexts must be a list")
    for index, entry in enumerate(raw_contexts):
        if not isinstance(entry, dict) or not isinstance(entry.get("name"), str):
            raise ConfigError(f"{path}: contexts[{index}] needs a name")
        unknown = sorted(set(entry) - {"name", *CONTEXT_KEYS})
        if unknown:
            raise ConfigError(
                f"{path}: context {entry['name']!r}: unknown key {unknown[0]!r} "
                f"(known: {', '.join(CONTEXT_KEYS)})"
            )
        settings = {k: str(v).lower() if isinstance(v, bool) else str(v)
                    for k, v in entry.items() if k != "name" and v is not None}
        for key in PATH_KEYS:
            if key in settings:
                settings[key] = _absolute(settings[key], path.parent)
        config.contexts[entry["name"]] = settings
    return config


def save(config: Config) -> None:
    """Write the file whole (a temporary file renamed over it), mode 0600 when new."""
    data = {
        "current-context": config.current,
        "contexts": [{"name": name, **settings} for name, settings in config.contexts.items()],
    }
    config.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    try:
        mode = config.path.stat().st_mode & 0o777
    except FileNotFoundError:
        mode = 0o600
    fd, temporary = tempfile.mkstemp(dir=config.path.parent, prefix=".config-")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            yaml.safe_dump(data, out, sort_keys=False, default_flow_style=False)
        os.chmod(temporary, mode)
        os.replace(temporary, config.path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
