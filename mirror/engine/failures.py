"""Which failures of a copy are worth waiting out, which no retry can fix, and how a task reports them.

A task's own retries are bounded (``[retry]``), so a cluster that is down for longer makes
it fail. What the job does next depends on the error, and is decided here, in one place:

- **outage**: the cluster did not answer, or a partition had no leader, for as long as the
  task retried (:class:`~mirror.kafka.ClusterUnreachableError`, a broken connection, an
  error code Kafka calls retriable). The driver waits and runs the task again
  (:mod:`mirror.spark.outage`), as MirrorMaker 2's tasks and librdkafka's producers
  retry through outages.
- **permanent**: the data or the configuration is wrong (a corrupt source batch, data lost
  to retention, a truncated source, a destination topic that cannot take the partitions, a
  hanging source transaction, a non-retriable broker error such as RECORD_LIST_TOO_LARGE).
  Running the task again would fail the same way, so the job fails at once.
- **other** (a fenced producer, a refused sequence, a protocol error, a bug): Spark runs the
  task again (``spark.task.maxFailures``), since a new attempt starts with a new producer.

A task reports an outage or a permanent failure as a :class:`TaskFailure` in its result
rather than raising it: Spark would otherwise spend its task retries on it, and log a JVM
stack trace for each.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from kcodecs import KMirrorError

from ..config import ConfigError
from ..kafka import (AuthenticationError, BrokerApiError, ClusterUnreachableError, ConnectionFailedError,
                     HangingTransactionError)
from ..kafka.transactions import TransactionError
from .errors import CorruptSourceError, DataLossError, SourceTruncatedError, TopicMismatchError

__all__ = ["Verdict", "verdict", "TaskFailure", "OUTAGE_KINDS"]

Verdict = Literal["outage", "permanent", "other"]

_PERMANENT = (CorruptSourceError, DataLossError, SourceTruncatedError, TopicMismatchError, HangingTransactionError,
              ConfigError, AuthenticationError)
OUTAGE_KINDS = frozenset({ClusterUnreachableError.__name__, ConnectionFailedError.__name__})
"""Class names of outages, for a failure known only by name (from the traceback Spark reports)."""


def verdict(error: BaseException) -> Verdict:
    """What to do about ``error``: wait the outage out, fail at once, or let Spark retry the task."""
    if isinstance(error, _PERMANENT):
        return "permanent"
    if isinstance(error, (ClusterUnreachableError, ConnectionFailedError)):
        return "outage"
    if isinstance(error, BrokerApiError) and not isinstance(error, TransactionError):
        return "outage" if error.retriable else "permanent"
    return "other"


@dataclass(frozen=True)
class TaskFailure:
    """An outage or a permanent failure of one copy task, sent back to the driver as data
    (kmirror's exceptions do not all survive pickling)."""

    task: int
    kind: str
    """The error's class name, e.g. ``CorruptSourceError``."""
    message: str
    """Its text, which names the partition and offset, or the cluster."""
    outage: bool
    cluster: str | None = None
    """The bootstrap of the cluster that did not answer, when the error says."""

    @classmethod
    def of(cls, task: int, error: KMirrorError) -> "TaskFailure":
        return cls(task, type(error).__name__, str(error), verdict(error) == "outage",
                   error.bootstrap if isinstance(error, ClusterUnreachableError) else None)

    def line(self) -> str:
        return f"{self.kind}: {self.message}"
