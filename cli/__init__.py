"""`mcsync`: the operator's command-line client of the hub's REST API (docs/reference.md#rest-api,
#cli).

The package is cut so that each piece can be tested alone:

* `cli.client` is the only module that speaks HTTP; every answer is parsed into the
  models of `shared.models` there, and every failure becomes one `HubError`;
* `cli.render` turns those models into text (tables, describe-style detail, JSON, YAML,
  names, JSONPath) as pure functions of the models and a `now`, so rendering is tested
  with plain data; `cli.jsonpath` and `cli.selector` are the two small languages;
* `cli.args` builds the argument parser and resolves every setting the same way (flag,
  `MCSYNC_*` variable, config-file context from `cli.config`, default);
* `cli.commands` wires one to the other for the read commands, with `cli.watch` for
  `--watch`; `cli.admin` holds the two writes (register, deregister), `cli.contexts` the
  config-file commands, `cli.completion` the shell scripts; `cli.dispatch` maps names to
  them;
* `cli.__main__` maps outcomes to the exit codes scripts rely on (0, 1, 2).
"""
