"""Everything the agent says to the Kubernetes API: client, list/watch, writes, Events, Lease."""
