"""RFC 3339 timestamps as the annotations and the wire carry them.

`mcsync.io/exported-since` is RFC 3339 with milliseconds (SPEC §2.3), e.g.
`2026-11-22T20:55:48.123Z`. Parsing accepts any RFC 3339 form with an offset.
"""

from __future__ import annotations

from datetime import UTC, datetime


def utcnow() -> datetime:
    return datetime.now(UTC)


def format_millis(moment: datetime) -> str:
    """Format an aware datetime as UTC RFC 3339 with exactly three fractional digits."""
    if moment.tzinfo is None:
        raise ValueError("timestamp must carry a timezone")
    utc = moment.astimezone(UTC)
    return utc.strftime("%Y-%m-%dT%H:%M:%S.") + f"{utc.microsecond // 1000:03d}Z"


def parse_rfc3339(text: str) -> datetime:
    """Parse an RFC 3339 timestamp with an offset (or `Z`); raise ValueError otherwise."""
    value = text.strip()
    if value.endswith(("Z", "z")):
        value = value[:-1] + "+00:00"
    try:
        moment = datetime.fromisoformat(value)
    except ValueError as exc:
        raise ValueError(f"not an RFC 3339 timestamp: {text!r}") from exc
    if moment.tzinfo is None:
        raise ValueError(f"RFC 3339 timestamp lacks an offset: {text!r}")
    return moment
