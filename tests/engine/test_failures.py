"""Which copy failures are waited out, which fail the job at once, which the driver runs again
at once; and how a task reports each of them to the driver as data instead of raising it."""

from __future__ import annotations

import pytest

from mirror.config import ClusterConfig, ConfigError, RetryConfig
from mirror.engine import (CopyJob, CopyRequest, CorruptSourceError, DataLossError, SourceTruncatedError,
                           TopicMismatchError)
from mirror.engine import task as task_module
from mirror.engine.failures import verdict
from mirror.engine.task import copy_task
from mirror.kafka import (BrokerApiError, ClusterUnreachableError, ConnectionFailedError, HangingTransactionError,
                          ProducerSequenceError, ProtocolError, TopicPartition, UnknownTopicError)
from mirror.kafka.transactions import ProducerFencedError

TP = TopicPartition("t", 3)


@pytest.mark.parametrize("error, expected", [
    (ClusterUnreachableError("h:1", "cannot connect"), "outage"),
    (ConnectionFailedError("h:1", "connection closed by the broker"), "outage"),
    (BrokerApiError.from_code("Fetch", 6, TP), "outage"),  # NOT_LEADER_OR_FOLLOWER, retries used up
    (BrokerApiError.from_code("Metadata", 5, TP), "outage"),  # LEADER_NOT_AVAILABLE
    (UnknownTopicError("t"), "missing"),  # a reachable cluster without the topic: not an outage (issue 70)
    (CorruptSourceError(TP, 40, "bad CRC"), "permanent"),
    (DataLossError(TP, 40, 90), "permanent"),
    (SourceTruncatedError(TP, 40, 10), "permanent"),
    (TopicMismatchError("t has 2 partitions"), "permanent"),
    (HangingTransactionError(TP, 40, 40, 960.0), "permanent"),
    (ConfigError("config error"), "permanent"),
    (BrokerApiError.from_code("Produce", 10, TP), "permanent"),  # MESSAGE_TOO_LARGE
    (ProducerFencedError("Produce", "PRODUCER_FENCED", 90, False, TP), "other"),
    (ProducerSequenceError(TP, 5, "OUT_OF_ORDER_SEQUENCE_NUMBER"), "other"),
    (ProtocolError("h:1: correlation id 3, expected 2"), "other"),
    (RuntimeError("a bug"), "other"),
])
def test_verdicts(error, expected):
    assert verdict(error) == expected


def _job(monkeypatch, error: Exception) -> CopyJob:
    cluster = ClusterConfig(bootstrap=("h:1",))
    job = CopyJob(cluster, cluster, RetryConfig(), {}, 1024)

    def copy_in_task(job, task, requests):
        raise error

    monkeypatch.setattr(task_module, "copy_in_task", copy_in_task)
    return job


def test_a_task_reports_an_outage_naming_the_cluster(monkeypatch):
    job = _job(monkeypatch, ClusterUnreachableError("h:1", "produce to t/0: cannot connect"))
    stats = copy_task(job, 2, [CopyRequest(TopicPartition("t", 0), 0, 10, -1)])
    failure = stats.failure
    assert (failure.task, failure.kind, failure.outage, failure.cluster) == (2, "ClusterUnreachableError", True, "h:1")
    assert stats.ranges == []


def test_a_task_reports_a_permanent_error_naming_partition_and_offset(monkeypatch):
    stats = copy_task(_job(monkeypatch, CorruptSourceError(TP, 40, "bad CRC")), 0, [CopyRequest(TP, 0, 100, -1)])
    assert (stats.failure.kind, stats.failure.outage) == ("CorruptSourceError", False)
    assert "t/3 at offset 40" in stats.failure.message


def test_a_task_reports_what_a_new_attempt_may_fix_for_the_driver_to_run_it_again(monkeypatch):
    # One way to the driver for every kmirror error (issue 39): data with its verdict, not a raise
    # that Spark would retry on its own.
    fenced = ProducerFencedError("Produce", "PRODUCER_FENCED", 90, False, TP)
    stats = copy_task(_job(monkeypatch, fenced), 0, [CopyRequest(TP, 0, 100, -1)])
    assert (stats.failure.kind, stats.failure.verdict) == ("ProducerFencedError", "other")
    assert not stats.failure.outage and not stats.failure.permanent


def test_a_task_raises_an_error_that_is_not_kmirrors(monkeypatch):
    with pytest.raises(RuntimeError, match="a bug"):
        copy_task(_job(monkeypatch, RuntimeError("a bug")), 0, [CopyRequest(TP, 0, 100, -1)])
