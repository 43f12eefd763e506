"""The mcsync member agent: watches Services and ServiceExports and exports them to the hub."""
