"""Who is calling, and may they (docs/reference.md#credentials): bearer tokens as FastAPI
dependencies.

Three roles. `admin` (configured) may do everything. `reader` (configured) may read
everything, including watches, and nothing else. A `member` token (issued at
registration, stored by the hub only as a hash) acts only under its own
`/api/v1/clusters/{cluster}/…`, including reading its own cluster record; anything else
is 403. No token, a malformed header or an unknown token is 401 with
`WWW-Authenticate: Bearer`.

Configured tokens (several per role while one is rotated, `hub.api.credentials`) are
compared with `hmac.compare_digest`, every one of them, so the comparison takes the same
time however many leading characters match. The token itself never leaves this
module: nothing here logs, and errors name the role, never the token.

Routes pick one of the `Annotated` aliases at the bottom, so the access rule of each
endpoint is visible in its signature (and OpenAPI shows the bearer scheme).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Literal

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from fastapi.security.utils import get_authorization_scheme_param

from hub.api.deps import ContextDep, HubContext, StoreDep
from hub.api.status import forbidden, unauthorized
from hub.store import Store

Role = Literal["admin", "reader", "member"]

bearer_scheme = HTTPBearer(
    auto_error=False,
    description="admin, reader or member-cluster token (docs/reference.md#credentials)",
)


@dataclass(frozen=True)
class Principal:
    role: Role
    cluster: str | None = None  # set for members only

    def describe(self) -> str:
        return f"member of cluster {self.cluster!r}" if self.role == "member" else self.role


async def principal_of(ctx: HubContext, store: Store, token: str) -> Principal | None:
    """The role `token` (already stripped, non-empty) gives, or None when it is unknown."""
    role = ctx.credentials.role_of(token)
    if role is not None:
        return Principal(role)
    cluster = await store.clusters.authenticate(token)
    if cluster is not None:
        return Principal("member", cluster)
    return None


def bearer_token(request: Request) -> str | None:
    """The non-empty token of an `Authorization: Bearer` header, or None (`bearer_scheme`'s
    reading, for code that does not go through FastAPI's dependencies)."""
    scheme, token = get_authorization_scheme_param(request.headers.get("authorization"))
    if scheme.lower() != "bearer":
        return None
    return token.strip() or None


async def authenticate(
    ctx: ContextDep,
    store: StoreDep,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer_scheme)],
) -> Principal:
    """The caller's role, from `Authorization: Bearer <token>`; 401 when there is none."""
    if credentials is None or not credentials.credentials.strip():
        raise unauthorized("this endpoint needs an Authorization: Bearer <token> header")
    principal = await principal_of(ctx, store, credentials.credentials.strip())
    if principal is None:
        raise unauthorized("the bearer token is not known to this hub")
    return principal


AuthenticatedDep = Annotated[Principal, Depends(authenticate)]


def _path_cluster(request: Request) -> str | None:
    value = request.path_params.get("cluster")
    return str(value) if value is not None else None


def _member_scope_error(principal: Principal) -> Exception:
    return forbidden(
        f"a member token acts only under /api/v1/clusters/{principal.cluster}/; "
        "this request is outside it"
    )


async def require_admin(principal: AuthenticatedDep) -> Principal:
    if principal.role != "admin":
        if principal.role == "member":
            raise _member_scope_error(principal)
        raise forbidden(f"only the admin may do this; the caller is the {principal.describe()}")
    return principal


async def require_reader(principal: AuthenticatedDep) -> Principal:
    """Admin or reader: fleet-wide reads."""
    if principal.role == "member":
        raise _member_scope_error(principal)
    return principal


def member_refusal(principal: Principal, cluster: str | None) -> Exception | None:
    """Why `principal` may not write under /clusters/{cluster}/, or None when it may."""
    if principal.role == "admin":
        return None
    if principal.role == "reader":
        return forbidden("the reader token may only read (GET)")
    if principal.cluster != cluster:
        return _member_scope_error(principal)
    return None


async def require_member(principal: AuthenticatedDep, request: Request) -> Principal:
    """Admin or the member of the path's cluster: writes under /clusters/{cluster}/."""
    refusal = member_refusal(principal, _path_cluster(request))
    if refusal is not None:
        raise refusal
    return principal


async def require_member_or_reader(principal: AuthenticatedDep, request: Request) -> Principal:
    """Admin, reader, or the member of the path's cluster: reads under /clusters/{cluster}/."""
    if principal.role == "member" and principal.cluster != _path_cluster(request):
        raise _member_scope_error(principal)
    return principal


AdminAccess = Annotated[Principal, Depends(require_admin)]
ReaderAccess = Annotated[Principal, Depends(require_reader)]
MemberAccess = Annotated[Principal, Depends(require_member)]
MemberOrReaderAccess = Annotated[Principal, Depends(require_member_or_reader)]
