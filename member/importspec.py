"""`member.imports.importspec`, by the name `member.importselection` still imports it from.

`member.importselection` moves into `member/imports/` once its present edits are merged;
this module goes with that move (its import lines then name `member.imports.importspec`).
"""

from member.imports.importspec import (
    HeldImport,
    MirroredSlice,
    SourceSlice,
    pack_json,
    served_ports,
    unpack_json,
)

__all__ = ["HeldImport", "MirroredSlice", "SourceSlice", "pack_json", "served_ports", "unpack_json"]
