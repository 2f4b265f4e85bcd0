"""The copy's Spark tasks, without Spark: the source's rows decoded into the engine's requests,
every kmirror error of a task sent to the driver as data, and what Spark pickles."""

from __future__ import annotations

import functools

import pytest

from mirror.config import ClusterConfig, RetryConfig, load_config
from mirror.engine import CopyJob, CopyRequest, TaskStats
from mirror.engine import task as engine_task
from mirror.engine.topics import TopicRoute
from mirror.kafka import ClusterUnreachableError, TopicPartition
from mirror.kafka.transactions import ProducerFencedError
from mirror.routing import RoutingPolicy
from mirror.spark import tasks
from mirror.spark.source import CopyGroup, CopyRange, KafkaRangeReader, groups_of_rows

TP = TopicPartition("t", 3)


def test_the_rows_the_reader_writes_decode_into_its_groups():
    t_id = "5066d00d-deff-4e57-aac9-7b0153d6aa19"
    groups = [CopyGroup(0, (CopyRange("t", 3, 0, 100, 5, t_id), CopyRange("u", 0, 7, 9))),
              CopyGroup(1, (CopyRange("t", 1, 4, 8, topic_id=t_id),))]
    rows = [row for group in reversed(groups) for row in KafkaRangeReader.read(None, group)]
    assert groups_of_rows(rows) == groups
    d_id = "0d4e3b6a-1f2c-4a5b-9c8d-7e6f5a4b3c2d"
    routes = {"t": TopicRoute("t", "t", 4, RoutingPolicy(partitioning="preserve", destination_partitions=4),
                              topic_id=d_id)}
    assert tasks.task_of(groups[0], routes) == (0, [CopyRequest(TP, 0, 100, 5, t_id, d_id),
                                                    CopyRequest(TopicPartition("u", 0), 7, 9, -1, None, None)])


def _job(monkeypatch, error: Exception | None = None, copied: list | None = None) -> CopyJob:
    """A job whose copy raises ``error``, or copies nothing and records what it was asked in ``copied``."""
    cluster = ClusterConfig(bootstrap=("h:1",))

    def copy_in_task(job, task, requests):
        if error is not None:
            raise error
        copied.append((task, requests))
        return TaskStats([])

    monkeypatch.setattr(engine_task, "copy_in_task", copy_in_task)
    return CopyJob(cluster, cluster, RetryConfig(), {}, 1024)


def test_the_rows_of_a_task_are_copied_as_its_requests(monkeypatch):
    copied = []
    (stats,) = tasks.copy_rows(_job(monkeypatch, copied=copied), [("t", 3, 0, 100, 2, -1, ""), ("u", 0, 7, 9, 2, 4, "")])
    assert stats.failure is None
    assert copied == [(2, [CopyRequest(TP, 0, 100, -1), CopyRequest(TopicPartition("u", 0), 7, 9, 4)])]


@pytest.mark.parametrize("error, verdict", [
    (ProducerFencedError("Produce", "PRODUCER_FENCED", 90, False, TP), "other"),
    (ClusterUnreachableError("h:1", "cannot connect"), "outage"),
])
def test_a_task_sends_every_kmirror_error_to_the_driver_as_data(monkeypatch, error, verdict):
    (stats,) = tasks.copy_tasks(_job(monkeypatch, error), [(1, [CopyRequest(TP, 0, 100, -1)])])
    failure = stats.failure
    assert (failure.task, failure.kind, failure.verdict) == (1, type(error).__name__, verdict)
    assert failure.message == str(error) and stats.ranges == []


def test_a_bug_fails_the_spark_task(monkeypatch):
    with pytest.raises(ValueError):
        list(tasks.copy_tasks(_job(monkeypatch, ValueError("a bug")), [(0, [CopyRequest(TP, 0, 100, -1)])]))


def test_spark_pickles_a_reference_to_the_function_and_the_small_job():
    from pyspark import cloudpickle

    config = load_config(None, {"source.bootstrap": "src:1", "destination.bootstrap": "dst:1", "topics": "t"})
    pickled = cloudpickle.dumps(functools.partial(tasks.copy_tasks, CopyJob.from_config(config, {}, run_id="r")))
    assert b"mirror.spark.tasks" in pickled and len(pickled) < 2048  # by reference: no code object
