"""`mcsync`: the operator's command-line client of the hub's REST API (SPEC §4, §7).

The package is cut so that each piece can be tested alone:

* `cli.client` is the only module that speaks HTTP; every answer is parsed into the
  models of `shared.models` there, and every failure becomes one `HubError`;
* `cli.render` turns those models into text (tables, describe-style detail, JSON, YAML)
  as pure functions of the models and a `now`, so rendering is tested with plain data;
* `cli.args` builds the argument parser (every flag also from its `MCSYNC_*` variable);
* `cli.commands` wires one to the other, one function per sub-command;
* `cli.__main__` maps outcomes to the exit codes scripts rely on (0, 1, 2).
"""
