"""The ``foreachBatch`` function: per micro-batch, the destination topics checked, one Spark
job copying the planned groups on executors (or leasing them to resident copiers,
:mod:`.copiers`), failed tasks run again where that may help, and one progress report.

A micro-batch that fails raises, so that Spark does not commit it to the checkpoint;
:meth:`MicroBatchRunner.outcome` tells :func:`~.job.run_mirror` how the micro-batches ended.
"""

from __future__ import annotations

import functools
import logging
import time
import uuid
from collections import Counter
from dataclasses import dataclass

from kcodecs import KMirrorError

from ..config import MirrorConfig
from ..engine import (CopyJob, OffsetSyncStore, client_for, offset_syncs_topic, open_transaction_wait_s,
                      sync_destination_topics)
from ..engine.ranges import TaskStats
from ..engine.failures import TaskFailure, cluster_role, failed_cluster
from ..engine.group_sync import GroupOffsetSync, GroupSyncReport
from ..engine.own_topics import mirrored
from ..engine.latency import LatencyHistogram
from ..kafka import TopicPartition
from ..metrics import MirrorMetrics
from ..progress import MicroBatchReport, RunTotals
from . import tasks as spark_tasks
from .copiers import CopierLeases, Renewer
from .outage import Outage, OutageInterrupted, Retries
from .pyspark_internals import planned_groups, spark_failure
from .rewinds import DestinationLosses
from .session import task_attempts
from .shipping import missing_on_executors
from .source import CopyGroup, groups_of_rows
from .stopping import Stopper

__all__ = ["MicroBatchRunner", "RunOutcome", "MirrorJobError", "job_failure", "first_line"]

log = logging.getLogger(__name__)


class MirrorJobError(KMirrorError):
    """A copy task failed on an executor, or the planner in its process; ``kind`` is the class
    name of the error it raised there (e.g. ``CorruptSourceError``), ``message`` its text."""

    def __init__(self, kind: str, message: str):
        super().__init__(f"{kind}: {message}")
        self.kind = kind
        self.message = message


def job_failure(exc: Exception) -> KMirrorError:
    """The job's error for a failure Spark reports: kmirror's own where its code raised one in a
    Python process of Spark's that has no other way to the driver (the source's planner; copy
    tasks report theirs as data, :mod:`.tasks`), the one line for executors without kmirror,
    else Spark's innermost cause (:func:`~.pyspark_internals.spark_failure`)."""
    failure = spark_failure(exc)
    return missing_on_executors(failure) or MirrorJobError(failure.kind, failure.message)



def _group_sync(config: MirrorConfig, routes) -> GroupOffsetSync:
    destination = client_for(config.clusters.destination, config.limits.retry)
    syncs = OffsetSyncStore(destination, offset_syncs_topic(config.job_name),
                            max_wait_s=open_transaction_wait_s(config.delivery.transaction_timeout_s))
    source = client_for(config.clusters.source, config.limits.retry)
    return GroupOffsetSync(config.sync.groups, source, destination, syncs,
                           interval_s=config.sync.group_offsets_interval_s,
                           mirrored=functools.partial(mirrored, config))


@dataclass(frozen=True)
class RunOutcome:
    """How the query's micro-batches ended, for :func:`run_mirror` once the query is over."""

    failure: KMirrorError | None = None
    """The error a micro-batch failed with (and the query with it)."""
    interrupted: bool = False
    """A stop came while an outage was being waited out: the micro-batch did not finish."""


class MicroBatchRunner:
    """The ``foreachBatch`` function: plan on the driver, copy on executors, report; run failed
    tasks again where that may help (:meth:`_copy_through_failures`). A micro-batch that fails
    raises, so that Spark does not commit it; :meth:`outcome` tells how the micro-batches ended."""

    def __init__(self, config: MirrorConfig, routes, on_report, stop: Stopper,
                 metrics: MirrorMetrics | None = None, losses: DestinationLosses | None = None):
        self.config = config
        self.losses = losses or DestinationLosses(config)
        """Destination topics lost under the job (:mod:`.rewinds`): their ranges are not copied."""
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
        self.group_sync = _group_sync(config, routes) if config.sync.groups else None
        self.reading_rows = False
        """The groups were not in a micro-batch's plan, so its rows were read (logged once)."""
        self.copiers = (CopierLeases(config, lambda: self.routes, self.job)
                        if config.streaming.copy_between_micro_batches and not config.streaming.once else None)
        """Tasks lease their ranges to resident copiers (:mod:`.copiers`), or copy themselves (None)."""

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
                        self.config.sync.group_offsets_interval_s, exc)
            return None
        if final:
            log.info("%s", report.line())
        return report

    def outcome(self) -> RunOutcome:
        return self._outcome

    def fail(self, error: KMirrorError) -> None:
        """End the run on ``error``, found outside a micro-batch (the executors' warm-up): the
        outcome says it, and the stop is requested, so that the query ends before its next one."""
        self._outcome = RunOutcome(failure=error)
        self.stop.request()

    def __call__(self, rows, batch_id: int) -> None:
        began = time.perf_counter()
        planned = planned_groups(rows)
        if planned is None and not self.reading_rows:
            self.reading_rows = True
            log.warning("the copy groups are not in this Spark's plan of the micro-batch; reading the source's "
                        "rows instead, which costs a Python worker per task (see pyspark_internals.planned_groups)")
        try:
            tasks = self._copy_through_failures(rows, planned)
        except OutageInterrupted:
            self._outcome = RunOutcome(interrupted=True)
            raise
        except KMirrorError as exc:
            self._outcome = RunOutcome(failure=exc)
            raise
        finally:
            # Ranges planned from now on know of the losses found so far (the planner's file).
            self.losses.pending.clear()
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
        own_calls = Retries(outage, self._sleep, lambda exc: self._outage_line(str(exc), failed_cluster(exc)))
        done: list[TaskStats] = []
        todo: frozenset[int] | None = None  # None: every task of the micro-batch
        while True:
            began = outage.clock()
            try:
                results = self._copy(rows, planned, todo)
            except KMirrorError as exc:  # the driver's own Kafka calls, or a task's bug
                self._count_error(exc.kind if isinstance(exc, MirrorJobError) else type(exc).__name__)
                if not own_calls.again(exc, began):
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
            self._look_again([f.topic for f in failures if f.verdict == "missing" and f.topic is not None
                              and self._role(f.cluster) != "source"])
            outages = [f for f in failures if f.outage]
            if outages:
                what = self._outage_line(outages[0].message, outages[0].cluster, waiting=len(failures))
                if not outage.pause(what, began, self._sleep):  # for longer than max_outage_s
                    raise MirrorJobError(outages[0].kind, outages[0].message)
            todo = frozenset(f.task for f in failures)

    def _lost(self, spark_context, losses) -> None:
        """Destination topics lost (:attr:`losses`), told before any is made again. Resident
        copiers go first where a source is copied again: one following a partition of the lost
        topic that has not met the loss yet (nothing to produce since) would go on from its old
        position into the topic made again, since Produce names topics by name. They commit what
        they copied and end; the next lease starts them with the new routes."""
        if self.losses(losses) and self.copiers is not None:
            log.info("stopping the resident copiers before the lost destination topics are made again; they start "
                     "again with this micro-batch")
            self.release_copiers(spark_context)

    def _look_again(self, topics: list[str]) -> None:
        """Copies met destination ``topics`` missing: their routes go, so that the next try looks
        them up (:func:`~mirror.engine.topics.sync_destination_topics`), and finds them lost
        (:mod:`mirror.engine.destination_loss`), or back (a leader that had not heard of a
        topic just made), rather than waiting for them as for a cluster that does not answer."""
        if topics:
            self.routes = {t: route for t, route in self.routes.items() if route.topic not in topics}

    def _copy(self, rows, planned: list[CopyGroup] | None, tasks: frozenset[int] | None) -> list[TaskStats]:
        """The destination topics checked, then one Spark job copying ``tasks`` (None: all).

        Checking costs a metadata request to the source, so it is skipped when the planned
        ranges are all of topics and partitions the routes already know: a topic or partition
        new at the source first appears with nothing to copy (:mod:`.source`), and is checked
        when its first range comes."""
        config = self.config
        if planned is not None:
            planned = _without(planned, self._not_copied())
        if planned is None or not _routed(planned, self.routes):
            source = client_for(config.clusters.source, config.limits.retry)
            destination = client_for(config.clusters.destination, config.limits.retry)
            self.routes = sync_destination_topics(config, source, destination, self.routes,
                                                  functools.partial(self._lost, rows.sparkSession.sparkContext))
            if planned is not None:
                planned = _without(planned, self._not_copied())
        job = self.job()
        try:
            if self.copiers is not None:
                groups = planned if planned is not None else _without(groups_of_rows(rows.collect()), self._not_copied())
                requests = [spark_tasks.request_of(r, job.routes) for group in groups for r in group.ranges]
                return self.copiers.lease(rows.sparkSession.sparkContext, job, requests, tasks)
            # One Spark task per group of ranges (see .grouping), numbered as the source planned it.
            if planned is None:
                skipped = self._not_copied()
                selected = rows.rdd.filter(lambda row: (tasks is None or row.task in tasks) and row.topic not in skipped)
                return selected.mapPartitions(functools.partial(spark_tasks.copy_rows, job)).collect()
            chosen = [spark_tasks.task_of(group, job.routes) for group in planned if tasks is None or group.index in tasks]
            if not chosen:
                return []
            spark_context = rows.sparkSession.sparkContext
            return spark_context.parallelize(chosen, len(chosen)).mapPartitions(
                functools.partial(spark_tasks.copy_tasks, job)).collect()
        except Exception as exc:  # a task that failed every attempt: not on a kmirror error, which tasks report
            log.debug("the copy failed in Spark: %s", exc)
            raise job_failure(exc) from None

    def _not_copied(self) -> frozenset[str]:
        """Source topics whose planned ranges are not copied: their destination topic was lost,
        and was the user's (:attr:`~.rewinds.DestinationLosses.failed`), or its ranges were
        planned before it was lost (:attr:`~.rewinds.DestinationLosses.pending`)."""
        return frozenset(self.losses.failed) | frozenset(self.losses.pending)

    def job(self) -> CopyJob:
        """What a copy task needs, as of this micro-batch's routes."""
        return CopyJob.from_config(self.config, self.routes, run_id=self.run_id,
                                   lease_s=self.config.streaming.lease_s if self.copiers is not None else 0.0)

    def start_copiers(self, spark_context) -> int:
        """Start every copier that follows a known partition before the first micro-batch needs
        it; how many were started (0 when tasks copy themselves, or no topic is selected yet)."""
        return 0 if self.copiers is None else self.copiers.start(spark_context)

    def start_renewing(self, spark_context) -> Renewer | None:
        """Renew the copiers' leases while no micro-batch does (an idle source plans none)."""
        if self.copiers is None:
            return None
        renewer = Renewer(self.config.streaming.lease_s, lambda: self.renew(spark_context))
        renewer.start()
        return renewer

    def renew(self, spark_context) -> None:
        """One renewal of every copier's lease, if due; what they copied meanwhile is added to the totals."""
        tasks = self.copiers.renew_if_due(spark_context)
        copied = [stats for task in tasks for stats in task.ranges if stats.end > stats.start]
        if copied:
            self.totals.add(MicroBatchReport(-1, 0.0, copied, sum(task.seconds for task in tasks), None,
                                             _merged_latency(tasks)))

    def release_copiers(self, spark_context) -> None:
        """At the end: every copier commits what it copied and exits; their last reports count."""
        if self.copiers is None:
            return
        reports = self.copiers.release(spark_context)
        copied = [stats for task in reports for stats in task.ranges if stats.end > stats.start]
        if copied:
            self.totals.add(MicroBatchReport(-1, 0.0, copied, 0.0, None, LatencyHistogram()))

    def _count_error(self, kind: str) -> None:
        if self.metrics is not None:
            self.metrics.error(kind)

    def _sleep(self, seconds: float) -> bool:
        """A wait through an outage: False when a stop came meanwhile."""
        return not self.stop.wait(seconds)

    def _outage_line(self, what: str, where: str | None, *, waiting: int = 0) -> str:
        """The outage line's subject: which cluster, what failed, how many copy tasks wait.
        ``where``: the bootstrap of the cluster, or the address of the broker, that failed."""
        role = self._role(where)
        tasks = f" ({waiting} copy task{'s' if waiting > 1 else ''} waiting)" if waiting else ""
        return f"outage: {role + ' ' if role else ''}{what}{tasks}"

    def _role(self, where: str | None) -> str:
        """Which cluster ``where`` is, as the driver's clients know them (:func:`cluster_role`)."""
        retry = self.config.limits.retry
        return cluster_role(where, client_for(self.config.clusters.source, retry),
                            client_for(self.config.clusters.destination, retry))


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
            if failure.verdict not in ("other", "missing"):
                self.failed.pop(failure.task, None)
                continue
            self.failed[failure.task] += 1
            if self.failed[failure.task] >= self.attempts:
                spent.append(failure)
            else:
                log.debug("copy task %d failed (try %d of %d), running it again: %s", failure.task,
                          self.failed[failure.task], self.attempts, failure.line())
        return spent


def _without(planned: list[CopyGroup], topics: frozenset[str]) -> list[CopyGroup]:
    """``planned`` less the ranges of ``topics`` (and the groups left empty)."""
    if not topics:
        return planned
    kept = [CopyGroup(group.index, tuple(r for r in group.ranges if r.topic not in topics)) for group in planned]
    return [group for group in kept if group.ranges]


def _routed(planned: list[CopyGroup], routes) -> bool:
    """Every planned range is of a topic with a route, and of a partition that route counts."""
    return all(r.topic in routes and r.partition < routes[r.topic].source_partitions
               for group in planned for r in group.ranges)


def _merged_latency(tasks: list[TaskStats]) -> LatencyHistogram:
    merged = LatencyHistogram()
    for task in tasks:
        merged.merge(task.latency)
    return merged


def first_line(text: str) -> str:
    return text.strip().splitlines()[0] if text.strip() else "(no message)"
