"""The one reading of Spark's errors (:func:`mirror.spark.pyspark_internals.spark_failure`):
what failed, from the text Spark and Py4J pass on. The texts below are the shapes PySpark 4
prints (the last test has Spark itself make them)."""

from __future__ import annotations

import pytest

from mirror.spark.pyspark_internals import spark_failure
from mirror.spark.runner import job_failure

PLANNER_FAILURE = RuntimeError(
    "An error occurred while calling o123.collectToPython.\n"
    ": org.apache.spark.SparkException: Job aborted due to stage failure: Task 0 in stage 3.0 failed 1 times\n"
    "org.apache.spark.api.python.PythonException: Traceback (most recent call last):\n"
    '  File "/work/main/mirror/engine/copy.py", line 99, in _route_fetched\n'
    "    raise CorruptSourceError(tp, where, reason) from exc\n"
    "mirror.engine.errors.CorruptSourceError: corrupt source batch in t/3 at offset 40: CRC-32C mismatch\n"
    "\tat org.apache.spark.api.python.BasePythonRunner$ReaderIterator.handlePythonException(PythonRunner.scala:642)\n")

STAGE_FAILURE = RuntimeError(
    "An error occurred while calling o812.collectToPython.\n"
    ": org.apache.spark.SparkException: Job aborted due to stage failure: Task 1 in stage 7.0 failed 4 times, most "
    "recent failure: Lost task 1.3 in stage 7.0 (TID 31) (localhost executor driver): "
    "org.apache.spark.SparkException: Python worker failed to connect back.\n"
    "\tat org.apache.spark.api.python.PythonWorkerFactory.createSimpleWorker(PythonWorkerFactory.scala:250)\n"
    "Caused by: java.net.SocketTimeoutException: Accept timed out\n")

def test_kmirrors_error_is_recovered_from_the_python_traceback_spark_wraps_it_in():
    failure = spark_failure(PLANNER_FAILURE)
    assert (failure.kind, failure.message, failure.ours) == (
        "CorruptSourceError", "corrupt source batch in t/3 at offset 40: CRC-32C mismatch", True)
    unreachable = spark_failure(RuntimeError("...\nmirror.kafka.errors.ClusterUnreachableError: cluster h:1 unreachable: x\n"))
    assert unreachable.kind == "ClusterUnreachableError"  # kmirror run and verify map this one to exit code 2
    job = job_failure(PLANNER_FAILURE)
    assert (job.kind, job.message) == ("CorruptSourceError", "corrupt source batch in t/3 at offset 40: CRC-32C mismatch")


def test_sparks_innermost_cause_names_a_failure_of_spark_itself_not_py4js_envelope():
    failure = spark_failure(STAGE_FAILURE)
    assert (failure.kind, failure.message, failure.ours) == (
        "SparkException", "Python worker failed to connect back.", False)
    assert failure.transient == "PythonWorkerStartTimeout" and not failure.no_kmirror


def test_only_a_python_worker_start_timeout_is_transient():
    assert spark_failure(RuntimeError("org.apache.spark.SparkException: Job aborted due to stage failure")).transient is None
    assert spark_failure(RuntimeError("")).transient is None
    assert spark_failure(PLANNER_FAILURE).transient is None


def test_text_naming_no_error_keeps_its_class_and_first_line():
    failure = spark_failure(RuntimeError("Py4J broke\nmore"))
    assert (failure.kind, failure.message, failure.ours) == ("RuntimeError", "Py4J broke", False)
    assert (spark_failure(RuntimeError("")).kind, spark_failure(RuntimeError("")).message) == (
        "RuntimeError", "(no message)")


@pytest.mark.slow
def test_what_spark_itself_reports_of_a_tasks_error_is_read_as_that_error():
    """PySpark's own texts, not ours: a task raising kmirror's error, and another Python error."""
    from mirror.config import load_config
    from mirror.spark.session import spark_session

    spark = spark_session(load_config(None, {"source.bootstrap": "unused:9092", "destination.bootstrap": "unused:9093",
                                            "topics": "t"}))

    def ours(_):
        from mirror.kafka.errors import ClusterUnreachableError

        raise ClusterUnreachableError("127.0.0.1:1", "refused")

    def theirs(_):
        return iter([1 // 0])

    with pytest.raises(Exception) as raised:
        spark.sparkContext.parallelize([1], 1).mapPartitions(ours).collect()
    failure = spark_failure(raised.value)
    assert (failure.kind, failure.ours) == ("ClusterUnreachableError", True)
    assert failure.message.startswith("cluster 127.0.0.1:1 unreachable: refused")
    with pytest.raises(Exception) as raised:
        spark.range(1, numPartitions=1).rdd.mapPartitions(theirs).collect()
    failure = spark_failure(raised.value)
    assert (failure.kind, failure.message, failure.ours) == ("ZeroDivisionError", "integer division or modulo by zero",
                                                             False)
