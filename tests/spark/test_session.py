"""The Spark session kmirror starts: its settings, and that the JVM runs with them."""

from __future__ import annotations

import pytest

from mirror.config import load_config
from mirror.spark.job import JVM_OPTIONS, spark_settings

_BASE = {"source.bootstrap": "127.0.0.1:9", "destination.bootstrap": "127.0.0.1:10", "topics": "t"}


def test_the_jvms_compile_with_c1_only_unless_spark_conf_says_otherwise():
    settings = spark_settings(load_config(None, _BASE))
    assert settings["spark.driver.extraJavaOptions"] == "-XX:TieredStopAtLevel=1"
    assert settings["spark.executor.extraJavaOptions"] == "-XX:TieredStopAtLevel=1"
    assert settings["spark.ui.enabled"] == "false"

    mine = spark_settings(load_config(None, {**_BASE, "spark_conf": {
        "spark.driver.extraJavaOptions": "-Dx=1", "spark.ui.enabled": "true", "spark.executor.memory": "2g"}}))
    assert mine["spark.driver.extraJavaOptions"] == "-Dx=1"  # replaced, not appended to
    assert mine["spark.executor.extraJavaOptions"] == JVM_OPTIONS
    assert mine["spark.ui.enabled"] == "true" and mine["spark.executor.memory"] == "2g"


@pytest.mark.slow
def test_the_driver_jvm_is_started_with_the_options(tmp_path):
    """The options must reach the JVM, so they must be set before the session starts it: read
    back from the running JVM's own arguments. (Every session of the test run is started by
    :func:`spark_session`, so a session an earlier test started has them too.)"""
    from mirror.spark.job import spark_session

    spark = spark_session(load_config(None, {**_BASE, "checkpoint": str(tmp_path / "ck")}))
    jvm = spark.sparkContext._jvm
    arguments = list(jvm.java.lang.management.ManagementFactory.getRuntimeMXBean().getInputArguments())
    assert JVM_OPTIONS in arguments
    # Spark adds its own module options in front of the executors'.
    assert JVM_OPTIONS in spark.sparkContext.getConf().get("spark.executor.extraJavaOptions").split()


@pytest.mark.slow
def test_the_warm_up_leaves_workers_the_copy_tasks_reuse(tmp_path):
    """The warm-up's point is the Python workers it leaves behind, with the copy engine
    imported: the next job's tasks must run in them, and a second warm-up must keep them.
    (PySpark lets a worker go after a task that left part of its input unread: a warm-up over
    a list of slots instead of a ``range``, which PySpark generates in the worker, would.)"""
    from mirror.spark.job import _warm_up_executors, spark_session

    def worker_state(partition):
        """A probe task (defined here, so that cloudpickle sends it by value): whether its
        worker had the copy engine imported when the task began, and its process. Reads its
        input, so that its worker stays for the next probe."""
        import os
        import sys

        warm = "mirror.engine.copy" in sys.modules
        for _ in partition:
            pass
        return iter([(warm, os.getpid())])

    spark = spark_session(load_config(None, {**_BASE, "checkpoint": str(tmp_path / "ck")}))
    slots = spark.sparkContext.defaultParallelism
    _warm_up_executors(spark, slots).join()
    probes = spark.sparkContext.parallelize(range(slots), slots).mapPartitions(worker_state).collect()
    assert [warm for warm, _ in probes] == [True] * slots
    _warm_up_executors(spark, slots).join()
    again = spark.sparkContext.parallelize(range(slots), slots).mapPartitions(worker_state).collect()
    assert {pid for _, pid in again} == {pid for _, pid in probes}  # the same workers, still there
