"""The fleet console (docs/reference.md#console): the web page an operator opens first, at `/ui/`.

A room of its own: the hub serves its files and nothing else happens here. The page is
one more reader of the REST API — it signs in with a reader or admin token and reads
`/api/v1/...` like the CLI does, live from the fleet-wide export feed — so this package
holds no SQL, no judging and no view of the store (`hub.console.routes` is its only
Python).

Front end without a build step (docs/decisions.md says why): plain ES modules, one
stylesheet and one HTML page under `static/`, shipped as package data, so `pip install`
and the hub are all an air-gapped install needs and no JavaScript toolchain is ever run.
"""

from __future__ import annotations

from hub.console.routes import router

__all__ = ["router"]
