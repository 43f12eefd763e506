"""What Kubernetes accepts, checked in one place for the hub and the agent
(docs/reference.md#scope-and-limits).

Every object the hub stores is written by every importing cluster (a ServiceImport's
labels and annotations, a derived Service's ports, an EndpointSlice's addresses), so the
hub must refuse whatever a Kubernetes API server would refuse: one cluster's object the
importers cannot write blocks its key in every importer. The agent checks the same rules
before it sends, so that it skips (and reports) what the hub would refuse instead of
retrying it forever. The wire models (`shared.models`) use these functions and types; no
other module re-implements a rule.

The rules are Kubernetes' own (apimachinery `pkg/util/validation`, `pkg/apis/core/
validation`, `pkg/apis/discovery/validation`), re-stated, not copied:

* names: DNS-1123 labels and subdomains, DNS-1035 labels, qualified names (label and
  annotation keys: an optional DNS-subdomain prefix of at most 253 characters, `/`, and a
  name of at most 63 characters of alphanumerics, `-`, `_`, `.`, starting and ending with
  an alphanumeric);
* label values: at most 63 characters, empty or the name part's syntax;
* annotations: keys are qualified names once lower-cased, and keys plus values together
  at most 256 KiB (`TotalAnnotationSizeLimitB`); one value at most 64 KiB (mcsync's own,
  older bound, stricter than Kubernetes);
* endpoint addresses (`ValidateEndpointIP` and the EndpointSlice validation): an address
  of the slice's type, in canonical form, without a zone, and not unspecified, loopback,
  link-local or link-local multicast; an FQDN address is a DNS subdomain of at least two
  labels;
* strict JSON types: a number field takes a JSON integer only (not `true`, not `"80"`, not
  `80.0`), a boolean field a JSON boolean only (not `"yes"`, not `1`), as Go's decoder
  into typed structs does. pydantic's default (lax) mode converts all of those, so every
  numeric and boolean wire field uses `StrictInt`/`StrictBool`.

The patterns end in `$` because they are also handed to pydantic (`Field(pattern=…)`),
FastAPI path/query parameters and OpenAPI: pydantic-core checks them with Rust's `regex`
crate and JSON Schema with ECMA-262, where `$` is the end of the text. In Python's `re`,
`$` also matches *before a final newline*, so `"evil\\n"` passed `PATTERN.match`; Python
code here therefore only ever uses `fullmatch` (`_full`), which must consume the newline
too (`\\Z` would do the same in Python but is not valid in the other two dialects).
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Annotated

from pydantic import Field, Strict

# --- strict JSON types --------------------------------------------------------------------

StrictInt = Annotated[int, Strict()]
StrictBool = Annotated[bool, Strict()]
# A port number, as Kubernetes' IsValidPortNum: 1 to 65535.
PortNumber = Annotated[int, Strict(), Field(ge=1, le=65535)]

# --- names ---------------------------------------------------------------------------------

DNS1123_LABEL_RE = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
DNS1035_LABEL_RE = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
DNS1123_SUBDOMAIN_RE = re.compile(
    r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
)
# Label/annotation keys: optional DNS-subdomain prefix and a name part (Kubernetes qualified name).
QUALIFIED_NAME_RE = re.compile(
    r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
    r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$"
)
LABEL_VALUE_RE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")

LABEL_VALUE_MAX = 63
QUALIFIED_NAME_MAX = 63
SUBDOMAIN_MAX = 253
# Kubernetes' TotalAnnotationSizeLimitB: every key and value of one object together.
ANNOTATIONS_TOTAL_MAX = 256 * 1024
# mcsync's own bound on one annotation value (Kubernetes has only the total): the hub's
# contract since its first API, kept so that no older agent's export changes verdict.
ANNOTATION_VALUE_MAX = 65536


def _full(pattern: re.Pattern[str], value: str) -> bool:
    """Whether `pattern` matches ALL of `value` (a trailing newline included: see above)."""
    return pattern.fullmatch(value) is not None


def is_dns1123_label(value: str) -> bool:
    return len(value) <= 63 and _full(DNS1123_LABEL_RE, value)


def is_dns1035_label(value: str) -> bool:
    return len(value) <= 63 and _full(DNS1035_LABEL_RE, value)


def is_dns1123_subdomain(value: str) -> bool:
    return len(value) <= SUBDOMAIN_MAX and _full(DNS1123_SUBDOMAIN_RE, value)


def _shown(value: str) -> str:
    """A value as a refusal quotes it: repr, cut to 70 characters."""
    text = repr(value)
    return text if len(text) <= 72 else text[:69] + "...'"


def qualified_name_error(key: str) -> str | None:
    """Why `key` is not a Kubernetes qualified name (a label key), or None."""
    prefix, slash, name = key.rpartition("/")
    if slash and (not prefix or len(prefix) > SUBDOMAIN_MAX):
        return f"{_shown(key)} has a prefix that is empty or longer than {SUBDOMAIN_MAX}"
    if not name or len(name) > QUALIFIED_NAME_MAX:
        return f"{_shown(key)} has a name part that is empty or longer than {QUALIFIED_NAME_MAX}"
    if not _full(QUALIFIED_NAME_RE, key):
        return (
            f"{_shown(key)} is not a qualified name (an optional DNS-1123 subdomain prefix and "
            "'/', then alphanumerics, '-', '_' or '.', starting and ending with an alphanumeric)"
        )
    return None


def label_value_error(value: str) -> str | None:
    """Why `value` is not a valid Kubernetes label value, or None."""
    if len(value) > LABEL_VALUE_MAX:
        return f"{_shown(value)} is longer than {LABEL_VALUE_MAX} characters"
    if not _full(LABEL_VALUE_RE, value):
        return (
            f"{_shown(value)} is not a label value (empty, or alphanumerics, '-', '_' or '.', "
            "starting and ending with an alphanumeric)"
        )
    return None


def check_labels(labels: Mapping[str, str], what: str) -> None:
    """ValueError naming `what`, the key and the value unless every label is valid."""
    for key, value in labels.items():
        problem = qualified_name_error(key)
        if problem is not None:
            raise ValueError(f"{what} key {problem}")
        problem = label_value_error(value)
        if problem is not None:
            raise ValueError(f"{what} value of {key!r}: {problem}")


def check_annotations(annotations: Mapping[str, str | None], what: str) -> None:
    """ValueError naming `what` unless every key is a qualified name (lower-cased, as
    Kubernetes checks annotation keys) and keys and values fit in 256 KiB together, in
    bytes of UTF-8 as Kubernetes counts them."""
    total = 0
    for key, value in annotations.items():
        problem = qualified_name_error(key.lower())
        if problem is not None:
            raise ValueError(f"{what} key {problem}")
        if value is not None and len(value) > ANNOTATION_VALUE_MAX:
            raise ValueError(
                f"{what} value of {key!r} is longer than {ANNOTATION_VALUE_MAX} characters"
            )
        # Kubernetes counts Go string lengths: bytes of UTF-8, not characters.
        total += len(key.encode("utf-8", "surrogatepass"))
        total += len((value or "").encode("utf-8", "surrogatepass"))
    if total > ANNOTATIONS_TOTAL_MAX:
        raise ValueError(
            f"{what} are {total} bytes together, more than Kubernetes' {ANNOTATIONS_TOTAL_MAX}"
        )


# --- endpoint addresses ---------------------------------------------------------------------


def _reserved_v4(n: int) -> str | None:
    if n == 0:
        return "the unspecified address"
    if n >> 24 == 127:  # 127.0.0.0/8
        return "a loopback address"
    if n >> 16 == 0xA9FE:  # 169.254.0.0/16
        return "a link-local address"
    if n >> 8 == 0xE00000:  # 224.0.0.0/24
        return "a link-local multicast address"
    return None


def _reserved_v6(n: int) -> str | None:
    if n == 0:
        return "the unspecified address"
    if n == 1:  # ::1
        return "a loopback address"
    if n >> 118 == 0x3FA:  # fe80::/10
        return "a link-local address"
    if n >> 112 == 0xFF02:  # ff02::/16
        return "a link-local multicast address"
    return None


def endpoint_address_error(address_type: str, value: str) -> str | None:
    """Why `value` cannot be an address of an EndpointSlice of `address_type` (IPv4, IPv6
    or FQDN) in Kubernetes, or None.

    Every endpoint of every slice write passes here, so the reserved ranges are compared
    as integers (`ipaddress`'s `is_loopback` and friends build networks on each call, and
    made a 10-endpoint slice's validation a fifth dearer)."""
    if address_type == "FQDN":
        name = value.removesuffix(".")
        if not is_dns1123_subdomain(name):
            return f"{_shown(value)} is not a valid FQDN (a DNS-1123 subdomain)"
        if "." not in name:
            return f"{_shown(value)} is not a fully qualified name (at least two labels)"
        return None
    if "%" in value:
        return f"{_shown(value)} carries a zone, which an endpoint address may not"
    parsed: ipaddress.IPv4Address | ipaddress.IPv6Address
    try:
        parsed = (
            ipaddress.IPv4Address(value) if address_type == "IPv4" else ipaddress.IPv6Address(value)
        )
    except ValueError:
        try:
            ipaddress.ip_address(value)
        except ValueError:
            return f"{_shown(value)} is not a valid {address_type} address"
        return f"{_shown(value)} is not an {address_type} address"
    if isinstance(parsed, ipaddress.IPv6Address) and parsed.ipv4_mapped is not None:
        return f"{_shown(value)} is not an {address_type} address"
    if str(parsed) != value:
        # Kubernetes stores the canonical form; two spellings of one address must not be
        # two different endpoints to a comparer downstream.
        return f"{_shown(value)} is not in canonical form ({parsed})"
    reserved = _reserved_v4(int(parsed)) if parsed.version == 4 else _reserved_v6(int(parsed))
    if reserved is not None:
        return f"{_shown(value)} is {reserved}"
    return None


# --- timestamps -----------------------------------------------------------------------------

# docs/reference.md#conflicts: an exportCreationTimestamp before 2014 (before Kubernetes) is no real
# claim; one more than a minute ahead of the hub's clock would win every key for as long as it
# lasts.
EARLIEST_EXPORT_TIMESTAMP = datetime(2014, 1, 1, tzinfo=UTC)
EXPORT_TIMESTAMP_FUTURE_SKEW = timedelta(minutes=1)


def export_timestamp_error(value: datetime, *, now: datetime | None = None) -> str | None:
    """Why `value` cannot be an exportCreationTimestamp, or None. Without `now`, only the
    lower bound (which needs no clock) is checked."""
    if value < EARLIEST_EXPORT_TIMESTAMP:
        return f"{value.isoformat()} is before {EARLIEST_EXPORT_TIMESTAMP.date().isoformat()}"
    if now is not None and value > now + EXPORT_TIMESTAMP_FUTURE_SKEW:
        return (
            f"{value.isoformat()} is more than a minute ahead of the hub's clock "
            f"({now.isoformat()})"
        )
    return None
