"""``kmirror verify``'s comparison, on Spark: one topic pair at a time, at any size.

Spark tasks read each side's ranges (:mod:`mirror.engine.verify_plan`) into small rows
(:mod:`mirror.engine.verify_rows`), handed to the JVM as Arrow batches: identity, near and key
hashes, partition, offset, sync entry. Records never leave the executors; the shuffles move
hashes, and spill to disk, so an executor's memory does not grow with the topic, and only
counts and first offsets reach the driver.

The comparison:

1. Each side numbers its copies of one identity (``row_number`` over the identity, in partition
   and offset order), and a full outer join on (identity, number) pairs every source record
   with one destination record.
2. Paired records are checked for placement (by-key pairs: Kafka's murmur2 of the key, keyless
   records on their source partition modulo the destination's count; ``preserve``: the source
   partition) and for order: along each destination partition, the records of one key from one
   source partition (keyless: of one source partition) keep their source order.
3. A destination record left over whose identity the source has past the verified range was
   copied after the syncs were read (a live job), and is not a finding. One whose identity
   is in the range is **duplicated**.
4. The others are paired by near hash (key and time) with the source records left over: such a
   pair is one record, **altered**. A source record still left over is **missing**, unless the
   destination has cleaned offsets from its span since the copy (**cleaned at the
   destination**); a destination record still left over is **altered** too (no source record
   has its key and time), unless the source lost offsets from its span since the copy (**no
   longer at the source**: retention or compaction).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Iterator

from kcodecs import KMirrorError

from ..config import ClusterConfig, RetryConfig
from ..engine.verify_plan import PairPlan

__all__ = ["Finding", "PairReport", "VerifyTaskError", "compare_pair", "FAILURES", "KINDS"]

KINDS = {
    "missing": "at the source, not at the destination",
    "duplicated": "at the destination more often than at the source",
    "altered": "at the destination with a key, value, header or timestamp the source record does not have",
    "misplaced": "in another destination partition than the pair's partitioning puts it in",
    "reordered": "before a record that preceded it at the source (same key and source partition)",
    "gone": "no longer at the source (retention or compaction since the copy); not a failure",
    "cleaned": "no longer at the destination (its retention or compaction); not a failure",
}
"""Each kind of finding and what it means, as the report explains it."""
FAILURES = frozenset({"missing", "duplicated", "altered", "misplaced", "reordered"})

_SOURCE, _DESTINATION = 0, 1
_RECORD, _CLEANED, _LATER = 0, 1, 2
_ARROW_ROWS = 65536
_ROWS_PER_SHUFFLE_PARTITION = 1_000_000


class VerifyTaskError(KMirrorError):
    """A verify task failed on an executor; ``kind`` is the class name of the error it raised
    there (e.g. ``ClusterUnreachableError``), so the command's exit code can depend on it."""

    def __init__(self, kind: str, message: str):
        super().__init__(f"{kind}: {message}")
        self.kind = kind


_RAISED = re.compile(r"^(?:[A-Za-z_][\w.]*\.)?(\w+(?:Error|Exception)): (.+)$", re.M)


def _task_error(exc: Exception) -> VerifyTaskError:
    """The error an executor's Python raised, from Spark's report of it (its traceback's last line)."""
    text = str(exc).split("\n\tat ")[0]
    raised = [m for m in _RAISED.finditer(text) if m.group(1) not in ("PythonException", "Py4JJavaError")]
    if raised:
        return VerifyTaskError(raised[-1].group(1), raised[-1].group(2).strip())
    return VerifyTaskError(type(exc).__name__, text.strip().splitlines()[0] if text.strip() else repr(exc))


@dataclass(frozen=True)
class Finding:
    kind: str
    """A key of :data:`KINDS`."""
    topic: str
    partition: int
    count: int
    first_offset: int
    """The first offending offset of ``topic`` (the source's for missing and cleaned records,
    the destination's for the others)."""


@dataclass(frozen=True)
class PairReport:
    source_topic: str
    destination_topic: str
    source_records: int
    destination_records: int
    findings: tuple[Finding, ...]

    @property
    def failures(self) -> tuple[Finding, ...]:
        return tuple(f for f in self.findings if f.kind in FAILURES)


@dataclass(frozen=True)
class _Reading:
    """What an executor needs to read one pair's ranges (pickled to it once, broadcast)."""

    plan: PairPlan
    source: ClusterConfig
    destination: ClusterConfig
    retry: RetryConfig


def _schema():
    import pyarrow as pa

    return pa.schema([("side", pa.int8()), ("kind", pa.int8()), ("identity", pa.binary()), ("near", pa.binary()),
                      ("key_hash", pa.binary()), ("partition", pa.int32()), ("offset", pa.int64()),
                      ("entry", pa.int32()), ("key_partition", pa.int32())])


ROWS_SCHEMA = ("side byte, kind byte, identity binary, near binary, key_hash binary, partition int, offset long, "
               "entry int, key_partition int")


def _read_tasks(reading, batches) -> Iterator:
    """The rows of the tasks in ``batches`` (Arrow batches of (side, index)): on executors."""
    import pyarrow as pa

    from ..engine.clients import client_for
    from ..engine.verify_rows import RangeReader, Spans
    from ..kafka import TopicPartition

    config: _Reading = reading.value
    plan = config.plan
    schema = _schema()
    for tasks in batches:
        for side, index in zip(tasks.column("side").to_pylist(), tasks.column("index").to_pylist()):
            if side == _SOURCE:
                r, cluster, topic, spans, key_partitions = (plan.sources[index], config.source, plan.source_topic,
                                                            plan.source_spans, None)
            else:
                r, cluster, topic, spans, key_partitions = (
                    plan.destinations[index], config.destination, plan.destination_topic, plan.destination_spans,
                    plan.destination_partitions if plan.by_key else None)
            with client_for(cluster, config.retry) as client:
                reader = RangeReader(client, TopicPartition(topic, r.partition), r.start, r.read_to,
                                     spans.get(r.partition, Spans()), key_partitions)
                columns: list[list] = [[] for _ in range(9)]
                for row in reader.rows():
                    kind = _RECORD if row.offset < r.end else _LATER
                    for column, value in zip(columns, (side, kind, row.identity, row.near, row.key_hash,
                                                       row.partition, row.offset, row.entry, row.key_partition)):
                        column.append(value)
                    if len(columns[0]) >= _ARROW_ROWS:
                        yield pa.RecordBatch.from_arrays([pa.array(c, t.type) for c, t in zip(columns, schema)],
                                                         schema=schema)
                        columns = [[] for _ in range(9)]
                for entry in sorted(reader.cleaned):
                    for column, value in zip(columns, (side, _CLEANED, None, None, None, r.partition, None, entry,
                                                       None)):
                        column.append(value)
                if columns[0]:
                    yield pa.RecordBatch.from_arrays([pa.array(c, t.type) for c, t in zip(columns, schema)],
                                                     schema=schema)


def compare_pair(spark, plan: PairPlan, source: ClusterConfig, destination: ClusterConfig,
                 retry: RetryConfig) -> PairReport:
    """Read both sides of ``plan`` on the executors and compare them (see the module's doc)."""
    from pyspark import StorageLevel
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    # Spark's 200 shuffle partitions make a small pair's many stages slow; a large one gets one
    # per _ROWS_PER_SHUFFLE_PARTITION rows, so each sort stays small (and spills if not).
    spark.conf.set("spark.sql.shuffle.partitions",
                   str(max(spark.sparkContext.defaultParallelism, -(-2 * plan.records // _ROWS_PER_SHUFFLE_PARTITION))))
    reading = spark.sparkContext.broadcast(_Reading(plan, source, destination, retry))
    tasks = [(_SOURCE, i) for i in range(len(plan.sources))] + [(_DESTINATION, i) for i in range(len(plan.destinations))]
    if not tasks:
        return PairReport(plan.source_topic, plan.destination_topic, 0, 0, ())
    rows = (spark.createDataFrame(tasks, "side byte, index int").repartition(len(tasks))
            .mapInArrow(lambda batches: _read_tasks(reading, batches), ROWS_SCHEMA)
            .persist(StorageLevel.MEMORY_AND_DISK))
    try:
        return _compare(plan, rows, F, Window)
    except KMirrorError:
        raise
    except Exception as exc:  # Spark's report of an executor's error (PythonException, Py4JJavaError)
        raise _task_error(exc) from exc
    finally:
        rows.unpersist()
        reading.unpersist()


def _compare(plan: PairPlan, rows, F, Window) -> PairReport:
    records = rows.where(F.col("kind") == _RECORD)
    cleaned = rows.where(F.col("kind") == _CLEANED).select("side", "entry").distinct()
    source_cleaned = cleaned.where(F.col("side") == _SOURCE).select("entry", F.lit(True).alias("source_cleaned"))
    destination_cleaned = cleaned.where(F.col("side") == _DESTINATION).select(
        "entry", F.lit(True).alias("destination_cleaned"))

    def numbered(side: int, prefix: str, by: str):
        frame = records.where(F.col("side") == side)
        if side == _DESTINATION:
            frame = frame.where(F.col("entry") >= 0)  # written by another writer, or before the syncs kept
        frame = frame.select("identity", "near", "key_hash", "partition", "offset", "entry", "key_partition")
        order = Window.partitionBy(by).orderBy("partition", "offset")
        return frame.select(*[F.col(c).alias(prefix + c) if c != by else F.col(c) for c in frame.columns],
                            F.row_number().over(order).alias("n"))

    source = numbered(_SOURCE, "s_", "identity")
    destination = numbered(_DESTINATION, "d_", "identity")
    joined = source.join(destination, on=["identity", "n"], how="full_outer").persist()
    found = []
    paired = joined.where(F.col("s_offset").isNotNull() & F.col("d_offset").isNotNull())
    home = F.col("s_partition") % F.lit(plan.destination_partitions)
    expected = (F.when(F.col("d_key_partition").isNotNull(), F.col("d_key_partition")).otherwise(home)
                if plan.by_key else F.col("s_partition"))
    found.append(_per_partition(paired.where(F.col("d_partition") != expected), "misplaced", "d_", F))
    along = Window.partitionBy("d_partition", "s_partition", "s_key_hash").orderBy("d_offset")
    reordered = paired.withColumn("before", F.lag("s_offset").over(along)).where(F.col("before") > F.col("s_offset"))
    found.append(_per_partition(reordered, "reordered", "d_", F))

    source_left = joined.where(F.col("d_offset").isNull()).select(
        "identity", F.col("s_near").alias("near"), "s_partition", "s_offset", F.col("s_entry").alias("entry"))
    copied_since = rows.where(F.col("kind") == _LATER).select("identity")
    destination_left = joined.where(F.col("s_offset").isNull()).select(
        "identity", F.col("d_near").alias("near"), "d_partition", "d_offset", F.col("d_entry").alias("entry")
    ).join(copied_since, "identity", "left_anti")
    at_source = source.select("identity").distinct()
    found.append(_per_partition(destination_left.join(at_source, "identity", "left_semi"), "duplicated", "d_", F))
    unknown = destination_left.join(at_source, "identity", "left_anti")
    by_near = Window.partitionBy("near")
    near_source = source_left.withColumn("m", F.row_number().over(by_near.orderBy("s_partition", "s_offset")))
    near_destination = unknown.withColumn("m", F.row_number().over(by_near.orderBy("d_partition", "d_offset")))
    near = near_source.drop("identity").withColumnRenamed("entry", "s_entry").join(
        near_destination.drop("identity").withColumnRenamed("entry", "d_entry"), on=["near", "m"], how="full_outer")
    lost = (near.where(F.col("d_offset").isNull())
            .join(destination_cleaned.withColumnRenamed("entry", "s_entry"), "s_entry", "left"))
    found.append(_per_partition(lost.where(F.col("destination_cleaned").isNull()), "missing", "s_", F))
    found.append(_per_partition(lost.where(F.col("destination_cleaned")), "cleaned", "s_", F))
    extra = (near.where(F.col("d_offset").isNotNull())
             .join(source_cleaned.withColumnRenamed("entry", "d_entry"), "d_entry", "left"))
    gone = F.col("s_offset").isNull() & F.col("source_cleaned").isNotNull()
    found.append(_per_partition(extra.where(~gone), "altered", "d_", F))
    found.append(_per_partition(extra.where(gone), "gone", "d_", F))
    counts = joined.agg(F.count("s_offset").alias("s"), F.count("d_offset").alias("d")).collect()[0]
    union = found[0]
    for frame in found[1:]:
        union = union.unionByName(frame)
    findings = []
    for row in union.collect():
        topic = plan.source_topic if row["kind"] in ("missing", "cleaned") else plan.destination_topic
        findings.append(Finding(row["kind"], topic, row["partition"], row["count"], row["first"]))
    joined.unpersist()
    return PairReport(plan.source_topic, plan.destination_topic, counts.s, counts.d,
                      tuple(sorted(findings, key=lambda f: (f.kind, f.topic, f.partition))))


def _per_partition(frame, kind: str, prefix: str, F):
    """Count and first offset per partition of ``frame``'s ``prefix`` side."""
    return (frame.groupBy(F.col(prefix + "partition").alias("partition"))
            .agg(F.count("*").alias("count"), F.min(prefix + "offset").alias("first"))
            .select(F.lit(kind).alias("kind"), "partition", "count", "first"))
