"""End-to-end tests: real hub and agent processes on loopback ports."""
