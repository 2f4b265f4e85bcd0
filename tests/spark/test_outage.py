"""Waiting out outages, without Spark: the backoff and its cap, one log line per step, the
limit, a stop request, and which errors are waited out; and task retries for local masters."""

from __future__ import annotations

import logging
import math
from pathlib import Path

import pytest

from mirror.engine import CorruptSourceError
from mirror.kafka import BrokerApiError, ClusterUnreachableError, ConnectionFailedError, TopicPartition, UnknownTopicError
from mirror.kafka.transactions import ProducerFencedError
from mirror.spark.runner import RunOutcome
from mirror.spark.session import with_task_retries
from mirror.spark.outage import MAX_BACKOFF_S, MISSING_TRIES, Outage, OutageInterrupted, ride_out


class FakeTime:
    """A clock that moves only when the code under test sleeps."""

    def __init__(self):
        self.now = 0.0
        self.sleeps: list[float] = []

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> bool:
        self.sleeps.append(seconds)
        self.now += seconds
        return True


def failing(times: int, error: Exception):
    """A call that raises ``error`` ``times`` times, then returns how many calls it took."""
    calls = []

    def call():
        calls.append(None)
        if len(calls) <= times:
            raise error
        return len(calls)

    return call


DOWN = ClusterUnreachableError("10.0.0.1:9092", "cannot connect: Connection refused")


def test_an_outage_is_waited_out_with_capped_backoff_and_one_line_per_step(caplog):
    fake = FakeTime()
    caplog.set_level(logging.INFO, logger="mirror.spark.outage")
    assert ride_out(failing(7, DOWN), Outage(clock=fake.clock), fake.sleep) == 8
    assert fake.sleeps == [1, 2, 4, 8, MAX_BACKOFF_S, MAX_BACKOFF_S, MAX_BACKOFF_S]
    steps = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(steps) == 7
    assert "cluster 10.0.0.1:9092 unreachable" in steps[0] and "down for 0 s, retrying in 1 s" in steps[0]
    assert "down for 30 s, retrying in 15 s" in steps[5]
    assert caplog.records[-1].getMessage() == "back after an outage of 60 s; going on"


def test_an_outage_longer_than_the_limit_raises_the_last_error(caplog):
    fake = FakeTime()
    with pytest.raises(ClusterUnreachableError):
        ride_out(failing(100, DOWN), Outage(20.0, clock=fake.clock), fake.sleep)
    assert fake.now == 20.0  # the last wait ends at the limit, not past it
    assert "longer than max_outage_s (20 s): giving up" in caplog.records[-1].getMessage()


def test_an_outage_ends_the_count_and_the_next_one_starts_from_the_first_backoff():
    fake = FakeTime()
    outage = Outage(clock=fake.clock)
    ride_out(failing(3, DOWN), outage, fake.sleep)
    fake.now += 100
    ride_out(failing(1, DOWN), outage, fake.sleep)
    assert fake.sleeps == [1, 2, 4, 1]


def test_a_stop_request_ends_the_wait():
    with pytest.raises(OutageInterrupted):
        ride_out(failing(5, DOWN), Outage(), lambda seconds: False)


@pytest.mark.parametrize("error", [
    CorruptSourceError(TopicPartition("t", 0), 10, "bad CRC"),
    BrokerApiError.from_code("Produce", 10, TopicPartition("t", 0)),  # MESSAGE_TOO_LARGE: not retriable
    ValueError("a bug"),
])
def test_errors_that_are_not_outages_raise_at_once(error):
    fake = FakeTime()
    with pytest.raises(type(error)):
        ride_out(failing(1, error), Outage(clock=fake.clock), fake.sleep)
    assert fake.sleeps == []


def test_a_leaderless_partition_is_an_outage():
    fake = FakeTime()
    leaderless = BrokerApiError.from_code("Metadata", 5, TopicPartition("t", 0))  # LEADER_NOT_AVAILABLE
    assert ride_out(failing(2, leaderless), Outage(clock=fake.clock), fake.sleep) == 3


def test_a_topic_missing_from_a_cluster_that_answers_is_looked_up_again_at_once_never_waited_for(caplog):
    """Issue 70: deleted between two requests of a plan, the topic is listed again at once (3
    times at most); a topic that stays missing raises, and no outage line is said."""
    fake = FakeTime()
    gone = UnknownTopicError("orders")
    assert ride_out(failing(MISSING_TRIES, gone), Outage(clock=fake.clock), fake.sleep) == MISSING_TRIES + 1
    with pytest.raises(UnknownTopicError):
        ride_out(failing(MISSING_TRIES + 1, gone), Outage(clock=fake.clock), fake.sleep)
    assert fake.sleeps == [] and "outage" not in caplog.text


def test_the_default_limit_is_none_for_the_long_running_job_and_bounded_for_once():
    from mirror.config import ONCE_MAX_OUTAGE_S, load_config

    base = {"source.bootstrap": "a:1", "destination.bootstrap": "b:1", "topics": "x"}
    assert load_config(None, base).outage_limit_s == math.inf
    assert load_config(None, {**base, "once": True}).outage_limit_s == ONCE_MAX_OUTAGE_S
    assert load_config(None, {**base, "once": True, "max_outage_s": math.inf}).outage_limit_s == math.inf
    assert load_config(None, {**base, "max_outage_s": 60}).outage_limit_s == 60


@pytest.mark.parametrize("master, expected", [
    ("local", "local[1,4]"), ("local[2]", "local[2,4]"), ("local[*]", "local[*,4]"),
    ("local[2,8]", "local[2,8]"), ("spark://host:7077", "spark://host:7077"), ("yarn", "yarn"),
])
def test_local_masters_get_task_retries(master, expected):
    assert with_task_retries(master) == expected


def test_the_outage_is_dated_from_the_start_of_the_first_failed_try(caplog):
    """A try fails only once its own retries ran out; the outage began before that."""
    fake = FakeTime()
    slow = failing(1, DOWN)

    def call():
        fake.now += 12  # the task's bounded retries
        return slow()

    ride_out(call, Outage(clock=fake.clock), fake.sleep)
    assert "down for 12 s, retrying in 1 s" in caplog.records[0].getMessage()


def _runner(monkeypatch, results, *, stop=None):
    """The driver's foreachBatch function with its Spark job replaced by ``results``: one list
    of TaskStats per run, the tasks each run was asked to copy recorded."""
    import threading

    from mirror.config import load_config
    from mirror.spark import outage, runner as runners
    from mirror.spark.stopping import Stopper

    monkeypatch.setattr(outage, "INITIAL_BACKOFF_S", 0.001)
    config = load_config(None, {"source.bootstrap": "src:1", "destination.bootstrap": "dst:1", "topics": "t"})
    reports = []
    runner = runners.MicroBatchRunner(config, {}, reports.append, Stopper(stop or threading.Event(), Path("unused")))
    runner.reports = reports
    asked = []

    def copy(rows, planned, tasks):
        asked.append(tasks)
        return results.pop(0)

    monkeypatch.setattr(runners, "planned_groups", lambda rows: [])
    monkeypatch.setattr(runner, "_copy", copy)
    return runner, asked


def _stats(task: int, failure=None):
    from mirror.engine import RangeStats, TaskStats

    if failure is not None:
        return TaskStats([], failure=failure)
    return TaskStats([RangeStats(TopicPartition("t", task), 0, 10, high_watermark=10)])


def test_the_driver_runs_only_the_tasks_that_hit_an_outage_again(monkeypatch):
    from mirror.engine.failures import TaskFailure

    down = TaskFailure.of(1, ClusterUnreachableError("dst:1", "produce to t/1: cannot connect"))
    runner, asked = _runner(monkeypatch, [[_stats(0), _stats(1, down)], [_stats(1, down)], [_stats(1)]])
    runner(None, 7)
    assert asked == [None, frozenset({1}), frozenset({1})]
    (report,) = runner.reports  # one micro-batch, with the ranges of the first run and of the last
    assert runner.outcome().failure is None and sorted(r.tp.partition for r in report.ranges) == [0, 1]


def _answered_by(bootstrap: str, error: BrokerApiError) -> BrokerApiError:
    """``error`` as a client of ``bootstrap`` raises it once its retries are used up."""
    error.cluster = bootstrap
    return error


@pytest.mark.parametrize("error, role", [
    (ClusterUnreachableError("dst:1", "produce to t/1: cannot connect"), "destination"),
    (ConnectionFailedError("dst:1", "connection closed by the broker"), "destination"),
    (ConnectionFailedError("src-broker-2:9092", "connection closed by the broker"), "source"),
    (BrokerApiError.from_code("Produce", 6, TopicPartition("t", 1)), None),
    (_answered_by("dst:1", BrokerApiError.from_code("Produce", 6, TopicPartition("t", 1))), "destination"),
], ids=["cluster unreachable", "a bootstrap broker", "a broker from metadata", "no address", "a broker's error"])
def test_each_outage_line_names_the_cluster_that_failed(monkeypatch, caplog, error, role):
    """A broken connection names only its broker: the line still says which cluster it is."""
    from mirror.engine import client_for
    from mirror.engine.failures import TaskFailure

    down = TaskFailure.of(1, error)
    runner, _ = _runner(monkeypatch, [[_stats(1, down)], [_stats(1)]])
    source = client_for(runner.config.clusters.source, runner.config.limits.retry)
    monkeypatch.setattr(source, "_nodes", {2: "src-broker-2:9092"})  # as its last metadata listed them
    with caplog.at_level(logging.WARNING, logger="mirror.spark.outage"):
        runner(None, 7)
    (line,) = [r.getMessage() for r in caplog.records if "outage:" in r.getMessage()]
    if role is None:
        assert line.startswith(f"outage: {error} (1 copy task waiting)"), line
    else:
        assert line.startswith(f"outage: {role} {error}"), line


def test_a_permanent_task_failure_fails_the_micro_batch_at_once(monkeypatch):
    from mirror.engine.failures import TaskFailure
    from mirror.spark.job import MirrorJobError

    corrupt = TaskFailure.of(0, CorruptSourceError(TopicPartition("t", 0), 40, "bad CRC"))
    down = TaskFailure.of(1, DOWN)
    runner, asked = _runner(monkeypatch, [[_stats(0, corrupt), _stats(1, down)]])
    with pytest.raises(MirrorJobError) as caught:
        runner(None, 3)
    assert caught.value.kind == "CorruptSourceError" and "t/0 at offset 40" in caught.value.message
    assert runner.outcome().failure is caught.value and asked == [None]


def test_a_stop_during_an_outage_ends_the_micro_batch_unfinished(monkeypatch):
    import threading

    from mirror.engine.failures import TaskFailure

    stop = threading.Event()
    stop.set()
    runner, _ = _runner(monkeypatch, [[_stats(0, TaskFailure.of(0, DOWN))]], stop=stop)
    with pytest.raises(OutageInterrupted):
        runner(None, 1)
    assert runner.outcome() == RunOutcome(interrupted=True)


FENCED = ProducerFencedError("Produce", "PRODUCER_FENCED", 90, False, TopicPartition("t", 1))


def test_the_driver_runs_a_task_a_new_attempt_may_fix_again_at_once(monkeypatch, caplog):
    from mirror.engine.failures import TaskFailure

    fenced = TaskFailure.of(1, FENCED)
    runner, asked = _runner(monkeypatch, [[_stats(0), _stats(1, fenced)], [_stats(1, fenced)], [_stats(1)]])
    runner(None, 7)
    assert asked == [None, frozenset({1}), frozenset({1})]
    (report,) = runner.reports
    assert runner.outcome().failure is None and sorted(r.tp.partition for r in report.ranges) == [0, 1]
    assert "outage" not in caplog.text  # not waited out


def test_a_task_that_fails_as_often_as_spark_would_try_it_fails_the_micro_batch(monkeypatch):
    from mirror.engine.failures import TaskFailure
    from mirror.spark.job import MirrorJobError

    fenced = TaskFailure.of(0, FENCED)
    runner, asked = _runner(monkeypatch, [[_stats(0, fenced)]] * 5)
    with pytest.raises(MirrorJobError) as caught:
        runner(None, 2)
    assert caught.value.kind == "ProducerFencedError" and len(asked) == 4  # local[2] runs as local[2,4]
    assert runner.outcome().failure is caught.value


def test_an_outage_gives_a_task_its_attempts_again(monkeypatch):
    """As a Spark job run after the wait would: the count of attempts is per run of the task."""
    from mirror.engine.failures import TaskFailure

    fenced, down = TaskFailure.of(0, FENCED), TaskFailure.of(0, DOWN)
    runs = [[_stats(0, fenced)]] * 3 + [[_stats(0, down)]] + [[_stats(0, fenced)]] * 3 + [[_stats(0)]]
    runner, asked = _runner(monkeypatch, runs)
    runner(None, 4)
    assert len(asked) == 8 and runner.outcome().failure is None


@pytest.mark.parametrize("master, spark_conf, attempts", [
    ("local[2]", {}, 4), ("local", {}, 4), ("local[*,8]", {}, 8), ("local[2,1]", {"spark.task.maxFailures": "6"}, 1),
    ("spark://host:7077", {}, 4), ("yarn", {"spark.task.maxFailures": "6"}, 6),
    ("local[2]", {"spark.master": "local[2]"}, 1), ("local[2]", {"spark.master": "yarn"}, 4),
])
def test_the_driver_tries_a_task_as_often_as_spark_would(master, spark_conf, attempts):
    from mirror.config import load_config
    from mirror.spark.session import task_attempts

    config = load_config(None, {"source.bootstrap": "a:1", "destination.bootstrap": "b:1", "topics": "x",
                                "master": master, "spark_conf": spark_conf})
    assert task_attempts(config) == attempts
