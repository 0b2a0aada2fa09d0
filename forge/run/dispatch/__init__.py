"""The dispatch loop of a run: what starts when.

A task starts when its dependencies have merged, a slot is free, and no running
task overlaps its files: waves are a view, not a barrier. Among ready tasks the
longest critical path goes first, ties in plan order. The loop is the only thread
that decides; attempts run on worker threads and report back through a queue.
Infrastructure failures wait out a backoff and then pause the run; a hold stops
new starts while running tasks finish.

Its parts, each with a concern of its own: what is ready (ready.py), which agent
the next attempt runs on (launch.py), starting an attempt in its place (starts.py),
the worker threads (workers.py), what an attempt's end makes of its task
(outcomes.py), what the dispatch remembers of each task (book.py), and the loop
that coordinates them (loop.py).
"""

from forge.run.dispatch.loop import Dispatcher

__all__ = ["Dispatcher"]
