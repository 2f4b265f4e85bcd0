"""How the job stops: one request, carried out in one order.

A stop is requested one way: by setting the ``threading.Event`` the caller hands
:func:`~.job.run_mirror` (``kmirror run``'s SIGTERM and SIGINT handlers set it). A
:class:`Stopper` owns what follows, in this order:

1. The driver's waits through an outage end at once (:meth:`Stopper.wait`); the micro-batch
   they belong to ends unfinished, and a restart copies it from the checkpoint.
2. The planner is told to plan no new micro-batch. It runs in a Python process of Spark's, so
   the driver tells it with a file (the source's ``stopFile`` option) that it looks for before
   it plans and while it waits out an outage of its own.
3. The running micro-batch finishes and commits, and only then is the query stopped: stopping
   it first would interrupt that micro-batch, which a restart would then copy again. So a
   normal stop copies nothing twice.
"""

from __future__ import annotations

import logging
import threading
import time
from pathlib import Path

__all__ = ["Stopper"]

log = logging.getLogger(__name__)

_QUERY_POLL_S = 0.5
_TRIGGER_POLL_S = 0.05


class Stopper:
    """The stop of one run of the job: the request, the planner's stop file, the query's end."""

    def __init__(self, requested: threading.Event, file: Path):
        self._requested = requested
        self.file = file
        """The planner's stop file (:data:`~.source.STOP_FILE_OPTION`); it exists once the stop began."""

    @property
    def requested(self) -> bool:
        return self._requested.is_set()

    def request(self) -> None:
        """Ask for the stop, as a signal does (the job's own reasons: a failure found outside a
        micro-batch)."""
        self._requested.set()

    def wait(self, seconds: float) -> bool:
        """Wait ``seconds``, or less if a stop is requested; whether one was (as ``Event.wait``)."""
        return self._requested.wait(seconds)

    def watch(self, query) -> None:
        """Wait for ``query`` to end, and end it first if a stop is requested (steps 2 and 3).
        A query that failed raises :class:`RuntimeError` with Spark's report of it."""
        while query.isActive:
            if self.requested:
                self._stop(query)
                return
            query.awaitTermination(_QUERY_POLL_S)
        error = query.exception()
        if error is not None:
            raise RuntimeError(str(error))

    def _stop(self, query) -> None:
        log.info("stop requested: letting the current micro-batch finish")
        self.file.touch()
        while query.isActive and query.status.get("isTriggerActive"):
            time.sleep(_TRIGGER_POLL_S)
        query.stop()
        log.info("stopped; the checkpoint holds every committed micro-batch")
