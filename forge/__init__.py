"""forge: turn one goal into many coding tasks, run them in parallel git worktrees, land them safely."""

__version__ = "0.1.0"
