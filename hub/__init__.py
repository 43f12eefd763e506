"""The mcsync hub: REST API, conflict judge and storage of every exported service."""
