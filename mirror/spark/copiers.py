"""The driver's side of the resident copiers (:mod:`mirror.engine.copier`): it hands out their
assignments and renews them, nothing more.

Each lease is a Spark task (one per copier, :func:`~mirror.engine.copier.assignments`) whose
body hands the copier its ranges over its socket and returns what it copied since its last
report. A micro-batch leases its ranges; between micro-batches (an idle source plans none)
:class:`Renewer` renews every copier with no range; at the end every copier is released.
Micro-batches and renewals take turns (:attr:`CopierLeases.spark_jobs`).
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from typing import Callable, Mapping, Sequence

from ..config import MirrorConfig
from ..engine import CopyJob, CopyRequest, TaskStats, TopicRoute
from ..engine.copier import assignments
from . import tasks as spark_tasks

__all__ = ["CopierLeases", "Renewer"]

log = logging.getLogger(__name__)


class CopierLeases:
    """Leases for the copiers that follow the partitions of ``routes()``, as of ``job()``."""

    def __init__(self, config: MirrorConfig, routes: Callable[[], Mapping[str, TopicRoute]],
                 job: Callable[[], CopyJob]):
        self.config = config
        self._routes = routes
        self._job = job
        self.spark_jobs = threading.Lock()
        """Micro-batches and lease renewals take turns at the copiers."""
        self.last_lease = time.monotonic()

    def lease(self, spark_context, job: CopyJob, requests: Sequence[CopyRequest],
              tasks: frozenset[int] | None = None) -> list[TaskStats]:
        """One Spark job leasing ``requests`` to their copiers, and renewing every other copier
        that follows a known partition; only the copiers ``tasks`` names (None: all)."""
        chosen = [(a.index, a.requests) for a in self._assignments(requests) if tasks is None or a.index in tasks]
        if not chosen:
            return []
        with self.spark_jobs:
            self.last_lease = time.monotonic()
            return spark_context.parallelize(chosen, len(chosen)).mapPartitions(
                functools.partial(spark_tasks.copy_tasks, job)).collect()

    def start(self, spark_context) -> int:
        """Give every copier that follows a known partition its first lease, with no range, so
        that it starts before the first micro-batch needs it; how many were started."""
        return len(self.lease(spark_context, self._job(), []))

    def renew_if_due(self, spark_context) -> list[TaskStats]:
        """Renew every copier if none was for a third of ``lease_s``; what they copied since."""
        if time.monotonic() - self.last_lease < self.config.streaming.lease_s / 3:
            return []
        return self.lease(spark_context, self._job(), [])

    def release(self, spark_context) -> list[TaskStats]:
        """Every copier commits what it copied and exits; their last reports. Every index, not
        only those following a known partition: copiers of a topic whose route is gone (a lost
        destination topic, :meth:`~.runner.MicroBatchRunner._lost`) end too."""
        indices = list(range(self.config.streaming.copy_tasks or 1))
        try:
            with self.spark_jobs:
                return spark_context.parallelize(indices, max(1, len(indices))).mapPartitions(
                    functools.partial(spark_tasks.release_tasks, self._job())).collect()
        except Exception as exc:  # Spark ended with the stop: the copiers end with their executors
            log.debug("releasing the copiers failed: %s", exc)
            return []

    def _assignments(self, requests: Sequence[CopyRequest]):
        partitions = {topic: route.source_partitions for topic, route in self._routes().items()}
        return assignments(partitions, requests, self.config.streaming.copy_tasks or 1)


class Renewer(threading.Thread):
    """Calls ``renew`` every third of ``lease_s``, until :meth:`stop`."""

    def __init__(self, lease_s: float, renew: Callable[[], None]):
        super().__init__(name="kmirror-lease-renewer", daemon=True)
        self.lease_s, self.renew = lease_s, renew
        self._stopped = threading.Event()

    def run(self) -> None:
        while not self._stopped.wait(self.lease_s / 3):
            try:
                self.renew()
            except Exception as exc:  # the next micro-batch leases again; a lapsed copier restarts
                log.debug("renewing the copiers' leases failed: %s", exc)

    def stop(self) -> None:
        self._stopped.set()
        self.join(60)
