"""Resident copiers: the copy of a long-running job, which does not stop between micro-batches.

Each copy task index has a copier, a process of its own on the executor, that keeps
following its partitions and commits every few milliseconds. Spark's side only hands out
assignments and renews them; the destination's offsets topic stays the one record of
progress. The rooms, in the order a batch meets them:

- :mod:`.placement`: which copier follows which partition, what each lease hands it;
- :mod:`.leasing`: a Spark task's side of the copier's socket (starting the copier if need be);
- :mod:`.messages`: the three typed messages on that socket;
- :mod:`.server`: the copier's process, its loop in named steps;
- :mod:`.copier`: its copy and its commits (the one :class:`~mirror.engine.commit.Committer`).
"""

from .leasing import CopierLostError, lease, release, socket_path
from .placement import Assignment, assignments, copier_index

__all__ = ["CopierLostError", "lease", "release", "socket_path", "Assignment", "assignments", "copier_index"]
