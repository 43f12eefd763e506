"""Alembic migrations of the hub's schema, shipped as a package.

`hub.store.migrate` finds this directory at run time through `migrations.__file__`, so the
migrations work from an installed wheel as well as from a checkout; no alembic.ini is
needed.
"""
