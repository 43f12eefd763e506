"""Kubernetes `Status` failures: one exception type the handlers raise, one JSON shape out.

Handlers raise `KubeError`; the app turns it into the `Status` object a real apiserver
sends (kind Status, status Failure, reason, message, code, details), because the official
client and the agent read `reason` and `code` from that body, not from our Python types.
"""

from __future__ import annotations

from typing import Any


class KubeError(Exception):
    """A failure answered as a Kubernetes Status with the given HTTP code and reason."""

    def __init__(
        self,
        code: int,
        reason: str,
        message: str,
        *,
        name: str | None = None,
        group: str | None = None,
        kind: str | None = None,
        causes: list[dict[str, str]] | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.message = message
        self.details: dict[str, Any] = {}
        if name is not None:
            self.details["name"] = name
        if group:
            self.details["group"] = group
        if kind is not None:
            self.details["kind"] = kind
        if causes:
            self.details["causes"] = causes

    def status(self) -> dict[str, Any]:
        body: dict[str, Any] = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        }
        if self.details:
            body["details"] = self.details
        return body


def _res(plural: str, group: str) -> str:
    return f"{plural}.{group}" if group else plural


def not_found(plural: str, group: str, name: str) -> KubeError:
    return KubeError(
        404, "NotFound", f'{_res(plural, group)} "{name}" not found',
        name=name, group=group, kind=plural,
    )


def already_exists(plural: str, group: str, name: str) -> KubeError:
    return KubeError(
        409, "AlreadyExists", f'{_res(plural, group)} "{name}" already exists',
        name=name, group=group, kind=plural,
    )


def conflict(plural: str, group: str, name: str) -> KubeError:
    return KubeError(
        409,
        "Conflict",
        f'Operation cannot be fulfilled on {_res(plural, group)} "{name}": the object has '
        "been modified; please apply your changes to the latest version and try again",
        name=name, group=group, kind=plural,
    )


def invalid(kind: str, group: str, name: str, field: str, detail: str) -> KubeError:
    qualified = f"{kind}.{group}" if group else kind
    return KubeError(
        422,
        "Invalid",
        f'{qualified} "{name}" is invalid: {field}: {detail}',
        name=name, group=group, kind=kind,
        causes=[{"reason": "FieldValueInvalid", "message": detail, "field": field}],
    )


def namespace_terminating(plural: str, group: str, name: str, namespace: str) -> KubeError:
    return KubeError(
        403, "Forbidden", f'{_res(plural, group)} "{name}" is forbidden: unable to create new '
        f"content in namespace {namespace} because it is being terminated",
        name=name, group=group, kind=plural,
        causes=[{"reason": "NamespaceTerminating", "message": f"namespace {namespace} is "
                 "terminating", "field": "metadata.namespace"}],
    )


def bad_request(message: str) -> KubeError:
    return KubeError(400, "BadRequest", message)


def expired(message: str) -> KubeError:
    return KubeError(410, "Expired", message)


def resource_not_found() -> KubeError:
    return KubeError(404, "NotFound", "the server could not find the requested resource")


def resource_not_served(plural: str, group: str, version: str,
                        served: list[str]) -> KubeError:
    """A 404 that says what the emulator serves instead (kubectl prints the message)."""
    gv = f"{group}/{version}" if group else version
    return KubeError(
        404, "NotFound", f"the server could not find the requested resource: the mcsync "
        f"emulator does not serve {plural} ({gv}); it serves {', '.join(served)}",
    )


def read_only(method: str, resource: str, verbs: tuple[str, ...], *, note: str = "") -> KubeError:
    return KubeError(
        405, "MethodNotAllowed", f"the server does not allow this method on the requested "
        f"resource ({method}): the mcsync emulator serves {resource} for "
        f"{', '.join(verbs)} only" + (f"; {note}" if note else ""),
    )


def method_not_allowed(method: str) -> KubeError:
    return KubeError(
        405, "MethodNotAllowed", f"the server does not allow this method on the requested "
        f"resource ({method})",
    )


def unsupported_media_type(content_type: str) -> KubeError:
    return KubeError(
        415, "UnsupportedMediaType", f"the body of the request was in an unknown format - "
        f"accepted media types include: application/json-patch+json, "
        f"application/merge-patch+json (got {content_type!r})",
    )


def unsupported_body(content_type: str, *, detail: str = "") -> KubeError:
    return KubeError(
        415, "UnsupportedMediaType", f"the body of the request was in an unknown format - "
        f"accepted media types include: application/json, application/yaml (got "
        f"{content_type!r})" + (f": {detail}" if detail else ""),
    )


def not_acceptable(accept: str) -> KubeError:
    return KubeError(
        406, "NotAcceptable", f"only the following media types are accepted: application/json, "
        f"application/json;as=Table;v=v1;g=meta.k8s.io (Accept: {accept!r})",
    )


def service_unavailable() -> KubeError:
    return KubeError(503, "ServiceUnavailable", "the apiserver is paused by the test emulator")
