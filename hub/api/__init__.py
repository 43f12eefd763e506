"""The hub's REST API (SPEC §4): one router per resource, plus auth, errors and middleware.

`hub.app.create_app` assembles these; routes reach the store and settings only through
the dependencies of `hub.api.deps`, never through module globals, and never build SQL.
"""
