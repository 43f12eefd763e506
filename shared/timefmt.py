"""RFC 3339 timestamps as the annotations and the wire carry them, and ages as kubectl
prints them (`human_duration`, shared by the CLI and the hub's answers for people).

`mcsync.io/exported-since` is RFC 3339 with milliseconds (docs/reference.md#export-path), e.g.
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


def human_duration(seconds: float) -> str:
    """kubectl's age of a duration (apimachinery `duration.HumanDuration`), rule for rule.

    Exact seconds up to 2 minutes; minutes with their seconds under 10 minutes (`3m12s`),
    whole minutes up to 3 hours; hours with their minutes under 8 hours (`5h4m`), whole
    hours up to 2 days; days with their hours under 8 days (`2d3h`), whole days up to 2
    years; then years with their days under 8 years (`3y45d`), whole years beyond. A
    duration a little below zero (clocks of hub and operator differ by up to 2 s) reads
    `0s`; further below zero, `<invalid>`, as kubectl prints it.
    """
    whole = int(seconds)
    if whole < -1:
        return "<invalid>"
    if whole < 0:
        return "0s"
    if whole < 60 * 2:
        return f"{whole}s"
    minutes = whole // 60
    if minutes < 10:
        rest = whole % 60
        return f"{minutes}m{rest}s" if rest else f"{minutes}m"
    if minutes < 60 * 3:
        return f"{minutes}m"
    hours = minutes // 60
    if hours < 8:
        rest = minutes % 60
        return f"{hours}h{rest}m" if rest else f"{hours}h"
    if hours < 48:
        return f"{hours}h"
    if hours < 24 * 8:
        rest = hours % 24
        return f"{hours // 24}d{rest}h" if rest else f"{hours // 24}d"
    if hours < 24 * 365 * 2:
        return f"{hours // 24}d"
    if hours < 24 * 365 * 8:
        rest = (hours // 24) % 365
        years = hours // 24 // 365
        return f"{years}y{rest}d" if rest else f"{years}y"
    return f"{hours // 24 // 365}y"
