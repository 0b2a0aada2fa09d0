"""Shared test helpers: real git, the real CLI, waiting on conditions."""
