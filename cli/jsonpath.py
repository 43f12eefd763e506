"""`-o jsonpath=TEMPLATE`: the part of kubectl's JSONPath templates scripts use.

Supported, with kubectl's meaning: literal text around `{…}` expressions; paths from the
current object (`.a.b`, `.items[0]`, `.items[-1]`, `.items[*].metadata.name`, `.*`,
`['key.with.dots']`) or from the root (`$`, `$.items`); `{range PATH}…{end}` (inside, a
path starts at the current element); string literals (`{"\\n"}`, `{"\\t"}`). Several
results of one expression are joined by a space; strings print bare, everything else as
compact JSON. Filters (`[?(@.x=="y")]`) and recursive descent (`..`) are not supported
and are refused at start, a usage error, rather than printing nothing.

The template is parsed when the flags are (`parse`), so a typo is exit 2 before any
request; `render` applies a parsed template to the wire form of an object.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

Step = tuple[str, Any]  # ("key", name) | ("index", n) | ("all", None)


@dataclass(frozen=True)
class Text:
    value: str


@dataclass(frozen=True)
class Path:
    absolute: bool
    steps: tuple[Step, ...]


@dataclass(frozen=True)
class Range:
    path: Path
    body: tuple[Node, ...]


Node = Text | Path | Range

_STEP = re.compile(
    r"""\.(?P<key>[A-Za-z0-9_-]+)
      | \.(?P<star>\*)
      | \[(?P<index>-?\d+)\]
      | \[(?P<all>\*)\]
      | \['(?P<quoted>[^']*)'\]
      | \["(?P<dquoted>[^"]*)"\]
    """,
    re.VERBOSE,
)
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "\\": "\\", '"': '"'}


def _path(text: str) -> Path:
    expr = text.strip()
    absolute = expr.startswith("$")
    rest = expr[1:] if absolute else expr
    if rest.startswith("@"):
        rest = rest[1:]
    if ".." in rest or "[?" in rest:
        raise ValueError(f"{{{text}}}: filters and recursive descent are not supported")
    if not absolute and rest and not rest.startswith((".", "[")):
        raise ValueError(f"{{{text}}}: a path starts with '.', '$' or '['")
    steps: list[Step] = []
    position = 0
    while position < len(rest):
        found = _STEP.match(rest, position)
        if found is None:
            raise ValueError(f"{{{text}}}: cannot read the path at {rest[position:]!r}")
        if found["key"] is not None:
            steps.append(("key", found["key"]))
        elif found["index"] is not None:
            steps.append(("index", int(found["index"])))
        elif found["star"] is not None or found["all"] is not None:
            steps.append(("all", None))
        else:
            steps.append(("key", found["quoted"] if found["quoted"] is not None
                          else found["dquoted"]))
        position = found.end()
    return Path(absolute, tuple(steps))


def _literal(expr: str) -> Text:
    body = expr[1:-1]
    out, index = [], 0
    while index < len(body):
        char = body[index]
        if char == "\\" and index + 1 < len(body):
            out.append(_ESCAPES.get(body[index + 1], body[index + 1]))
            index += 2
            continue
        out.append(char)
        index += 1
    return Text("".join(out))


def parse(template: str) -> tuple[Node, ...]:
    """Parse a template; ValueError naming the part that is wrong."""
    if not template:
        raise ValueError("the template is empty")
    stack: list[tuple[Path | None, list[Node]]] = [(None, [])]
    position = 0
    while position < len(template):
        start = template.find("{", position)
        if start < 0:
            stack[-1][1].append(Text(template[position:]))
            break
        if start > position:
            stack[-1][1].append(Text(template[position:start]))
        end = template.find("}", start)
        if end < 0:
            raise ValueError(f"unclosed '{{' at {template[start:start + 20]!r}")
        expr = template[start + 1:end].strip()
        if expr.startswith('"') and expr.endswith('"') and len(expr) >= 2:
            stack[-1][1].append(_literal(expr))
        elif expr.startswith("range "):
            stack.append((_path(expr[len("range "):]), []))
        elif expr == "end":
            if len(stack) == 1:
                raise ValueError("{end} without {range}")
            path, body = stack.pop()
            assert path is not None
            stack[-1][1].append(Range(path, tuple(body)))
        else:
            stack[-1][1].append(_path(expr))
        position = end + 1
    if len(stack) > 1:
        raise ValueError("{range} without {end}")
    return tuple(stack[0][1])


def _walk(values: list[Any], steps: tuple[Step, ...], where: str) -> list[Any]:
    for kind, arg in steps:
        found: list[Any] = []
        for value in values:
            if kind == "key":
                if not isinstance(value, dict) or arg not in value:
                    raise LookupError(f"{where}: {arg!r} is not found")
                found.append(value[arg])
            elif kind == "index":
                if not isinstance(value, list) or not -len(value) <= arg < len(value):
                    raise LookupError(f"{where}: index {arg} is out of range")
                found.append(value[arg])
            else:
                found.extend(value.values() if isinstance(value, dict) else value)
        values = found
    return values


def _text(value: Any) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def _render(nodes: tuple[Node, ...], root: Any, current: Any, out: list[str]) -> None:
    for node in nodes:
        if isinstance(node, Text):
            out.append(node.value)
        elif isinstance(node, Path):
            start = root if node.absolute else current
            out.append(" ".join(_text(v) for v in _walk([start], node.steps, "jsonpath")))
        else:
            start = root if node.path.absolute else current
            items = _walk([start], node.path.steps, "jsonpath range")
            if len(items) == 1 and isinstance(items[0], list):
                items = items[0]
            for item in items:
                _render(node.body, root, item, out)


def render(nodes: tuple[Node, ...], data: Any) -> str:
    """The template applied to `data`; LookupError when a path names nothing (as kubectl
    says `… is not found`)."""
    out: list[str] = []
    _render(nodes, data, data, out)
    return "".join(out)
