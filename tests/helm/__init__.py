"""Tests of the Helm charts (helm/) and the container image recipe (Dockerfile)."""
