"""The hub's REST API (docs/reference.md#rest-api): routers in `hub.api.routes`, one per resource;
beside them the machinery they share — dependencies, parameters, auth, Status answers, the watch
stream, middleware.

`hub.app.create_app` assembles these; routes reach the store and settings only through
the dependencies of `hub.api.deps`, never through module globals, and never build SQL.
The modules import one another without a cycle (`hub.api.status` is pure, `hub.api.deps`
names open watches by a Protocol), which tests/hub/test_api_imports.py checks.
"""
