"""Which failures of a copy are worth waiting out, which no retry can fix, and how a task reports them.

A task's own retries are bounded (``[limits.retry]``), so a cluster that is down for longer makes
it fail. What the job does next depends on the error, and is decided here, in one place:

- **outage**: the cluster did not answer, or a partition had no leader, for as long as the
  task retried (:class:`~mirror.kafka.ClusterUnreachableError`, a broken connection, an
  error code Kafka calls retriable). The driver waits and runs the task again
  (:mod:`mirror.spark.outage`), as MirrorMaker 2's tasks and librdkafka's producers
  retry through outages.
- **permanent**: the data or the configuration is wrong (a corrupt source batch, data lost
  to retention, a truncated source, a destination topic that cannot take the partitions, a
  hanging source transaction, a non-retriable broker error such as RECORD_LIST_TOO_LARGE, a
  destination topic the controller refused to create, a resident copier that cannot read what
  its task sent).
  Running the task again would fail the same way, so the job fails at once.
- **missing**: a topic the cluster, which answered, does not list
  (:class:`~mirror.kafka.UnknownTopicError`, after the client's retries for a topic just
  made). A deleted topic is not an outage: the driver looks the topic up once more, and a
  destination topic that is gone is a loss (:mod:`.destination_loss`), not a wait.
- **other** (a fenced producer, a refused sequence, a protocol error): a new attempt, which
  starts with a new producer, may succeed. The driver runs the task again at once, as many
  times as Spark would run a failed task (``spark.task.maxFailures``).

Every kmirror error of a copy task reaches the driver one way: as a :class:`TaskFailure` in
the task's result (:mod:`mirror.spark.tasks`), never as a raised error, which Spark would
retry on its own and report as a JVM stack trace around a Python one. Only an error that is
not kmirror's (a bug) fails the Spark task.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from kcodecs import KMirrorError

from ..config import ConfigError
from ..kafka import (AuthenticationError, BrokerApiError, ClusterUnreachableError, ConnectionFailedError,
                     HangingTransactionError, KafkaClient, TopicCreationError, UnknownTopicError)
from ..kafka.transactions import TransactionError
from .errors import CopierRefusedError, CorruptSourceError, DataLossError, SourceTruncatedError, TopicMismatchError

__all__ = ["Verdict", "verdict", "failed_cluster", "cluster_role", "TaskFailure"]

Verdict = Literal["outage", "permanent", "missing", "other"]

_PERMANENT = (CorruptSourceError, DataLossError, SourceTruncatedError, TopicMismatchError, HangingTransactionError,
              ConfigError, AuthenticationError, CopierRefusedError, TopicCreationError)


def verdict(error: BaseException) -> Verdict:
    """What to do about ``error``: wait the outage out, fail at once, or run the task again at once."""
    if isinstance(error, _PERMANENT):
        return "permanent"
    if isinstance(error, UnknownTopicError):
        return "missing"
    if isinstance(error, (ClusterUnreachableError, ConnectionFailedError)):
        return "outage"
    if isinstance(error, BrokerApiError) and not isinstance(error, TransactionError):
        return "outage" if error.retriable else "permanent"
    return "other"


def failed_cluster(error: BaseException) -> str | None:
    """Where ``error`` happened, when it says: a cluster's bootstrap (no broker of it answered,
    or one answered an error its client retried until its retries ran out), or one broker's
    address (its connection failed or broke)."""
    if isinstance(error, ClusterUnreachableError):
        return error.bootstrap
    if isinstance(error, ConnectionFailedError):
        return error.address
    if isinstance(error, BrokerApiError):
        return error.cluster
    return None


def cluster_role(where: str | None, source: KafkaClient, destination: KafkaClient) -> str:
    """"source" or "destination": whose bootstrap ``where`` (:func:`failed_cluster`) is, or one
    of whose brokers (as the clients last saw them, asking none); "" when neither, or not known."""
    for role, client in (("source", source), ("destination", destination)):
        if where is not None and (where == client.bootstrap or where in client.known_brokers()):
            return role
    return ""


@dataclass(frozen=True)
class TaskFailure:
    """A copy task's failure, sent back to the driver as data (kmirror's exceptions do not all
    survive pickling)."""

    task: int
    kind: str
    """The error's class name, e.g. ``CorruptSourceError``."""
    message: str
    """Its text, which names the partition and offset, or the cluster."""
    verdict: Verdict
    """What the driver does about it (:func:`verdict`)."""
    cluster: str | None = None
    """The bootstrap of the cluster, or the address of the broker, that did not answer, when
    the error says (:func:`failed_cluster`)."""
    topic: str | None = None
    """The topic that is missing (verdict ``missing``)."""

    @classmethod
    def of(cls, task: int, error: KMirrorError) -> "TaskFailure":
        kind = verdict(error)
        return cls(task, type(error).__name__, str(error), kind, failed_cluster(error),
                   error.topic if isinstance(error, UnknownTopicError) else None)

    @property
    def outage(self) -> bool:
        """Waited out, then run again."""
        return self.verdict == "outage"

    @property
    def permanent(self) -> bool:
        """Fails the job at once."""
        return self.verdict == "permanent"

    def line(self) -> str:
        return f"{self.kind}: {self.message}"
