"""How a hub start ends when it cannot: `StartupError` and the exit codes
(docs/reference.md#flags). Imports nothing, so that `hub.__main__` (which checks the flags)
and `hub.serve` (which starts the server) share them without either importing the other.
"""

from __future__ import annotations

EXIT_CONFIG = 2
EXIT_UNAVAILABLE = 3
EXIT_PORT_IN_USE = 4
EXIT_CODES = """exit codes:
  0  stopped gracefully (SIGTERM, SIGINT) or migrations applied
  2  bad configuration: a flag, variable, config file, token file or database URL (named)
  3  the database did not answer at start (retry; nothing is wrong with the flags), or its
     server refused the database or role of --database-url (the line says what to create)
  4  --port cannot be listened on (another process holds it); no database was touched"""


class StartupError(Exception):
    """Ends the program with `code` (2 unless said); the message is the one line printed."""

    def __init__(self, message: str, *, code: int = EXIT_CONFIG) -> None:
        super().__init__(message)
        self.code = code
