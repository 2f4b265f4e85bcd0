"""A test interrupted inside a call to Spark's JVM must not break the next test's calls.

PySpark talks to its JVM over py4j's pinned-thread connections: each Python thread keeps one
socket, reused for every call. pytest-timeout (and any exception raised from a signal handler)
can stop a test while its thread waits for the JVM's answer; the answer then arrives later, on
the same socket, and is read as the answer to the thread's next call, and every call after
that reads the one before's. On a pytest worker sharing one Spark session between its tests,
one timed-out test failed every later Spark test of that worker with ``'JavaObject' object is
not callable`` or ``org.apache.spark.sql.classic.SparkSession$ does not exist in the JVM``
(CI, 2026-12-02). Closing the thread's connection after a failed test makes py4j open a new
one for the next call; the JVM ends the old call's thread when it finds the socket closed.
"""

from __future__ import annotations

import sys

__all__ = ["forget_interrupted_jvm_call"]


def forget_interrupted_jvm_call() -> bool:
    """Close this thread's py4j connection to Spark's JVM, if it has one; whether it had."""
    if "pyspark" not in sys.modules:
        return False
    from pyspark import SparkContext

    gateway = SparkContext._gateway
    client = getattr(gateway, "_gateway_client", None)
    connection = client.get_thread_connection() if hasattr(client, "get_thread_connection") else None
    if connection is None:
        return False
    connection.close()
    return True
