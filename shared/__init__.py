"""The wire contract of mcsync: what the hub and the member agent both speak.

Nothing here does I/O or knows which side it runs on. Both `hub` and `member` import
these names; neither redefines them (docs/reference.md#conditions).
"""

from shared.version import __version__

__all__ = ["__version__"]
