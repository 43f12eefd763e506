"""mcsync benchmarks: each `python -m bench.<name>` measures one figure beside its ceiling.

Figures on a shared machine drift from run to run, so every headline figure is a ratio to
a ceiling measured in the same run (the framework on a no-op route, raw database writes of
the same rows) or a growth ratio (the same measurement at two table sizes). Results go to
`bench/results/<name>.json`; `docs/benchmarks.md` summarises them. Benchmarks never fail a
build on a figure: `tests/bench/smoke.py` (run by its `test_smoke_*.py` files) only checks
that each one still runs.
"""
