"""The Spark session the mirror runs in: its settings, its JVM, and how many times it runs a task."""

from __future__ import annotations

import contextlib
import logging
import os
import re
import signal
import sys
import threading

from ..config import MirrorConfig
from .pyspark_internals import context_running, forward_jvm_signals, start_context, under_spark_submit
from .shipping import EXECUTOR_PYTHON, check_archive, shipping_settings

__all__ = ["spark_session", "spark_settings", "JVM_OPTIONS", "with_task_retries", "task_attempts",
           "LOCAL_TASK_ATTEMPTS"]

log = logging.getLogger(__name__)


def spark_session(config: MirrorConfig):
    """The session the mirror runs in (``getOrCreate``: an existing one is reused).

    The executors' Python must be the one kmirror is installed in. A local master gets task
    retries (:func:`with_task_retries`); the settings are :func:`spark_settings`. The JVM's own
    log, whose errors are stack traces of what the driver reports in one line, shows only with
    debug logging (``kmirror -v``).

    Stopping is the driver's to do (:mod:`mirror.run_cli`): the JVM is started so that signals
    reach the driver only (:func:`~.pyspark_internals.start_context`), and PySpark's SIGINT
    handler, which cancels the running jobs and raises KeyboardInterrupt mid-micro-batch, is
    replaced by the one the caller had installed."""
    if _shipping(config):
        check_archive(config.streaming.ship_environment)
        os.environ["PYSPARK_PYTHON"] = EXECUTOR_PYTHON  # the source's planner keeps this one (.shipping)
    else:
        if config.streaming.ship_environment is not None:
            log.warning("--ship-environment is for a cluster's executors: a local master runs them in this "
                        "process's Spark, with this Python, so the archive is not shipped")
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark import SparkConf
    from pyspark.sql import SparkSession

    settings = {"spark.app.name": "kmirror", **spark_settings(config)}
    master = _our_master(config)
    if master is not None:
        settings["spark.master"] = with_task_retries(master)
    else:
        log.info("under spark-submit: the master is spark-submit's")
    if not context_running():
        with _keeping_sigint():
            start_context(SparkConf(loadDefaults=False).setAll(settings.items()))
    builder = SparkSession.builder
    for key, value in settings.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN" if log.isEnabledFor(logging.DEBUG) else "FATAL")
    if under_spark_submit():
        forward_jvm_signals(spark.sparkContext)
    return spark


@contextlib.contextmanager
def _keeping_sigint():
    """Restore the SIGINT handler PySpark's SparkContext replaces (in the main thread only)."""
    try:
        handler = signal.getsignal(signal.SIGINT)
    except ValueError:
        handler = None
    try:
        yield
    finally:
        if handler is not None and threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGINT, handler)


JVM_OPTIONS = "-XX:TieredStopAtLevel=1"
"""The driver's and executors' JVMs compile with C1 only, not C2.

No record passes through kmirror's JVMs: they plan, schedule and commit, while the copy runs
in Python workers. C2, the optimising compiler, then costs more than it gives: in a job's
first minutes its compiler thread took CPU during the copies, on cores the mirror and the
brokers needed, and made them markedly slower, while the job's steady micro-batches were no
slower with C1 alone (figures: docs/performance.md, "The Spark job")."""


def spark_settings(config: MirrorConfig) -> dict[str, str]:
    """The session's settings: kmirror's, then the configuration's ``spark_conf``, which
    replaces any of them (``spark.driver.extraJavaOptions`` for one brings C2 back).

    The Python workers run under :mod:`.worker_daemon`, which acknowledges each task's input
    at once: every micro-batch's Spark job is then spared a delayed ACK (up to 40 ms on
    Linux) per task. (Unix domain sockets,
    ``spark.python.unix.domain.socket.enabled``, would too, but then PySpark's idle workers
    print a ``BrokenPipeError`` traceback when the application ends: docs/performance.md,
    "What changed: the Spark job's 40 ms per micro-batch".)

    With ``ship_environment``, the archive goes to the executors and runs as their Python
    (:mod:`.shipping`)."""
    shipped = shipping_settings(config.streaming.ship_environment) if _shipping(config) else {}
    return {
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",  # its bar garbles the progress lines
        "spark.driver.extraJavaOptions": JVM_OPTIONS,
        "spark.executor.extraJavaOptions": JVM_OPTIONS,
        "spark.python.daemon.module": "mirror.spark.worker_daemon",
    } | shipped | config.streaming.spark_conf


def _shipping(config: MirrorConfig) -> bool:
    """Whether the archive goes to the executors: one is given and the master is a cluster's (a
    local master runs them in the driver's JVM, with the driver's Python). Under spark-submit,
    its ``--master`` is the master unless the configuration names one."""
    if config.streaming.ship_environment is None:
        return False
    master = _our_master(config)
    return master is None or not config.streaming.spark_conf.get("spark.master", master).startswith("local")


def _our_master(config: MirrorConfig) -> str | None:
    """The master kmirror sets: the configuration's, unless spark-submit started this process
    and the configuration names none (then spark-submit's ``--master`` is it: None)."""
    if under_spark_submit() and "master" not in config.streaming.model_fields_set:
        return None
    return config.streaming.master


LOCAL_TASK_ATTEMPTS = 4
"""Tries per task under a local master: Spark's ``spark.task.maxFailures`` default, which
local masters do not apply (they fail the job on a task's first failure)."""
_LOCAL = re.compile(r"local(?:\[(\*|\d+)\])?")


def with_task_retries(master: str) -> str:
    """``local[N]`` as ``local[N,4]`` (and ``local`` as ``local[1,4]``), so a failed copy task is
    run again before its micro-batch fails, as on a cluster; other masters are left alone."""
    match = _LOCAL.fullmatch(master)
    if match is None:
        return master
    return f"local[{match.group(1) or 1},{LOCAL_TASK_ATTEMPTS}]"


_LOCAL_WITH_RETRIES = re.compile(r"local\[(?:\*|\d+),(\d+)\]")


def task_attempts(config: MirrorConfig) -> int:
    """How many attempts Spark gives a task before its failures fail the job: the ``F`` of a
    local master ``local[N,F]`` (:func:`with_task_retries`), else ``spark.task.maxFailures``
    (Spark's default, 4, unless ``spark_conf`` sets it). A copy task that fails on an error a
    new attempt may fix gets as many from the driver
    (:meth:`~.runner.MicroBatchRunner._copy_through_failures`): tasks report kmirror's errors rather
    than raise them, so Spark's own retries are left to bugs."""
    streaming = config.streaming
    master = streaming.spark_conf.get("spark.master", with_task_retries(streaming.master))  # as spark_session sets it
    match = _LOCAL_WITH_RETRIES.fullmatch(master)
    if match is not None:
        return int(match.group(1))
    if _LOCAL.fullmatch(master):
        return 1  # spark_conf's own local master, without retries
    return int(config.streaming.spark_conf.get("spark.task.maxFailures", LOCAL_TASK_ATTEMPTS))
