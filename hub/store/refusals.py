"""A database server that answers but refuses the hub: no such database, role or password.

Told apart from an outage (`DatabaseUnavailable`) because no retry fixes it: PostgreSQL
says so by SQLSTATE — class 3D (`invalid_catalog_name`: the database does not exist) and
class 28 (`invalid_authorization_specification`: no such role, a wrong password, a
pg_hba.conf rule). `refusal` finds such an error anywhere in an exception's chain (asyncpg
raises it, SQLAlchemy wraps it, the migration runner wraps that) and answers one sentence
that says what to do, so that `mcsync-hub` can print one line instead of a traceback.
"""

from __future__ import annotations

# SQLSTATE -> what to do about it.
_ADVICE = {
    "3D000": "create it (`createdb NAME`, or CREATE DATABASE) or point --database-url "
             "(MCSYNC_DATABASE_URL) at one that exists",
    "28000": "create the role (CREATE ROLE … LOGIN), or allow it in pg_hba.conf, or point "
             "--database-url (MCSYNC_DATABASE_URL) at a role that may connect",
    "28P01": "fix the password in --database-url (MCSYNC_DATABASE_URL)",
}


def _chain(exc: BaseException) -> list[BaseException]:
    found: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and current not in found:
        found.append(current)
        current = current.__cause__ or current.__context__
    return found


def refusal(exc: BaseException) -> str | None:
    """`<the server's message>: <what to do>` when the server refused the hub's database or
    role, else None."""
    for link in _chain(exc):
        state = getattr(link, "sqlstate", None) or getattr(link, "pgcode", None)
        if isinstance(state, str) and (state.startswith(("3D", "28"))):
            advice = _ADVICE.get(state, _ADVICE["28000"] if state.startswith("28")
                                 else _ADVICE["3D000"])
            message = str(getattr(link, "message", "") or link).splitlines()[0]
            return f"{message}: {advice}"
    return None
