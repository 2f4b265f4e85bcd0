"""The Spark session kmirror starts: its settings, and that the JVM runs with them."""

from __future__ import annotations

from pathlib import Path

import pytest

from mirror.config import load_config
from mirror.spark.session import JVM_OPTIONS, spark_settings

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
    back from the running JVM's own arguments, in a Python of its own. (This worker's session
    may have been started by an earlier test with other settings: verify's, in process, brings
    C2 back; CI met that.) The tests' JAVA_TOOL_OPTIONS, which say the same option, are left out
    of that process, so that only the session's settings can put it there."""
    import json
    import os
    import subprocess
    import sys

    probe = f"""
import json
from mirror.config import load_config
from mirror.spark.session import spark_session
spark = spark_session(load_config(None, {{**{_BASE!r}, "checkpoint": {str(tmp_path / "ck")!r}}}))
jvm = spark.sparkContext._jvm
print(json.dumps({{
    "driver": list(jvm.java.lang.management.ManagementFactory.getRuntimeMXBean().getInputArguments()),
    "executor": spark.sparkContext.getConf().get("spark.executor.extraJavaOptions"),
}}))
spark.stop()
"""
    env = {name: value for name, value in os.environ.items() if name != "JAVA_TOOL_OPTIONS"}
    done = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr[-3000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert JVM_OPTIONS in seen["driver"]
    # Spark adds its own module options in front of the executors'.
    assert JVM_OPTIONS in seen["executor"].split()


@pytest.mark.slow
def test_the_warm_up_leaves_workers_the_copy_tasks_reuse(tmp_path):
    """The warm-up's point is the Python workers it leaves behind, with the copy engine
    imported: the next job's tasks must run in them, and a second warm-up must keep them.
    They are forked from kmirror's daemon (``spark.python.daemon.module`` reached the
    executors). (PySpark lets a worker go after a task that left part of its input unread: a
    warm-up over a list of slots instead of a ``range``, which PySpark generates in the
    worker, would.)"""
    from mirror.spark.job import _warm_up_executors
    from mirror.spark.session import spark_session

    def worker_state(partition):
        """A probe task (defined here, so that cloudpickle sends it by value): whether its
        worker had the copy engine imported when the task began, its process, and the daemon
        it was forked from. Reads its input, so that its worker stays for the next probe."""
        import os
        import sys

        warm = "mirror.engine.copy" in sys.modules
        daemon = sys.modules["__main__"].__spec__.name  # the daemon module the worker was forked from
        for _ in partition:
            pass
        return iter([(warm, os.getpid(), daemon)])

    config = load_config(None, {**_BASE, "checkpoint": str(tmp_path / "ck")})
    spark = spark_session(config)
    slots = spark.sparkContext.defaultParallelism
    runner = _runner(config.replaced("streaming", copy_tasks=slots), routes={})  # no topic yet: no copier
    _warm_up_executors(spark, runner).join()
    probes = spark.sparkContext.parallelize(range(slots), slots).mapPartitions(worker_state).collect()
    assert [warm for warm, _, _ in probes] == [True] * slots
    assert {daemon for _, _, daemon in probes} == {"mirror.spark.worker_daemon"}
    _warm_up_executors(spark, runner).join()
    again = spark.sparkContext.parallelize(range(slots), slots).mapPartitions(worker_state).collect()
    assert {pid for _, pid, _ in again} == {pid for _, pid, _ in probes}  # the same workers, still there


@pytest.mark.slow
def test_the_warm_up_starts_the_copiers_before_the_first_micro_batch(tmp_path):
    """A long-running job's copiers are started by the warm-up, while the query starts, so
    that the first micro-batch of a catch-up does not pay for their start inside its copy:
    with no micro-batch run, each copier a known partition needs is listening at its socket
    (three partitions, two copy tasks: both), and the release at the end stops them."""
    import socket

    from mirror.broker import EmbeddedBroker
    from mirror.engine import sync_destination_topics
    from mirror.engine.clients import client_for
    from mirror.engine.copier import socket_path
    from mirror.kafka import KafkaClient, NewTopic
    from mirror.spark.job import _prepare_destination, _warm_up_executors
    from mirror.spark.session import spark_session

    with EmbeddedBroker(tmp_path / "src") as src, EmbeddedBroker(tmp_path / "dst") as dst:
        with KafkaClient(src.bootstrap) as client:
            client.create_topics([NewTopic("warm", 3)])
        config = load_config(None, {"source.bootstrap": src.bootstrap, "destination.bootstrap": dst.bootstrap,
                                    "topics": "warm", "checkpoint": str(tmp_path / "ck"), "copy_tasks": 2})
        source = client_for(config.clusters.source, config.limits.retry)
        destination = client_for(config.clusters.destination, config.limits.retry)
        routes = sync_destination_topics(config, source, destination)
        _prepare_destination(config, source, destination)
        spark = spark_session(config)
        runner = _runner(config, routes)
        _warm_up_executors(spark, runner).join()
        paths = [socket_path(config.job_name, runner.run_id, task) for task in (0, 1)]
        try:
            for path in paths:
                with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
                    probe.connect(str(path))  # refused or missing: no copier there
        finally:
            runner.release_copiers(spark.sparkContext)
        assert not any(path.exists() for path in paths)


def _runner(config, routes):
    """The job's micro-batch runner, as :func:`run_mirror` makes it."""
    import threading

    from mirror.spark.runner import MicroBatchRunner
    from mirror.spark.stopping import Stopper

    return MicroBatchRunner(config, routes, None, Stopper(threading.Event(), Path("unused")))


def test_the_worker_daemon_hands_pyspark_a_socket_in_quick_ack_mode():
    """Each task's socket reaches PySpark's worker in quick-ACK mode (read back from the kernel
    at the moment PySpark gets it), over a real loopback TCP connection; a Unix socket, where
    the option does not apply, is handed over as it is."""
    import socket

    from mirror.spark.pyspark_internals import quick_ack

    seen = []

    def pyspark_worker(sock, authenticated):
        quick = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_QUICKACK) if sock.family != socket.AF_UNIX else None
        seen.append((sock, authenticated, quick))
        return 0

    worker = quick_ack(pyspark_worker)
    with socket.create_server(("127.0.0.1", 0)) as server:
        client = socket.create_connection(server.getsockname())
        accepted, _ = server.accept()
        with client, accepted:
            accepted.setsockopt(socket.IPPROTO_TCP, socket.TCP_QUICKACK, 0)
            assert worker(accepted, True) == 0
    assert seen == [(accepted, True, 1)]
    left, right = socket.socketpair()
    with left, right:
        assert worker(left, False) == 0
    assert seen[1] == (left, False, None)
