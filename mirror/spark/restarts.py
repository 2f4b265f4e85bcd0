"""Which failures of Spark's streaming query kmirror rides out by starting it again from its
checkpoint, and how often.

One is known: Spark starts a Python process for the Python data source's planner (and for
some tasks) without its worker daemon, and waits a fixed 10 s for it to connect back
(``PythonWorkerFactory.createSimpleWorker``; no setting changes it). On a machine whose CPU
is taken for that long (a burst, a noisy neighbour, this project's 2-core test machine under
its own suite) the wait fails with "Python worker failed to connect back", and the query ends.
Nothing of the mirror is wrong: the checkpoint holds every committed micro-batch, the
destination every committed copy, and a query started again goes on from there, as a restart
of the job would. So the job starts the query again, logs it at WARNING and counts it
(``kmirror_errors{kind="PythonWorkerStartTimeout"}``; the text is recognised by
:func:`~.pyspark_internals.spark_failure`), at most :data:`MAX_RESTARTS` times in
:data:`WINDOW_S`: more is no passing burst, and the job fails with Spark's error as before.
"""

from __future__ import annotations

import time
from collections import deque
from typing import Callable

__all__ = ["QueryRestarts", "MAX_RESTARTS", "WINDOW_S"]

MAX_RESTARTS = 3
WINDOW_S = 600.0

class QueryRestarts:
    """At most ``limit`` restarts in any ``window_s``."""

    def __init__(self, limit: int = MAX_RESTARTS, window_s: float = WINDOW_S,
                 clock: Callable[[], float] = time.monotonic):
        self.limit, self.window_s, self._clock = limit, window_s, clock
        self._times: deque[float] = deque()
        self.count = 0
        """Restarts in the job's whole run."""

    def allow(self) -> bool:
        """Whether one more restart is within the budget (and if so, count it)."""
        now = self._clock()
        while self._times and now - self._times[0] > self.window_s:
            self._times.popleft()
        if len(self._times) >= self.limit:
            return False
        self._times.append(now)
        self.count += 1
        return True
