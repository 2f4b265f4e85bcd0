"""The Structured Streaming job: the ``kmirror-kafka`` source, ``foreachBatch`` copying on executors.

Per micro-batch the driver (1) makes sure every selected source topic has its destination
topic, (2) runs one Spark job in which each task copies one group of ranges, as the source
planned them, and returns only statistics, and (3) logs one progress line. The groups are
read from the micro-batch's plan (:mod:`.planned`), so the source's rows are never computed:
the copy job is ``parallelize(groups).mapPartitions(copy)``. Spark commits the
micro-batch's offsets to the checkpoint only after ``foreachBatch`` returns, so a crash
replays the unfinished micro-batch. Under exactly-once delivery (the default) each task
commits its records and offsets in one destination transaction, and a replayed task skips
what was committed (:mod:`mirror.engine.exactly_once`); under at-least-once a replay copies
the micro-batch again (see docs/architecture.md).
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import re
import signal
import shutil
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from kcodecs import KMirrorError

from ..config import REVEAL_SECRETS, ConfigError, MirrorConfig
from ..engine import (CopyJob, CopyRequest, OffsetSyncStore, client_for, fence_tasks, offset_syncs_topic,
                      offset_syncs_topic_spec, offsets_topic, offsets_topic_spec, open_transaction_wait_s,
                      sync_destination_topics, transactional_id)
from ..engine.group_sync import GroupOffsetSync, GroupSyncReport
from ..engine.copier import assignments
from ..engine.shape_sync import ShapeSync
from ..kafka import TopicPartition
from ..engine.copy import TaskStats
from ..engine.failures import TaskFailure
from ..engine.latency import LatencyHistogram
from ..metrics import MirrorMetrics
from ..progress import MicroBatchReport, RunTotals
from . import tasks as spark_tasks
from .outage import Outage, OutageInterrupted, is_outage
from .planned import planned_groups
from .source import CopyGroup, CopyRange, groups_of_rows
from .stopping import Stopper

__all__ = ["run_mirror", "spark_session", "spark_settings", "JVM_OPTIONS", "with_task_retries", "task_attempts",
           "MirrorJobError", "RunOutcome", "QUERY_NAME", "LOCAL_TASK_ATTEMPTS"]

log = logging.getLogger(__name__)

QUERY_NAME = "kmirror"
_OUR_ERROR = re.compile(r"^(?:mirror|kcodecs)\.[\w.]*?\.?(\w+): (.+)$", re.MULTILINE)


class MirrorJobError(KMirrorError):
    """A copy task failed on an executor, or the planner in its process; ``kind`` is the class
    name of the error it raised there (e.g. ``CorruptSourceError``), ``message`` its text."""

    def __init__(self, kind: str, message: str):
        super().__init__(f"{kind}: {message}")
        self.kind = kind
        self.message = message


def run_mirror(config: MirrorConfig, *, stop: threading.Event | None = None,
               on_report: Callable[[MicroBatchReport], None] | None = None) -> RunTotals:
    """Run the mirror until caught up (``config.once``) or until ``stop`` is set; return the totals.

    Clusters are contacted before Spark starts, so an unreachable one (a wrong address, most
    likely) fails in seconds with :class:`~mirror.kafka.ClusterUnreachableError`. Once the
    job runs, outages are waited out for up to ``max_outage_s`` (:mod:`.outage`).
    """
    source = client_for(config.source, config.retry)
    destination = client_for(config.destination, config.retry)
    routes = sync_destination_topics(config, source, destination)
    if not routes:
        # No topic selected yet (they may be created later): nothing above reached the
        # destination, so refused credentials or a wrong address there would only show once
        # Spark ran. One metadata request keeps the promise above.
        destination.topics()
    log.info("mirroring %d topics from %s to %s (%s, compression %s)%s", len(routes), ",".join(config.source.bootstrap),
             ",".join(config.destination.bootstrap), config.partitioning, config.compression,
             ": " + ", ".join(f"{t} -> {r.topic}" for t, r in sorted(routes.items())) if routes else "")
    ShapeSync(config, lambda: routes).sync(source, destination)
    metrics = _serve_metrics(config.metrics_port)
    spark = spark_session(config)
    if config.copy_tasks is None:
        # The reader plans in a Python process of its own, with no SparkContext to ask.
        config = config.model_copy(update={"copy_tasks": spark.sparkContext.defaultParallelism})
    from .source import CONFIG_FILE_OPTION, STOP_FILE_OPTION, KafkaRangeSource

    spark.dataSource.register(KafkaRangeSource)
    _prepare_destination(config, source, destination)
    # The reader plans on the driver's machine, so a local file can tell it to plan no more
    # (:mod:`.stopping`), and another (in mkdtemp's private directory) hands it the
    # configuration: data source options show in Spark's plans and logs, so no password goes there.
    work = Path(tempfile.mkdtemp(prefix="kmirror-"))
    stopper = Stopper(stop or threading.Event(), work / "stop")
    config_file = work / "config.json"
    config_file.write_text(config.model_dump_json(context=REVEAL_SECRETS))
    runner = _MicroBatchRunner(config, routes, on_report, stopper, metrics)
    warm_up = _warm_up_executors(spark, runner)
    writer = (spark.readStream.format(KafkaRangeSource.name()).option(CONFIG_FILE_OPTION, str(config_file))
              .option(STOP_FILE_OPTION, str(stopper.file)).load()
              .writeStream.queryName(QUERY_NAME).foreachBatch(runner)
              .option("checkpointLocation", str(config.checkpoint)))
    if config.once:
        writer = writer.trigger(availableNow=True)
    else:
        writer = writer.trigger(processingTime=f"{config.trigger_interval_s} seconds")
    query = writer.start()
    renewer = runner.start_renewing(spark.sparkContext)
    shape = ShapeSync(config, lambda: runner.routes)
    if not config.once:
        shape.start()
    try:
        stopper.watch(query)
    except Exception as exc:
        outcome = runner.outcome()
        if outcome.failure is not None:
            raise outcome.failure from None
        if stopper.requested:
            # Asked to stop, and Spark did not finish: it was waiting out an outage (then the
            # runner says so), or its JVM got the signal too and ended (systemd's default
            # KillMode signals every process of the service). Either way a restart goes on
            # from what the destination and the checkpoint hold.
            log.debug("the query ended while stopping: %s", exc)
            if not outcome.interrupted:
                log.info("stopped: Spark ended with the stop; a restart resumes from the checkpoint")
        else:
            log.debug("the query failed in Spark: %s", exc)
            raise _job_failure(exc) from None
    finally:
        shape.stop()
        if renewer is not None:
            renewer.stop()
        warm_up.join()  # a query that ended first must not leave a job running
        shutil.rmtree(work, ignore_errors=True)
        if metrics is not None:
            metrics.close()
    outcome = runner.outcome()
    if outcome.failure is not None:
        raise outcome.failure
    if outcome.interrupted:
        log.info("stopped while waiting out an outage: the unfinished micro-batch is copied on restart")
    runner.release_copiers(spark.sparkContext)
    runner.totals.groups = runner.sync_groups(final=True) or runner.totals.groups
    log.info("%s", runner.totals.summary())
    return runner.totals


def _serve_metrics(port: int | None) -> MirrorMetrics | None:
    """The Prometheus endpoint, up before Spark starts so a port in use fails the run at once."""
    if port is None:
        return None
    metrics = MirrorMetrics()
    try:
        metrics.serve(port)
    except OSError as exc:
        raise ConfigError(f"metrics_port {port}: cannot serve metrics: {exc.strerror or exc}") from exc
    log.info("Prometheus metrics on http://0.0.0.0:%d/metrics", port)
    return metrics


def _prepare_destination(config: MirrorConfig, source, destination) -> None:
    """The mirror's own topics on the destination: the offset syncs (where copied records
    landed, for group offset translation) and, under exactly-once, the offsets; then every
    task's transactional id taken over before the first micro-batch, so nothing a previous
    run left open (killed tasks) outlives its start. Tasks number up to ``copy_tasks``, or one
    per source leader where there are more."""
    job = config.job_name
    destination.create_topics([offset_syncs_topic_spec(job)])
    if config.delivery != "exactly-once":
        return
    destination.create_topics([offsets_topic_spec(job)])
    tasks = max(config.copy_tasks or 1, len(source.brokers()))
    fence_tasks(destination, job, tasks, timeout_ms=int(config.transaction_timeout_s * 1000))
    log.info("exactly-once: job %s, offsets in %s on the destination, transactional ids %s..%s", job,
             offsets_topic(job), transactional_id(job, 0), transactional_id(job, tasks - 1))


def _warm_up_executors(spark, runner: "_MicroBatchRunner") -> threading.Thread:
    """Start, in the background, the Python worker of each copy task, with the copy engine
    imported, and where copies run between micro-batches the resident copiers too. Spark reuses
    its Python workers (``spark.python.worker.reuse``), so the first micro-batch finds them
    started instead of paying seconds for it inside its copy; and as this runs while the query
    starts (the planner's process, the first offsets), the run gets shorter too
    (docs/performance.md, "The Spark job"). A copier's own start (its process, its imports, its
    producer's ``InitProducerId``), paid inside the first micro-batch, held a catch-up of 1 GB to
    0.68-0.85x of ``--once`` (docs/performance.md, "Catch-up throughput"). Returns the thread, to
    join before the session can go."""

    def warm() -> None:
        began = time.perf_counter()
        try:
            started = runner.start_copiers(spark.sparkContext)
            if not started:
                slots = runner.config.copy_tasks
                spark.sparkContext.parallelize(range(slots), slots).mapPartitions(_import_copy_engine).collect()
        except Exception as exc:  # only an optimisation: the copy reports what is broken
            log.warning("warming up the executors failed: %s", _first_line(str(exc)))
            return
        log.info("executors ready in %.1f s (%s)", time.perf_counter() - began,
                 f"{started} copiers started" if started else
                 f"{runner.config.copy_tasks} tasks' Python workers started, copy engine imported")

    thread = threading.Thread(target=warm, name="kmirror-warm-up", daemon=True)
    thread.start()
    return thread


def _import_copy_engine(_):
    import mirror.engine.copy  # noqa: F401  (the import is the point)

    return iter(())


def spark_session(config: MirrorConfig):
    """The session the mirror runs in (``getOrCreate``: an existing one is reused).

    The executors' Python must be the one kmirror is installed in. A local master gets task
    retries (:func:`with_task_retries`); the settings are :func:`spark_settings`. The JVM's own
    log, whose errors are stack traces of what the driver reports in one line, shows only with
    debug logging (``kmirror -v``).

    Stopping is the driver's to do (:mod:`mirror.run_cli`): Spark's JVM runs in a session of
    its own, so that a signal sent to the whole process group (a terminal's Ctrl-C, ``kill --
    -PGID``, ``timeout``) reaches the driver only; the JVM's shutdown hook would otherwise stop
    the SparkContext under the micro-batch the driver is finishing. The JVM still ends with
    the driver: it exits when its stdin, a pipe from the driver, closes. PySpark's SIGINT
    handler, which cancels the running jobs and raises KeyboardInterrupt mid-micro-batch, is
    replaced by the one the caller had installed."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark import SparkConf, SparkContext
    from pyspark.sql import SparkSession

    settings = {"spark.master": with_task_retries(config.master), "spark.app.name": "kmirror", **spark_settings(config)}
    if SparkContext._active_spark_context is None:
        from pyspark.java_gateway import launch_gateway

        conf = SparkConf(loadDefaults=False).setAll(settings.items())
        with _keeping_sigint(), _jvm_ignoring_sigterm():
            gateway = launch_gateway(conf, popen_kwargs={"start_new_session": True})
            context = SparkContext(conf=conf, gateway=gateway)
        # A JVM that ended on a signal of its own drops the accumulator server's connection;
        # socketserver would print that as a traceback. It is the end of the job, not an error.
        server = getattr(context, "_accumulatorServer", None)
        if server is not None:
            server.handle_error = lambda _request, address: log.debug("Spark's accumulator connection %s ended", address)
    builder = SparkSession.builder
    for key, value in settings.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN" if log.isEnabledFor(logging.DEBUG) else "FATAL")
    return spark


@contextlib.contextmanager
def _jvm_ignoring_sigterm():
    """Start Spark's JVM with SIGTERM ignored, as PySpark starts it with SIGINT ignored.

    systemd's default ``KillMode=control-group`` sends SIGTERM to every process of the
    service, the JVM included, whatever its session. The JVM's shutdown hook then stopped the
    SparkContext while the driver finished its micro-batch, and Spark printed the stream
    thread's ``RpcEnvStoppedException`` (a race: most stops were clean). HotSpot leaves a
    shutdown signal it inherits as ignored alone, so the JVM now ends the way it always ended
    otherwise: when the driver, done, closes its stdin. (systemd's SIGKILL after
    ``TimeoutStopSec`` still ends everything.) PySpark sets ``preexec_fn`` itself, so its
    ``Popen`` is wrapped for the launch."""
    from pyspark import java_gateway

    original = java_gateway.Popen

    def popen(*args, **kwargs):
        theirs = kwargs.get("preexec_fn")

        def preexec() -> None:
            if theirs is not None:
                theirs()
            signal.signal(signal.SIGTERM, signal.SIG_IGN)

        kwargs["preexec_fn"] = preexec
        return original(*args, **kwargs)

    java_gateway.Popen = popen
    try:
        yield
    finally:
        java_gateway.Popen = original


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
    "What changed: the Spark job's 40 ms per micro-batch".)"""
    return {
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",  # its bar garbles the progress lines
        "spark.driver.extraJavaOptions": JVM_OPTIONS,
        "spark.executor.extraJavaOptions": JVM_OPTIONS,
        "spark.python.daemon.module": "mirror.spark.worker_daemon",
    } | config.spark_conf


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
    (:meth:`_MicroBatchRunner._copy_through_failures`): tasks report kmirror's errors rather
    than raise them, so Spark's own retries are left to bugs."""
    master = config.spark_conf.get("spark.master", with_task_retries(config.master))  # as spark_session sets it
    match = _LOCAL_WITH_RETRIES.fullmatch(master)
    if match is not None:
        return int(match.group(1))
    if _LOCAL.fullmatch(master):
        return 1  # spark_conf's own local master, without retries
    return int(config.spark_conf.get("spark.task.maxFailures", LOCAL_TASK_ATTEMPTS))


def _group_sync(config: MirrorConfig, routes) -> GroupOffsetSync:
    destination = client_for(config.destination, config.retry)
    syncs = OffsetSyncStore(destination, offset_syncs_topic(config.job_name),
                            max_wait_s=open_transaction_wait_s(config.transaction_timeout_s))
    return GroupOffsetSync(config.groups, client_for(config.source, config.retry), destination, syncs,
                           interval_s=config.sync_group_offsets_interval_s, mirrored=config.selects)


@dataclass(frozen=True)
class RunOutcome:
    """How the query's micro-batches ended, for :func:`run_mirror` once the query is over."""

    failure: KMirrorError | None = None
    """The error a micro-batch failed with (and the query with it)."""
    interrupted: bool = False
    """A stop came while an outage was being waited out: the micro-batch did not finish."""


class _MicroBatchRunner:
    """The ``foreachBatch`` function: plan on the driver, copy on executors, report; run failed
    tasks again where that may help (:meth:`_copy_through_failures`). A micro-batch that fails
    raises, so that Spark does not commit it; :meth:`outcome` tells how the micro-batches ended."""

    def __init__(self, config: MirrorConfig, routes, on_report, stop: Stopper,
                 metrics: MirrorMetrics | None = None):
        self.config = config
        self.metrics = metrics
        self.routes = routes
        self.on_report = on_report
        self.stop = stop
        """Ends the waits through an outage: ``stop.wait(seconds)`` is True once a stop is requested."""
        self.totals = RunTotals()
        self._outcome = RunOutcome()
        self.attempts = task_attempts(config)
        """Tries of a copy task that fails on an error a new attempt may fix."""
        self.run_id = uuid.uuid4().hex
        self.copied_to: dict[TopicPartition, int] = {}
        """Per source partition, where this run's copy got to: group offsets past it are clamped."""
        self.group_sync = _group_sync(config, routes) if config.groups else None
        self.reading_rows = False
        """The groups were not in a micro-batch's plan, so its rows were read (logged once)."""
        self.leasing = config.copy_between_micro_batches and not config.once
        """Tasks lease their ranges to resident copiers (:mod:`mirror.engine.copier`)."""
        self.spark_jobs = threading.Lock()
        """Micro-batches and lease renewals take turns at the copiers."""
        self.last_lease = time.monotonic()

    def sync_groups(self, *, final: bool = False) -> GroupSyncReport | None:
        """A round of group offset translation if one is due (or ``final``). A failure is logged
        and the copy goes on, as MirrorMaker 2's checkpoints do not stop its data flow."""
        if self.group_sync is None or not (final or self.group_sync.due()):
            return None
        try:
            report = self.group_sync.run(self.copied_to)
        except KMirrorError as exc:
            self._count_error(type(exc).__name__)
            log.warning("group offset translation failed; the copy goes on and it is tried again in %.0f s: %s",
                        self.config.sync_group_offsets_interval_s, exc)
            return None
        if final:
            log.info("%s", report.line())
        return report

    def outcome(self) -> RunOutcome:
        return self._outcome

    def __call__(self, rows, batch_id: int) -> None:
        began = time.perf_counter()
        planned = planned_groups(rows)
        if planned is None and not self.reading_rows:
            self.reading_rows = True
            log.warning("the copy groups are not in this Spark's plan of the micro-batch; reading the source's "
                        "rows instead, which costs a Python worker per task (see mirror/spark/planned.py)")
        try:
            tasks = self._copy_through_failures(rows, planned)
        except OutageInterrupted:
            self._outcome = RunOutcome(interrupted=True)
            raise
        except KMirrorError as exc:
            self._outcome = RunOutcome(failure=exc)
            raise
        ranges = [stats for task in tasks for stats in task.ranges]
        for stats in ranges:
            self.copied_to[stats.tp] = max(stats.end, self.copied_to.get(stats.tp, 0))
        groups = self.sync_groups()
        report = MicroBatchReport(batch_id, time.perf_counter() - began, ranges, sum(task.seconds for task in tasks),
                                  groups, _merged_latency(tasks))
        if ranges:
            log.info("%s", report.line())
        self.totals.add(report)
        if self.metrics is not None:
            self.metrics.observe(report)
        if self.on_report is not None:
            self.on_report(report)

    def _copy_through_failures(self, rows, planned: list[CopyGroup] | None) -> list[TaskStats]:
        """Every task's stats. A task that failed on an outage runs again after a wait, until it
        succeeds or the outage outlasts ``max_outage_s``; one that failed on an error a new
        attempt may fix runs again at once, up to :func:`task_attempts` tries, as Spark would have
        run it; a permanent failure fails the micro-batch at once (:mod:`mirror.engine.failures`).
        ``planned``: the micro-batch's groups, or None to read them from ``rows``."""
        outage = Outage(self.config.outage_limit_s)
        tries = _FailedTries(self.attempts)
        done: list[TaskStats] = []
        todo: frozenset[int] | None = None  # None: every task of the micro-batch
        while True:
            began = outage.clock()
            try:
                results = self._copy(rows, planned, todo)
            except KMirrorError as exc:  # the driver's own Kafka calls, or a task's bug
                self._count_error(exc.kind if isinstance(exc, MirrorJobError) else type(exc).__name__)
                what = self._outage_line(str(exc), getattr(exc, "bootstrap", None))
                if not is_outage(exc) or not outage.pause(what, began, self._sleep):
                    raise
                continue
            done.extend(task for task in results if task.failure is None)
            failures = [task.failure for task in results if task.failure is not None]
            if not failures:
                outage.ended()
                return done
            for failure in failures:
                self._count_error(failure.kind)
            fatal = [f for f in failures if f.permanent] + tries.used_up(failures)
            if fatal:
                raise MirrorJobError(fatal[0].kind, fatal[0].message)
            outages = [f for f in failures if f.outage]
            if outages:
                what = self._outage_line(outages[0].message, outages[0].cluster, waiting=len(failures))
                if not outage.pause(what, began, self._sleep):  # for longer than max_outage_s
                    raise MirrorJobError(outages[0].kind, outages[0].message)
            todo = frozenset(f.task for f in failures)

    def _copy(self, rows, planned: list[CopyGroup] | None, tasks: frozenset[int] | None) -> list[TaskStats]:
        """The destination topics checked, then one Spark job copying ``tasks`` (None: all).

        Checking costs a metadata request to the source, so it is skipped when the planned
        ranges are all of topics and partitions the routes already know: a topic or partition
        new at the source first appears with nothing to copy (:mod:`.source`), and is checked
        when its first range comes."""
        config = self.config
        if planned is None or not _routed(planned, self.routes):
            source = client_for(config.source, config.retry)
            destination = client_for(config.destination, config.retry)
            self.routes = sync_destination_topics(config, source, destination, self.routes)
        job = self.job()
        try:
            if self.leasing:
                groups = planned if planned is not None else groups_of_rows(rows.collect())
                ranges = [r for group in groups for r in group.ranges]
                chosen = [lease for lease in self._leases(ranges) if tasks is None or lease[0] in tasks]
                return self._run_leases(rows.sparkSession.sparkContext, job, chosen)
            # One Spark task per group of ranges (see .grouping), numbered as the source planned it.
            if planned is None:
                selected = rows.rdd if tasks is None else rows.rdd.filter(lambda row: row.task in tasks)
                return selected.mapPartitions(functools.partial(spark_tasks.copy_rows, job)).collect()
            chosen = [spark_tasks.task_of(group) for group in planned if tasks is None or group.index in tasks]
            if not chosen:
                return []
            spark_context = rows.sparkSession.sparkContext
            return spark_context.parallelize(chosen, len(chosen)).mapPartitions(
                functools.partial(spark_tasks.copy_tasks, job)).collect()
        except Exception as exc:  # a task that failed every attempt: not on a kmirror error, which tasks report
            log.debug("the copy failed in Spark: %s", exc)
            raise MirrorJobError(type(exc).__name__, _first_line(str(exc))) from None

    def job(self) -> CopyJob:
        """What a copy task needs, as of this micro-batch's routes."""
        return CopyJob.from_config(self.config, self.routes, run_id=self.run_id,
                                   lease_s=self.config.lease_s if self.leasing else 0.0)

    def _leases(self, ranges: list[CopyRange]) -> list[tuple[int, list[CopyRequest]]]:
        """The micro-batch's ranges by copier, and every copier that follows a known partition
        (with no range, its task renews the lease and collects what it copied)."""
        partitions = {topic: route.source_partitions for topic, route in self.routes.items()}
        return [(a.index, a.requests) for a in assignments(partitions, map(spark_tasks.request_of, ranges),
                                                           self.config.copy_tasks or 1)]

    def _run_leases(self, spark_context, job: CopyJob, chosen) -> list[TaskStats]:
        if not chosen:
            return []
        with self.spark_jobs:
            self.last_lease = time.monotonic()
            return spark_context.parallelize(chosen, len(chosen)).mapPartitions(
                functools.partial(spark_tasks.copy_tasks, job)).collect()

    def _lease_known(self, spark_context) -> list[TaskStats]:
        """A lease with no range to every copier that follows a known partition: starts the ones
        not running, renews the others; what they copied since their last report."""
        return self._run_leases(spark_context, self.job(), self._leases([]))

    def start_copiers(self, spark_context) -> int:
        """Give every copier that follows a known partition its first lease, with no range, so
        that it starts before the first micro-batch needs it; how many were started (0 when
        tasks copy themselves, or no topic is selected yet)."""
        if not self.leasing:
            return 0
        return len(self._lease_known(spark_context))

    def start_renewing(self, spark_context) -> "_Renewer | None":
        """Renew the copiers' leases while no micro-batch does (an idle source plans none)."""
        if not self.leasing:
            return None
        renewer = _Renewer(self, spark_context)
        renewer.start()
        return renewer

    def renew(self, spark_context) -> None:
        """One renewal of every copier's lease, if none was renewed for a third of it; what they
        copied meanwhile is added to the totals."""
        if time.monotonic() - self.last_lease < self.config.lease_s / 3:
            return
        tasks = self._lease_known(spark_context)
        copied = [stats for task in tasks for stats in task.ranges if stats.end > stats.start]
        if copied:
            self.totals.add(MicroBatchReport(-1, 0.0, copied, sum(task.seconds for task in tasks), None,
                                             _merged_latency(tasks)))

    def release_copiers(self, spark_context) -> None:
        """At the end: every copier commits what it copied and exits; their last reports count."""
        if not self.leasing:
            return
        job = self.job()
        indices = [index for index, _ in self._leases([])]
        try:
            with self.spark_jobs:
                reports = spark_context.parallelize(indices, max(1, len(indices))).mapPartitions(
                    functools.partial(spark_tasks.release_tasks, job)).collect()
        except Exception as exc:  # Spark ended with the stop: the copiers end with their executors
            log.debug("releasing the copiers failed: %s", exc)
            return
        copied = [stats for task in reports for stats in task.ranges if stats.end > stats.start]
        if copied:
            self.totals.add(MicroBatchReport(-1, 0.0, copied, 0.0, None, LatencyHistogram()))

    def _count_error(self, kind: str) -> None:
        if self.metrics is not None:
            self.metrics.error(kind)

    def _sleep(self, seconds: float) -> bool:
        """A wait through an outage: False when a stop came meanwhile."""
        return not self.stop.wait(seconds)

    def _outage_line(self, what: str, cluster: str | None, *, waiting: int = 0) -> str:
        """The outage line's subject: which cluster, what failed, how many copy tasks wait."""
        role = {",".join(self.config.source.bootstrap): "source", ",".join(self.config.destination.bootstrap):
                "destination"}.get(cluster or "", "")
        tasks = f" ({waiting} copy task{'s' if waiting > 1 else ''} waiting)" if waiting else ""
        return f"outage: {role + ' ' if role else ''}{what}{tasks}"


class _FailedTries:
    """Spark's task retries, counted by the driver: how many times in a row each copy task of a
    micro-batch failed on an error a new attempt may fix. An outage in between starts its count
    again, as the Spark job that ran it after the wait gave it all its attempts again."""

    def __init__(self, attempts: int):
        self.attempts = attempts
        self.failed: Counter[int] = Counter()

    def used_up(self, failures: list[TaskFailure]) -> list[TaskFailure]:
        """Count ``failures``; those of tasks that have now failed ``attempts`` times."""
        spent = []
        for failure in failures:
            if failure.verdict != "other":
                self.failed.pop(failure.task, None)
                continue
            self.failed[failure.task] += 1
            if self.failed[failure.task] >= self.attempts:
                spent.append(failure)
            else:
                log.debug("copy task %d failed (try %d of %d), running it again: %s", failure.task,
                          self.failed[failure.task], self.attempts, failure.line())
        return spent


class _Renewer(threading.Thread):
    """Renews idle copiers' leases every third of ``lease_s`` (see :meth:`_MicroBatchRunner.renew`)."""

    def __init__(self, runner: _MicroBatchRunner, spark_context):
        super().__init__(name="kmirror-lease-renewer", daemon=True)
        self.runner, self.spark_context = runner, spark_context
        self._stopped = threading.Event()

    def run(self) -> None:
        while not self._stopped.wait(self.runner.config.lease_s / 3):
            try:
                self.runner.renew(self.spark_context)
            except Exception as exc:  # the next micro-batch leases again; a lapsed copier restarts
                log.debug("renewing the copiers' leases failed: %s", exc)

    def stop(self) -> None:
        self._stopped.set()
        self.join(60)


def _routed(planned: list[CopyGroup], routes) -> bool:
    """Every planned range is of a topic with a route, and of a partition that route counts."""
    return all(r.topic in routes and r.partition < routes[r.topic].source_partitions
               for group in planned for r in group.ranges)


def _merged_latency(tasks: list[TaskStats]) -> LatencyHistogram:
    merged = LatencyHistogram()
    for task in tasks:
        merged.merge(task.latency)
    return merged


def _job_failure(exc: Exception) -> MirrorJobError:
    """The error kmirror code raised in a Python process of Spark's that has no other way to
    the driver (the source's planner), recovered from the Python traceback Spark wraps it in.
    (Copy tasks report theirs as data, :mod:`.tasks`.)"""
    found = _OUR_ERROR.findall(str(exc))
    if found:
        kind, message = found[-1]
        return MirrorJobError(kind, message)
    return MirrorJobError(type(exc).__name__, _first_line(str(exc)))


def _first_line(text: str) -> str:
    return text.strip().splitlines()[0] if text.strip() else "(no message)"
