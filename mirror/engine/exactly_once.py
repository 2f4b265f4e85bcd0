"""Exactly-once copying: one destination transaction per task and micro-batch.

A task's copy (:func:`~mirror.engine.copy.copy_ranges`, unchanged) runs inside a transaction
of its transactional id, ``<job>-<task index>``; at the end, the source offsets it reached go
to the offsets topic (:mod:`.offsets_topic`) in the same transaction, and the transaction
commits. So the destination holds a micro-batch's records if and only if it holds its offsets:

- **Replays skip what was committed.** Before copying, the task reads the committed offsets of
  its partitions and starts each range where the destination says the copy got to. A
  micro-batch that Spark replays after a crash (its offsets were not yet in the checkpoint)
  therefore copies only what no earlier attempt committed.
- **Zombies are fenced.** A task attempt gets its producer id from ``InitProducerId`` with the
  task's transactional id, which bumps the epoch: an earlier attempt still running (a lost
  executor, a retried task) can no longer produce or commit, and its open transaction is
  aborted. The driver does the same for every task id when the job starts
  (:func:`fence_tasks`), so nothing a killed run left open survives into the new one.
- **What a reader sees.** read_committed consumers of the destination see each record once.
  read_uncommitted ones may also see the records of aborted attempts, as with any Kafka
  transaction.
"""

from __future__ import annotations

import logging
import time
from dataclasses import replace
from typing import Sequence

from ..kafka import KafkaClient, TopicPartition
from ..kafka.transactions import TransactionManager
from ..routing import Partitioning
from .commit import Committer
from .copy import copy_ranges
from .ranges import CopyRequest, RangeStats, TaskStats

__all__ = ["copy_exactly_once", "transactional_id", "resume_requests", "fence_tasks"]

log = logging.getLogger(__name__)


def transactional_id(job: str, task: int) -> str:
    """Stable per job and task index, so a task's next attempt fences the previous one."""
    return f"{job}-{task}"


def resume_requests(requests: Sequence[CopyRequest], committed: dict) -> tuple[list[CopyRequest], list[CopyRequest]]:
    """Split ``requests`` into what is left to copy (each starting at its committed offset when
    that is later) and what an earlier attempt committed in full."""
    todo, done = [], []
    for request in requests:
        at = committed.get(request.tp, request.start)
        if at >= request.end:
            done.append(request)
        elif at > request.start:
            todo.append(replace(request, start=at))
        else:
            todo.append(request)
    return todo, done


def copy_exactly_once(requests: Sequence[CopyRequest], routes, source: KafkaClient, committer: Committer,
                      **copy_options) -> TaskStats:
    """Copy ``requests`` in one destination transaction together with their end offsets and
    with where their records landed (:class:`~.commit.Committer`)."""
    began = time.perf_counter()
    committed = committer.begin(requests)
    todo, done = resume_requests(requests, committed)
    starts = {request.tp: request.start for request in requests}
    resumed = sum(1 for request in todo if request.start != starts[request.tp])
    if done or resumed:
        log.info("replayed micro-batch: the destination already holds %d of its %d ranges in full and %d in part; "
                 "copying only the rest", len(done), len(requests), resumed)
    # Where the destination already holds more (a resident copier copied ahead of the plan,
    # :mod:`.copier`), its offsets stand: writing the micro-batch's lower end would take the
    # copy back, and the next attempt would copy those records again.
    ends = {request.tp: max(request.end, committed.get(request.tp, request.end)) for request in requests}
    producer = committer.producer
    try:
        producer.add_partitions([committer.offsets.partition, *_preserved_partitions(todo, routes)])
        stats = copy_ranges(todo, routes, source, producer, **copy_options) if todo else TaskStats([])
        ends.update({r.tp: r.end for r in stats.ranges if r.gone})  # copied only so far: its topic went
        committer.commit(ends, stats.syncs)
        stats.invisible.visible(time.time(), stats.latency)
    except BaseException as exc:
        committer.abort(exc)
        raise
    stats.ranges.extend(RangeStats(r.tp, r.start, r.end, already_committed=True) for r in done)
    stats.seconds = time.perf_counter() - began
    return stats


def fence_tasks(client: KafkaClient, job: str, tasks: int, *, timeout_ms: int) -> None:
    """Take over every task's transactional id (driver side, at start): whatever a previous run
    of the job left open is aborted and its producers, if any still run, are fenced."""
    for task in range(tasks):
        TransactionManager(client, transactional_id(job, task), timeout_ms=timeout_ms).init_producer()
    log.info("fenced the transactional ids %s to %s", transactional_id(job, 0), transactional_id(job, tasks - 1))


def _preserved_partitions(requests: Sequence[CopyRequest], routes) -> list[TopicPartition]:
    """Destination partitions known before copying: a ``preserve`` route writes the source
    partition's own number, so they can be registered in the transaction in one request."""
    return [TopicPartition(routes[r.tp.topic].topic, r.tp.partition) for r in requests
            if routes[r.tp.topic].policy.partitioning is Partitioning.PRESERVE]
