"""A micro-batch's copy groups as the source planned them, read from Spark's plan, not its rows.

Reading the rows of ``foreachBatch``'s DataFrame runs the source's ``read`` on executors: an
Arrow Python worker per task unpickles the reader and sends five small columns through the
JVM to the copy's worker. That costs a large share of a micro-batch on its first read and a
noticeable one after (figures: docs/performance.md, "The Spark job") for rows the driver's
planner already made.
The groups are in the DataFrame's plan: Spark hands ``foreachBatch`` a DataFrame over the
RDD of the micro-batch's scan, a ``DataSourceRDD`` whose partitions each hold one
``PythonStreamingInputPartition``, with the :class:`~.source.CopyGroup` pickled by the
planner (``pyspark.sql.streaming.python_streaming_source_runner``). Unpickling them here gives
the driver the very groups, task numbers included, that reading the rows would have given.

These are Spark's internal classes (checked on PySpark 4.3). Where the plan is not shaped so
(a Spark that changed them, Spark Connect), :func:`planned_groups` returns None and the job
reads the rows instead, slower but the same copy.
"""

from __future__ import annotations

import logging
import pickle

from .source import CopyGroup

__all__ = ["planned_groups"]

log = logging.getLogger(__name__)


def planned_groups(rows) -> list[CopyGroup] | None:
    """The copy groups of ``foreachBatch``'s ``rows``, in task order, without running the
    scan; None when the plan is not one this module knows (then read the rows).

    The DataFrame's one leaf scans an RDD whose narrow lineage (``MapPartitionsRDD``s over the
    ``DataSourceRDD``) hands down the scan's partitions as they are, so asking the top RDD for
    its partitions reaches the planned groups in a few py4j calls (each is a round trip to
    the JVM, and this runs once per micro-batch inside its seconds of copying)."""
    try:
        leaves = rows._jdf.queryExecution().executedPlan().collectLeaves()
        if leaves.size() != 1:
            return None
        groups = [_group(partition) for partition in leaves.head().rdd().partitions()]
    except Exception as exc:  # py4j's errors, a missing method: anything means "not this plan"
        log.debug("the micro-batch's plan has no copy groups to read: %s", exc)
        return None
    if any(group is None for group in groups):
        return None
    return sorted(groups, key=lambda group: group.index)


def _group(partition) -> CopyGroup | None:
    """A scan partition's planned group: its one input partition's pickled :class:`CopyGroup`
    (``DataSourceRDDPartition.inputPartition``, a ``PythonStreamingInputPartition``)."""
    held = partition.inputPartition()
    if held.isEmpty():
        return None
    group = pickle.loads(bytes(held.get().pickedPartition()))
    return group if isinstance(group, CopyGroup) else None
