"""What reaches the operator's terminal: every character printable, nothing a terminal obeys.

Much of what the CLI prints was written by someone else: condition messages and reasons,
the agents' reports of invalid ServiceExports (`exports --invalid`), labels, hub errors.
A member that controls such a text could otherwise send the admin's terminal escape
sequences: OSC 52 writes the clipboard, CSI sequences clear the screen or fake colours,
a carriage return overwrites the line before it, bidirectional overrides make text read
differently from what it is (docs/reference.md#scope-and-limits).

One place escapes, for every command: `EscapingStream` wraps the CLI's stdout and stderr
(`cli.__main__`), so tables, describe pages, `-o wide`, jsonpath and custom columns,
watches and error lines all pass through `escape_controls` whichever command wrote them.
JSON and YAML output must stay parseable and keep every value exact, so their encoders
escape in their own syntax first (`json_safe`, `yaml_dump`), and the stream then finds
nothing left to escape in them.

Escapes are shown the way Python writes them (`\\x1b`, `\\u202e`), so the operator sees
that the text carried them; newline and tab pass, being how the CLI itself lays out text.
"""

from __future__ import annotations

import re
from typing import Any, TextIO

import yaml

# C0 controls except tab and newline, DEL, C1 controls, and the invisible format
# characters that reorder or hide text: zero-width marks, bidi embeddings, overrides and
# isolates, the BOM, interlinear annotations.
_UNSAFE = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200b-\u200f\u2028-\u202e\u2060-\u2069\ufeff\ufff9-\ufffb]"
)


def _escape(match: re.Match[str]) -> str:
    char = match.group()
    code = ord(char)
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


def escape_controls(text: str) -> str:
    """`text` with every character a terminal would act on replaced by a visible escape."""
    return _UNSAFE.sub(_escape, text)


def json_safe(text: str) -> str:
    """JSON text (from `json.dumps(..., ensure_ascii=False)`) with the characters JSON
    leaves raw (C1 controls, DEL, format characters) written as `\\uXXXX` escapes: the
    same document, nothing for a terminal to act on. Such characters can only stand
    inside JSON strings, where the escape means the very same character."""
    return _UNSAFE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def yaml_dump(data: Any) -> str:
    """Block-style YAML of `data`, keys in order, non-ASCII text kept readable unless a
    string carries a character a terminal acts on: then every string that needs it is
    written double-quoted with escapes (PyYAML escapes C0/C1 controls always, but takes
    bidirectional overrides for printable text when allowed Unicode)."""
    text = yaml.safe_dump(data, sort_keys=False, default_flow_style=False, allow_unicode=True)
    if _UNSAFE.search(text) is None:
        return text
    return yaml.safe_dump(data, sort_keys=False, default_flow_style=False, allow_unicode=False)


class EscapingStream:
    """A text stream that escapes (`escape_controls`) everything written through it.

    Everything else (flush, fileno, isatty, encoding …) is the wrapped stream's.
    """

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        self._stream.write(escape_controls(text))
        return len(text)

    def writelines(self, lines: Any) -> None:
        for line in lines:
            self.write(line)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)
