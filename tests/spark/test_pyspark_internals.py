"""kmirror leans on PySpark internals in one module (mirror/spark/pyspark_internals.py). These
tests fail when PySpark moves under it: a version it was not checked on, or an internal it
uses gone or reshaped. (What each internal does for kmirror is tested in test_session.py and
test_planned.py.)"""

from __future__ import annotations

import inspect
import time

import pytest

import pyspark

from mirror.spark.pyspark_internals import CHECKED_VERSIONS


def test_pyspark_is_a_version_the_internals_were_checked_on():
    major_minor = ".".join(pyspark.__version__.split(".")[:2])
    assert major_minor in CHECKED_VERSIONS, (
        f"PySpark {pyspark.__version__}: check every internal in mirror/spark/pyspark_internals.py "
        f"against it, then add {major_minor} to CHECKED_VERSIONS")


def test_the_jvm_launch_takes_popen_arguments_and_uses_the_modules_popen():
    from pyspark import java_gateway

    assert "popen_kwargs" in inspect.signature(java_gateway.launch_gateway).parameters
    assert callable(java_gateway.Popen)
    assert "Popen(" in inspect.getsource(java_gateway.launch_gateway)  # looked up at launch: the wrap applies


def test_the_worker_daemon_looks_its_worker_up_for_every_task():
    import pyspark.daemon as daemon

    assert list(inspect.signature(daemon.worker).parameters) == ["sock", "authenticated"]
    assert "worker(" in inspect.getsource(daemon.manager)


def test_the_context_keeps_its_active_context_and_accumulator_server_where_they_were():
    from pyspark import SparkContext

    assert hasattr(SparkContext, "_active_spark_context")
    assert "_accumulatorServer" in inspect.getsource(SparkContext)


def test_the_streaming_source_runner_still_pickles_planned_partitions():
    """planned_groups unpickles them from the plan (test_planned.py reads a real one)."""
    from pyspark.sql.streaming import python_streaming_source_runner

    assert "pickle" in inspect.getsource(python_streaming_source_runner)


@pytest.mark.slow
def test_a_call_interrupted_while_the_jvm_answers_does_not_garble_the_next_ones():
    """pytest-timeout stops a test from a signal handler; tests/conftest.py then closes the
    thread's py4j connection (tests/support/jvm_calls.py), without which every later call of
    the worker's shared session read the call before's answer."""
    import signal

    from jvm_calls import forget_interrupted_jvm_call
    from pyspark.sql import SparkSession

    class Interrupted(BaseException):
        pass

    def interrupt(_signum, _frame):
        raise Interrupted

    jvm = SparkSession.builder.master("local[1]").getOrCreate().sparkContext._jvm
    previous = signal.signal(signal.SIGALRM, interrupt)
    try:
        signal.setitimer(signal.ITIMER_REAL, 0.3)
        with pytest.raises(Interrupted) as interrupted:
            jvm.java.lang.Thread.sleep(1500)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    kept = interrupted.value  # held, as pytest's report holds a failure's frames
    time.sleep(1.5)  # the late answer is on the socket
    try:
        garbled = jvm.java.lang.Math.addExact(40, 2)  # reads the sleep's answer
    except Exception:
        garbled = None
    assert garbled != 42
    assert forget_interrupted_jvm_call()
    assert jvm.java.lang.Math.addExact(40, 2) == 42
    assert jvm.java.lang.Integer.toHexString(255) == "ff"
    del kept
