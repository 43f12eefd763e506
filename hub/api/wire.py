"""How a route answers with a model: its wire form (`to_wire`'s JSON) in one step.

pydantic-core serialises the model straight to JSON (camelCase, no nulls — the form the
agent sends); building the dict and then `json.dumps` of it was a tenth of a PUT's CPU.
Every route that answers a model this way calls `wire`, so the form cannot drift between
routers.
"""

from __future__ import annotations

from fastapi.responses import Response
from pydantic import BaseModel


def wire(model: BaseModel, *, status_code: int = 200) -> Response:
    """`model` as it travels, with `status_code`."""
    return Response(
        model.model_dump_json(by_alias=True, exclude_none=True),
        status_code=status_code,
        media_type="application/json",
    )
