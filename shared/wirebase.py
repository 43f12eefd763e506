"""The base of every wire model: camelCase aliases, and the one dump both sides send.

Kept apart from `shared.models` so that modules whose models `shared.models` itself uses
(the cluster-selection annotations of `shared.clusterselection`, carried in export and
import specs) can build on the same base without an import cycle.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict
from pydantic.alias_generators import to_camel

__all__ = ["StrictWireModel", "WireModel", "to_wire"]


class WireModel(BaseModel):
    """Base of every wire model: camelCase aliases, accepted by name or alias."""

    model_config = ConfigDict(
        alias_generator=to_camel,
        validate_by_name=True,
        validate_by_alias=True,
        serialize_by_alias=True,
        extra="ignore",
    )


class StrictWireModel(WireModel):
    """A wire model that rejects unknown fields (used for `spec`)."""

    model_config = ConfigDict(extra="forbid")


def to_wire(model: BaseModel) -> dict[str, Any]:
    """The JSON-ready dict of a model as it travels: camelCase, no null fields."""
    return model.model_dump(mode="json", by_alias=True, exclude_none=True)
