"""The copy's Spark tasks: what the driver hands each one, and the ``mapPartitions`` bodies
they run on executors.

This is the Spark side of the boundary with the copy engine (:class:`~mirror.engine.CopyJob`).
A task's input is its planned group as the engine's requests, ``(task, [CopyRequest])``
(:func:`task_of`), or, when the plan held no groups (:func:`.pyspark_internals.planned_groups`), the source's rows, which
:func:`copy_rows` decodes (:func:`~.source.groups_of_rows`). A body sets up the Python
worker's logging, runs the engine, and returns one :class:`~mirror.engine.TaskStats` per task,
a kmirror error as its :attr:`~mirror.engine.TaskStats.failure`
(:class:`~mirror.engine.failures.TaskFailure`, made by :func:`~mirror.engine.task.copy_task`):
the driver alone decides what runs again (:mod:`.job`), as Kafka Connect decides for a
``MirrorSourceTask``. Only an error that is not kmirror's (a bug) fails the Spark task.

Spark pickles the function into every task, so the driver passes
``functools.partial(copy_tasks, job)``: a reference to this module's function, imported on the
executor, and the small :class:`~mirror.engine.CopyJob`.
"""

from __future__ import annotations

import logging
from typing import Iterable, Iterator, Mapping, Sequence

from ..engine import CopyJob, CopyRequest, TaskStats
from ..engine.task import copy_task, release_task
from ..engine.topics import TopicRoute
from ..logs import configure_spark_process
from .source import CopyGroup, CopyRange, groups_of_rows

__all__ = ["copy_tasks", "copy_rows", "release_tasks", "task_of", "request_of"]


def copy_tasks(job: CopyJob, tasks: Iterable[tuple[int, Sequence[CopyRequest]]]) -> Iterator[TaskStats]:
    """``mapPartitions`` body: each ``(task, requests)`` copied, one :class:`TaskStats` each."""
    configure_spark_process(logging.WARNING)  # an executor's Python worker
    for task, requests in tasks:
        yield copy_task(job, task, requests)


def copy_rows(job: CopyJob, rows: Iterable[tuple]) -> Iterator[TaskStats]:
    """``mapPartitions`` body over the source's rows (:data:`~.source.SCHEMA`): :func:`copy_tasks`
    of the groups among them (one, as the source plans them)."""
    return copy_tasks(job, [task_of(group, job.routes) for group in groups_of_rows(rows)])


def release_tasks(job: CopyJob, tasks: Iterable[int]) -> Iterator[TaskStats]:
    """``mapPartitions`` body at the job's end: each copier of ``tasks`` on this executor
    commits what it copied, reports it and exits."""
    configure_spark_process(logging.WARNING)
    for task in tasks:
        yield release_task(job, task)


def task_of(group: CopyGroup, routes: Mapping[str, TopicRoute]) -> tuple[int, list[CopyRequest]]:
    """A planned group as :func:`copy_tasks` takes it."""
    return group.index, [request_of(r, routes) for r in group.ranges]


def request_of(r: CopyRange, routes: Mapping[str, TopicRoute]) -> CopyRequest:
    """The range as the copy takes it, with the ids of its source topic (as planned) and of its
    destination topic (as routed)."""
    route = routes.get(r.topic)
    return CopyRequest(r.tp, r.start, r.end, r.floor, r.topic_id or None, route.topic_id if route else None)
