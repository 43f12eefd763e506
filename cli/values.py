"""The value checks of `mcsync`'s flags, shared by flags, `MCSYNC_*` variables and the
config file's context: text in, a value or a ValueError naming the problem out.

A module of their own so that each command's module (`cli.cmd`) declares its flags with
the same checks `cli.args` applies to the settings, without importing `cli.args`.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import TypeVar

from pydantic import ValidationError

from cli import jsonpath
from cli.options import OUTPUTS
from shared.models import ObjectMeta, is_dns1035_label, is_dns1123_label
from shared.scope import pattern_error

T = TypeVar("T")


def parse_bool(text: str) -> bool:
    value = text.strip().lower()
    if value in ("true", "1", "yes", "on"):
        return True
    if value in ("false", "0", "no", "off"):
        return False
    raise ValueError(f"expected true or false, got {text!r}")


def parse_output(text: str) -> str:
    """`table`, `wide`, `json`, `yaml`, `name` or `jsonpath=TEMPLATE` (template checked)."""
    value = text.strip()
    kind, sep, template = value.partition("=")
    if sep and kind.lower() == "jsonpath":
        try:
            jsonpath.parse(template)
        except ValueError as exc:
            raise ValueError(f"jsonpath: {exc}") from None
        return f"jsonpath={template}"
    if value.lower() not in OUTPUTS:
        raise ValueError(f"expected one of {', '.join(OUTPUTS)}, got {text!r}")
    return value.lower()


def parse_label(text: str) -> tuple[str, str]:
    """`key=value`, a valid Kubernetes label (qualified key, value of 63 characters)."""
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise ValueError(f"expected key=value, got {text!r}")
    try:
        ObjectMeta(name="x", labels={key: value})
    except ValidationError as exc:
        raise ValueError(str(exc.errors()[0]["msg"]).removeprefix("Value error, ")) from None
    return key, value


def parse_namespace_pattern(text: str) -> str:
    """A namespace name or `*` glob of a cluster's scope (`shared.scope`)."""
    value = text.strip()
    problem = pattern_error(value)
    if problem is not None:
        raise ValueError(problem)
    return value


def parse_url(text: str) -> str:
    value = text.strip().rstrip("/")
    if not value.startswith(("http://", "https://")) or len(value) <= len("https://"):
        raise ValueError(f"expected an http:// or https:// URL, got {text!r}")
    return value


def parse_positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"expected a number of seconds, got {text!r}") from None
    if not value > 0:
        raise ValueError(f"must be more than 0, got {text!r}")
    return value


def parse_page_size(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise ValueError(f"expected a whole number, got {text!r}") from None
    if not 1 <= value <= 10_000:
        raise ValueError(f"must be between 1 and 10000, got {text!r}")
    return value


def parse_port(text: str) -> int:
    """A TCP port, or 0 for any free one."""
    try:
        value = int(text)
    except ValueError:
        raise ValueError(f"expected a port number, got {text!r}") from None
    if not 0 <= value <= 65535:
        raise ValueError(f"must be between 0 and 65535, got {text!r}")
    return value


def parse_text(text: str) -> str:
    value = text.strip()
    if not value:
        raise ValueError("must not be empty")
    return value


def _dns1123_label(what: str) -> Callable[[str], str]:
    """A parser for a name that must be a DNS-1123 label; `what` names it in the error."""

    def parse(text: str) -> str:
        value = text.strip()
        if not is_dns1123_label(value):
            raise ValueError(
                f"{text!r} is not {what} (a DNS-1123 label: lowercase letters, "
                "digits and '-', at most 63 characters)"
            )
        return value

    return parse


parse_namespace = _dns1123_label("a namespace")
parse_cluster = _dns1123_label("a cluster name")


def parse_service_name(text: str) -> str:
    value = text.strip()
    if not is_dns1035_label(value):
        raise ValueError(
            f"{text!r} is not a Service name (a DNS-1035 label: lowercase "
            "letters, digits and '-', starting with a letter)"
        )
    return value


def argtype(check: Callable[[str], T]) -> Callable[[str], T]:
    """Wrap a check for argparse, which reports ArgumentTypeError messages verbatim."""

    def convert(text: str) -> T:
        try:
            return check(text)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    convert.__name__ = check.__name__.removeprefix("parse_")
    return convert

