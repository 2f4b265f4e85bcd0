"""The Structured Streaming job: the ``kmirror-kafka`` source, ``foreachBatch`` copying on executors.

Per micro-batch the driver (1) makes sure every selected source topic has its destination
topic, (2) runs one Spark job in which each task copies one group of ranges, as the source
planned them, and returns only statistics, and (3) logs one progress line. The groups are
read from the micro-batch's plan (:func:`.pyspark_internals.planned_groups`), so the source's rows are never computed:
the copy job is ``parallelize(groups).mapPartitions(copy)``. Spark commits the
micro-batch's offsets to the checkpoint only after ``foreachBatch`` returns, so a crash
replays the unfinished micro-batch. Under exactly-once delivery (the default) each task
commits its records and offsets in one destination transaction, and a replayed task skips
what was committed (:mod:`mirror.engine.exactly_once`); under at-least-once a replay copies
the micro-batch again (see docs/architecture.md).
"""

from __future__ import annotations

import logging
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Callable, Literal, Mapping

from ..config import REVEAL_SECRETS, ConfigError, MirrorConfig
from ..engine import client_for, fence_tasks, offsets_topic, sync_destination_topics, transactional_id
from ..engine.clients import asking_twice
from ..engine.destination_loss import LostTopicsError
from ..engine.failback import resumed_starts
from ..engine.flow import FlowLog, check_step
from ..engine.own_topics import create_own_topics
from ..engine.presence import PresenceBeacon
from ..engine.shape_sync import ShapeSync
from ..engine.takeover import check_stopped, take_over
from ..listing import some_of
from ..kafka import TopicPartition
from ..kafka.types import listed_ids
from ..metrics import MirrorMetrics
from ..progress import MicroBatchReport, RunTotals
from .offsets import Bounds
from .once import check_copied, ends_at_start
from .pyspark_internals import checkpoint_started, python_of, spark_failure
from .runner import MicroBatchRunner, MirrorJobError, RunOutcome, first_line, job_failure
from .restarts import QueryRestarts
from .rewinds import DestinationLosses
from .session import spark_session
from .shipping import missing_on_executors
from .stopping import Stopper

__all__ = ["run_mirror", "MirrorJobError", "RunOutcome", "QUERY_NAME"]

log = logging.getLogger(__name__)

QUERY_NAME = "kmirror"


def run_mirror(config: MirrorConfig, *, stop: threading.Event | None = None,
               on_report: Callable[[MicroBatchReport], None] | None = None,
               starts: Mapping[TopicPartition, int] | None = None,
               skips: Mapping[TopicPartition, tuple[tuple[int, int], ...]] | None = None,
               step: Literal["run", "reconcile"] = "run") -> RunTotals:
    """Run the mirror until caught up (``config.streaming.once``) or until ``stop`` is set; return the totals.

    ``starts``: where partitions start, and below which nothing of them is copied, checkpoint
    or not; ``skips``: spans of source partitions never copied (a failback's promotion points,
    and the spans a reconcile copied: :mod:`mirror.engine.failback`; :class:`.offsets.Bounds`).
    ``step``: ``reconcile`` is the job's copy of its source's unreplicated tail during a
    failback (``failback --reconcile``), the one run a failed-over flow allows.

    Clusters are contacted before Spark starts, so an unreachable one (a wrong address, most
    likely) fails in seconds with :class:`~mirror.kafka.ClusterUnreachableError`. Once the
    job runs, outages are waited out for up to ``max_outage_s`` (:mod:`.outage`).
    """
    source = client_for(config.clusters.source, config.limits.retry)
    destination = client_for(config.clusters.destination, config.limits.retry)
    # Before anything is written: a flow failed over to the destination, or a running
    # MirrorMaker 2 to take over from, is refused untouched.
    state = FlowLog(destination, config.job_name).state()
    check_step(state, step, config.job_name)
    # After a failback: from A's promotion points (of the topics that were not made again since).
    starts = {**resumed_starts(state, listed_ids(source.listings())), **(starts or {})}
    taking_over = _taking_over(config)
    if taking_over:
        check_stopped(destination, config.mm2_connect_group, config.mm2_offsets_topic)
    create_own_topics(config, destination)
    presence = _presence(config)
    presence.say()
    presence.start()
    clean = False
    try:
        totals = _run(config, source, destination, taking_over, stop, on_report, presence,
                      Bounds(starts, dict(skips or {})))
        clean = True
        return totals
    finally:
        presence.stop(clean=clean)


def _presence(config: MirrorConfig) -> PresenceBeacon:
    """The job's presence on the destination (:mod:`~mirror.engine.presence`), written with a
    client of its own that tries each write twice: a destination that does not answer must
    not hold up the job's stop for its retries."""
    client = asking_twice(config.clusters.destination, config.limits.retry)
    copiers = config.streaming.copy_between_micro_batches and not config.streaming.once
    return PresenceBeacon(client, config.job_name, lease_s=config.streaming.lease_s if copiers else 0.0)


def _run(config: MirrorConfig, source, destination, taking_over: bool, stop: threading.Event | None,
         on_report: Callable[[MicroBatchReport], None] | None, presence: PresenceBeacon,
         bounds: Bounds) -> RunTotals:
    """The job, once it was found allowed to run and says it runs (:mod:`~mirror.engine.presence`)."""
    losses = DestinationLosses(config)
    routes = sync_destination_topics(config, source, destination, on_lost=losses)
    clusters = config.clusters
    log.info("mirroring %d topics from %s to %s (%s, compression %s)%s", len(routes),
             ",".join(clusters.source.bootstrap), ",".join(clusters.destination.bootstrap),
             config.routing.partitioning, config.routing.compression,
             ": " + some_of(f"{t} -> {r.topic}" for t, r in sorted(routes.items())) if routes else "")
    ShapeSync(config, lambda: routes).sync(source, destination)
    metrics = _serve_metrics(config.streaming.metrics_port)
    losses.metrics = metrics  # losses found from now on are counted (those above were said in the log)
    spark = spark_session(config)
    if config.streaming.copy_tasks is None:
        # The reader plans in a Python process of its own, with no SparkContext to ask.
        config = config.replaced("streaming", copy_tasks=spark.sparkContext.defaultParallelism)
    from .source import CONFIG_FILE_OPTION, REWINDS_FILE_OPTION, STARTS_FILE_OPTION, STOP_FILE_OPTION, KafkaRangeSource

    with python_of(spark.sparkContext, sys.executable):  # the planner runs here (.shipping)
        spark.dataSource.register(KafkaRangeSource)
    presence.transactional_ids = _prepare_destination(config, source, destination)
    if taking_over:
        bounds.starts.update(take_over(config, source, destination, {t: r.topic for t, r in routes.items()}))
    # The reader plans on the driver's machine, so a local file can tell it to plan no more
    # (:mod:`.stopping`), and another (in mkdtemp's private directory) hands it the
    # configuration: data source options show in Spark's plans and logs, so no password goes there.
    work = Path(tempfile.mkdtemp(prefix="kmirror-"))
    stopper = Stopper(stop or threading.Event(), work / "stop")
    config_file = work / "config.json"
    config_file.write_text(config.model_dump_json(context=REVEAL_SECRETS))
    starts_file = work / "starts.json"
    starts_file.write_text(bounds.encode())
    runner = MicroBatchRunner(config, routes, on_report, stopper, metrics, losses)
    warm_up = _warm_up_executors(spark, runner)
    ends = ends_at_start(source, routes) if config.streaming.once else None
    writer = (spark.readStream.format(KafkaRangeSource.name()).option(CONFIG_FILE_OPTION, str(config_file))
              .option(STARTS_FILE_OPTION, str(starts_file))
              .option(STOP_FILE_OPTION, str(stopper.file)).option(REWINDS_FILE_OPTION, str(losses.path)).load()
              .writeStream.queryName(QUERY_NAME).foreachBatch(runner)
              .option("checkpointLocation", str(config.streaming.checkpoint)))
    if config.streaming.once:
        writer = writer.trigger(availableNow=True)
    else:
        writer = writer.trigger(processingTime=f"{config.streaming.trigger_s} seconds")
    query = writer.start()
    renewer = runner.start_renewing(spark.sparkContext)
    shape = ShapeSync(config, lambda: runner.routes)
    if not config.streaming.once:
        shape.start()
    restarts = QueryRestarts()
    try:
        while True:
            try:
                stopper.watch(query)
                break
            except Exception as exc:
                outcome = runner.outcome()
                if outcome.failure is not None:
                    raise outcome.failure from None
                if stopper.requested:
                    # Asked to stop, and Spark did not finish: it was waiting out an outage (then
                    # the runner says so), or its JVM got the signal too and ended (systemd's
                    # default KillMode signals every process of the service). Either way a restart
                    # goes on from what the destination and the checkpoint hold.
                    log.debug("the query ended while stopping: %s", exc)
                    if not outcome.interrupted:
                        log.info("stopped: Spark ended with the stop; a restart resumes from the checkpoint")
                    break
                failure = spark_failure(exc)
                kind = failure.transient
                if kind is None or not restarts.allow():
                    log.debug("the query failed in Spark: %s", exc)
                    raise job_failure(exc) from None
                log.warning("Spark's query failed (%s: %s: %s); starting it again from the checkpoint (restart %d, "
                            "at most %d in %d minutes)", kind, failure.kind, failure.message, restarts.count,
                            restarts.limit, int(restarts.window_s // 60))
                if metrics is not None:
                    metrics.error(kind)
                query = writer.start()
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
    elif ends is not None and not stopper.requested:
        check_copied(ends, config.streaming.checkpoint)
    runner.release_copiers(spark.sparkContext)
    runner.totals.groups = runner.sync_groups(final=True) or runner.totals.groups
    log.info("%s", runner.totals.summary())
    if losses.failed:  # nothing partial is a success: the topics asked for and not copied fail the run
        raise LostTopicsError(list(losses.failed.values()))
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


def _taking_over(config: MirrorConfig) -> bool:
    """Whether this start takes over from MirrorMaker 2 (:mod:`mirror.engine.takeover`): asked
    to, with no checkpoint of its own. A checkpoint Spark keeps elsewhere than a local directory
    cannot be seen from here: MM2 is then checked and its offsets read on every start, and
    Spark uses them only if it has no checkpoint."""
    if not config.takeover.mirrormaker2:
        return False
    if checkpoint_started(config.streaming.checkpoint):
        log.info("this job has a checkpoint (%s): it goes on from there, not from MirrorMaker 2's offsets",
                 config.streaming.checkpoint)
        return False
    return True


def _prepare_destination(config: MirrorConfig, source, destination) -> int:
    """Under exactly-once, every task's transactional id taken over before the first
    micro-batch, so nothing a previous run left open (killed tasks) outlives its start. Tasks
    number up to ``copy_tasks``, or one per source leader where there are more. (The job's own
    topics were made first of all: :func:`~mirror.engine.own_topics.create_own_topics`.)
    Returns how many transactional ids the job uses (0 at-least-once)."""
    job = config.job_name
    if config.delivery.mode != "exactly-once":
        return 0
    tasks = max(config.streaming.copy_tasks or 1, len(source.brokers()))
    fence_tasks(destination, job, tasks, timeout_ms=int(config.delivery.transaction_timeout_s * 1000))
    log.info("exactly-once: job %s, offsets in %s on the destination, transactional ids %s..%s", job,
             offsets_topic(job), transactional_id(job, 0), transactional_id(job, tasks - 1))
    return tasks


def _warm_up_executors(spark, runner: MicroBatchRunner) -> threading.Thread:
    """Start, in the background, the Python worker of each copy task, with the copy engine
    imported, and where copies run between micro-batches the resident copiers too. Spark reuses
    its Python workers (``spark.python.worker.reuse``), so the first micro-batch finds them
    started instead of paying seconds for it inside its copy; and as this runs while the query
    starts (the planner's process, the first offsets), the run gets shorter too
    (docs/performance.md, "The Spark job"). A copier's own start (its process, its imports, its
    producer's ``InitProducerId``), paid inside the first micro-batch, held a catch-up of 1 GB to
    0.68-0.85x of ``--once`` (docs/performance.md, "Catch-up throughput"). Returns the thread, to
    join before the session can go.

    It is also the first thing to run on the executors: executors whose Python has no kmirror
    fail it, and the run ends there, with one line (:func:`~.shipping.missing_on_executors`),
    even when there is nothing to copy yet."""

    def warm() -> None:
        began = time.perf_counter()
        try:
            started = runner.start_copiers(spark.sparkContext)
            if runner.metrics is not None:
                runner.metrics.copiers(started)
            if not started:
                slots = runner.config.streaming.copy_tasks
                spark.sparkContext.parallelize(range(slots), slots).mapPartitions(_import_copy_engine).collect()
        except Exception as exc:  # otherwise only an optimisation: the copy reports what is broken
            missing = missing_on_executors(spark_failure(exc))
            if missing is not None:
                runner.fail(missing)
                return
            log.warning("warming up the executors failed: %s", first_line(str(exc)))
            return
        log.info("executors ready in %.1f s (%s)", time.perf_counter() - began,
                 f"{started} copiers started" if started else
                 f"{runner.config.streaming.copy_tasks} tasks' Python workers started, copy engine imported")

    thread = threading.Thread(target=warm, name="kmirror-warm-up", daemon=True)
    thread.start()
    return thread


def _import_copy_engine(_):
    import mirror.engine.copy  # noqa: F401  (the import is the point)

    return iter(())
