"""`GET /api/v1/whoami`: which role the caller's token gives, for any valid token.

An operator who holds a token cannot otherwise tell a reader token from an admin one
without trying a write; `mcsync status` shows the role, as `kubectl auth whoami` does. The
answer names the role and, for a member token, its cluster — never anything of the token.
"""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import JSONResponse, Response

from hub.api.auth import AuthenticatedDep
from hub.api.status import documented
from shared.constants import API_PREFIX
from shared.models import Identity, to_wire

router = APIRouter(prefix=API_PREFIX, tags=["operations"])


@router.get("/whoami", response_model=Identity, summary="The role of the caller's token",
            responses=documented(401, 503))
async def whoami(principal: AuthenticatedDep) -> Response:
    return JSONResponse(to_wire(Identity(role=principal.role, cluster=principal.cluster)))
