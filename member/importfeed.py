"""`member.imports.importfeed`, by the name `member.importselection` still imports it from.

`member.importselection` moves into `member/imports/` once its present edits are merged;
this module goes with that move (its import line then names `member.imports.importfeed`).
"""

from member.imports.importfeed import ImportView

__all__ = ["ImportView"]
