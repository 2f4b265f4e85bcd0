"""``kmirror verify``'s comparison, on Spark: a group of topic pairs at a time, at any size.

Spark tasks read each side's ranges (:mod:`.plan`) into small rows (:mod:`.rows`), handed to
the JVM as Arrow batches: pair, identity, near and key hashes, partition, offset, sync entry,
producer. Every grouping, join and window below is keyed by the pair too, so that a group of
pairs is compared in one chain of Spark stages: a whole cluster's thousand small pairs cost a
few stages, not a thousand chains of them (a chain's stages cost about a second however small
the pair). A Spark task reads several ranges in turn, on one connection to each cluster. Records never leave the executors; the shuffles move hashes, and spill to disk, so
an executor's memory does not grow with the topic, and only counts and first offsets reach the
driver. A destination task also counts, from batch headers, what a consumer reads in its
partition outside the range: the verdict's "compared N of M".

A destination record in the range but in no sync entry's span is the job's, in a span not
verified, when one of the job's producers wrote it: counted as not covered. Any other is
**foreign** (step 5).

The comparison:

1. An aggregation by identity counts each side's copies and pairs the records whose identity
   has one copy on each side and no foreign one: nearly all, in one shuffle, reading each
   side once. When every identity is so (a clean mirror), steps 3 to 5 have nothing to do
   and are skipped. Otherwise both sides are read again, cached this time, and the records
   of the other identities (copies missing or repeated, foreign ones) are numbered per side
   (``row_number`` over the identity, in partition and offset order); a full outer join on
   (identity, number) pairs every source record with one destination record.
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
5. Foreign records whose identity a source record has (in the range or past it) are **foreign
   duplicates**, the others **foreign**; one that a producer of the job wrote after all (a
   copier whose first syncs came after the plan) is not covered.
"""

from __future__ import annotations

import itertools
import logging
import time
from dataclasses import dataclass
from typing import Callable, Iterator

from kcodecs import KMirrorError

from ..config import ClusterConfig, RetryConfig
from .plan import PairPlan
from .report import Finding, PairReport

__all__ = ["VerifyTaskError", "compare_pairs", "pair_groups"]

log = logging.getLogger(__name__)

_SOURCE, _DESTINATION = 0, 1
_RECORD, _CLEANED, _LATER, _FOREIGN, _UNCOVERED = 0, 1, 2, 3, 4
"""Row kinds: a record compared; entries whose spans lost offsets; a source record past the
verified range; a destination record no copy of the job wrote; a destination partition's count
of the records a consumer reads there that are not compared (``records``)."""
_ARROW_ROWS = 65536
_ROWS_PER_SHUFFLE_PARTITION = 1_000_000
_RECORDS_PER_GROUP = 1_000_000
"""Pairs are compared together up to this many source offsets (a larger pair alone): what a
group with a finding reads a second time."""
_READ_TASKS = 256
"""At most this many Spark tasks read a group's ranges (each reads several in turn)."""


class VerifyTaskError(KMirrorError):
    """A verify task failed on an executor; ``kind`` is the class name of the error it raised
    there (e.g. ``ClusterUnreachableError``), so the command's exit code can depend on it."""

    def __init__(self, kind: str, message: str):
        super().__init__(f"{kind}: {message}")
        self.kind = kind


@dataclass(frozen=True)
class _Reading:
    """What an executor needs to read a group's ranges (pickled to it once, broadcast)."""

    plans: tuple[PairPlan, ...]
    source: ClusterConfig
    destination: ClusterConfig
    retry: RetryConfig


def _schema():
    """The rows' Arrow schema (Spark's is made from it). A record's identity is its 16-byte hash
    as two longs: Spark groups and joins fixed-width rows far faster than binary ones (hash
    aggregation instead of sort-based)."""
    import pyarrow as pa

    return pa.schema([("pair", pa.int32()), ("side", pa.int8()), ("kind", pa.int8()), ("id_high", pa.int64()),
                      ("id_low", pa.int64()), ("near", pa.int64()), ("key_hash", pa.int64()), ("partition", pa.int32()),
                      ("offset", pa.int64()), ("entry", pa.int32()), ("key_partition", pa.int32()),
                      ("home", pa.int32()), ("producer", pa.int64()), ("records", pa.int64())])


IDENTITY = ["pair", "id_high", "id_low"]
"""A record's identity within its pair: the same record copied into two pairs is two records."""


def _read_tasks(reading, tasks: list[tuple[int, int, int]], batches) -> Iterator:
    """The rows of the tasks whose numbers are in ``batches`` (Arrow batches of ``id``), each a
    (pair, side, index) of ``tasks``: on executors, on one client per cluster."""
    from contextlib import ExitStack

    from ..engine.clients import client_for
    from ..kafka import TopicPartition
    from .rows import RangeReader, Spans, count_records

    config: _Reading = reading.value
    schema = _schema()
    with ExitStack() as stack:
        clients = {}

        def client_of(side: int):
            if side not in clients:
                cluster = config.source if side == _SOURCE else config.destination
                clients[side] = stack.enter_context(client_for(cluster, config.retry))
            return clients[side]

        for numbers in batches:
            for pair, side, index in (tasks[n] for n in numbers.column("id").to_pylist()):
                plan = config.plans[pair]
                if side == _SOURCE:
                    r, topic, spans, key_partitions = plan.sources[index], plan.source_topic, plan.source_spans, None
                else:
                    r, topic, spans, key_partitions = (plan.destinations[index], plan.destination_topic,
                                                       plan.destination_spans,
                                                       plan.destination_partitions if plan.by_key else None)
                tp, client = TopicPartition(topic, r.partition), client_of(side)
                reader = RangeReader(client, tp, r.start, r.read_to if side == _SOURCE else r.end,
                                     spans.get(r.partition, Spans()), key_partitions)
                rows = reader.rows()
                uncovered = 0
                while chunk := list(itertools.islice(rows, _ARROW_ROWS)):
                    batch, left_out = _arrow_rows(pair, plan, side, r.end, chunk, schema)
                    uncovered += left_out
                    yield batch
                if reader.cleaned:
                    yield _special_rows(schema, pair, side, _CLEANED, r.partition, entry=sorted(reader.cleaned))
                if side == _DESTINATION:
                    uncovered += count_records(client, tp, 0, r.start) + count_records(client, tp, r.end, r.tail or 0)
                    yield _special_rows(schema, pair, side, _UNCOVERED, r.partition, records=[uncovered])


def _special_rows(schema, pair: int, side: int, kind: int, partition: int, **columns: list):
    """Rows of ``kind`` that are no record: each column of ``columns`` given, the others null."""
    import pyarrow as pa

    n = len(next(iter(columns.values())))
    return pa.RecordBatch.from_pydict({field.name: [None] * n for field in schema} | columns | {
        "pair": [pair] * n, "side": [side] * n, "kind": [kind] * n, "partition": [partition] * n}, schema=schema)


def _arrow_rows(pair: int, plan: PairPlan, side: int, end: int, rows: list, schema):
    """Rows as one Arrow batch, a column at a time (a row at a time costs several times more),
    and how many destination rows were left out as not covered. A source row past ``end`` is
    :data:`_LATER`; a destination row in no sync entry's span is left out when one of the job's
    producers wrote it (a span not verified), :data:`_FOREIGN` when another one did. A source
    row's ``home`` is the destination partition a keyless record goes to (by key: its partition
    modulo the destination's count; otherwise its own), a destination row's ``key_partition``
    the one its key gives it (by key only)."""
    import numpy as np
    import pyarrow as pa

    identities = np.frombuffer(b"".join(row.identity for row in rows), dtype=">i8").reshape(-1, 2).astype(np.int64)
    offsets = np.fromiter((row.offset for row in rows), dtype=np.int64, count=len(rows))
    entries = np.fromiter((row.entry for row in rows), dtype=np.int32, count=len(rows))
    written_by = np.fromiter((row.producer for row in rows), dtype=np.int64, count=len(rows))
    partitions = np.fromiter((row.partition for row in rows), dtype=np.int32, count=len(rows))
    homes = (partitions % plan.destination_partitions if plan.by_key else partitions) if side == _SOURCE else None
    kinds = (np.where(offsets < end, _RECORD, _LATER) if side == _SOURCE
             else np.where(entries >= 0, _RECORD, _FOREIGN)).astype(np.int8)
    columns = {
        "pair": np.full(len(rows), pair, dtype=np.int32),
        "side": np.full(len(rows), side, dtype=np.int8),
        "kind": kinds,
        "id_high": identities[:, 0], "id_low": identities[:, 1],
        "near": np.fromiter((row.near for row in rows), dtype=np.int64, count=len(rows)),
        "key_hash": pa.array([row.key_hash for row in rows], pa.int64()),
        "partition": partitions,
        "offset": offsets,
        "entry": entries,
        "key_partition": pa.array([row.key_partition for row in rows], pa.int32()),
        "home": pa.nulls(len(rows), pa.int32()) if homes is None else homes,
        "producer": written_by,
        "records": pa.nulls(len(rows), pa.int64()),
    }
    batch = pa.RecordBatch.from_pydict(columns, schema=schema)
    if side == _SOURCE:
        return batch, 0
    producers = plan.producers
    kept = (entries >= 0) | ~np.isin(written_by, np.fromiter(producers, dtype=np.int64, count=len(producers)))
    left_out = len(rows) - int(kept.sum())
    return (batch.filter(pa.array(kept)) if left_out else batch), left_out


def pair_groups(plans: list[PairPlan]) -> list[list[PairPlan]]:
    """``plans`` in groups compared together: in order, each up to :data:`_RECORDS_PER_GROUP`
    source offsets, a larger pair alone."""
    groups: list[list[PairPlan]] = []
    records = 0
    for plan in plans:
        if not groups or records + plan.records > _RECORDS_PER_GROUP:
            groups.append([])
            records = 0
        groups[-1].append(plan)
        records += plan.records
    return groups


def compare_pairs(spark, plans: list[PairPlan], source: ClusterConfig, destination: ClusterConfig,
                  retry: RetryConfig, *, later_producers: Callable[[], set[int]] | None = None) -> list[PairReport]:
    """Read both sides of every plan of ``plans`` on the executors and compare them, together
    (see the module's doc): a report for each, in their order. ``later_producers``, asked once
    the destination's rows are read and only if some look foreign, names the job's producers
    that wrote syncs since the plans were made."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F
    from pyspark.sql.pandas.types import from_arrow_schema

    # Spark's 200 shuffle partitions make a small group's many stages slow; a large one gets one
    # per _ROWS_PER_SHUFFLE_PARTITION rows, so each sort stays small (and spills if not).
    records = sum(plan.records for plan in plans)
    spark.conf.set("spark.sql.shuffle.partitions",
                   str(max(spark.sparkContext.defaultParallelism, -(-2 * records // _ROWS_PER_SHUFFLE_PARTITION))))
    tasks = [(pair, side, i) for pair, plan in enumerate(plans)
             for side, ranges in ((_SOURCE, plan.sources), (_DESTINATION, plan.destinations)) for i in range(len(ranges))]
    if not tasks:
        return [PairReport(plan.source_topic, plan.destination_topic, 0, 0, (), created=plan.created,
                           topic_id=plan.topic_id, earlier_ids=plan.earlier_ids, lost_ids=plan.lost_ids)
                for plan in plans]
    reading = spark.sparkContext.broadcast(_Reading(tuple(plans), source, destination, retry))
    rows = (spark.range(len(tasks), numPartitions=min(len(tasks), _READ_TASKS))  # no shuffle
            .mapInArrow(lambda batches: _read_tasks(reading, tasks, batches), from_arrow_schema(_schema())))
    from ..spark.pyspark_internals import spark_failure  # the one reading of Spark's errors
    from ..spark.restarts import QueryRestarts

    restarts = QueryRestarts()
    try:
        while True:
            try:
                return _compare(plans, rows, later_producers or set, F, Window)
            except KMirrorError:
                raise
            except Exception as exc:  # Spark's report of an executor's error (PythonException, Py4JJavaError)
                failure = spark_failure(exc)
                # The comparison only reads: a burst that kept Spark's Python worker from
                # starting in time (mirror.spark.restarts) is ridden out by comparing again.
                if failure.transient is None or not restarts.allow():
                    raise VerifyTaskError(failure.kind, failure.message) from exc
                log.warning("Spark failed while comparing (%s: %s: %s); comparing again (%d of at most %d)",
                            failure.transient, failure.kind, failure.message, restarts.count, restarts.limit)
    finally:
        reading.unpersist()


def _compare(plans: list[PairPlan], rows, later_producers: Callable[[], set[int]], F, Window) -> list[PairReport]:
    from pyspark import StorageLevel

    kind = F.col("kind")
    records = rows.where(kind == _RECORD)

    def side(number: int, column: str):
        return F.max(F.when((F.col("side") == number) & (kind == _RECORD), F.col(column)))

    def copies(condition):
        return F.sum(condition.cast("int"))

    # Nearly every identity has one copy on each side: one aggregation pairs them, a single
    # shuffle, and reads both sides once. The others (copies missing or repeated, foreign
    # records) are paired by occurrence below, and only the pairs that have them pay for
    # reading them again. The destinations' counts of what is not covered have no identity, and
    # are summed in a group of their own.
    tally = rows.where(kind.isin(_RECORD, _FOREIGN, _UNCOVERED)).groupBy(*IDENTITY).agg(
        copies((F.col("side") == _SOURCE) & (kind == _RECORD)).alias("s_copies"),
        copies((F.col("side") == _DESTINATION) & (kind == _RECORD)).alias("d_copies"),
        copies(kind == _FOREIGN).alias("f_copies"),
        F.sum(F.when(kind == _UNCOVERED, F.col("records"))).alias("uncovered"),
        side(_SOURCE, "partition").alias("s_partition"), side(_SOURCE, "offset").alias("s_offset"),
        side(_SOURCE, "key_hash").alias("s_key_hash"), side(_SOURCE, "home").alias("s_home"),
        side(_DESTINATION, "partition").alias("d_partition"), side(_DESTINATION, "offset").alias("d_offset"),
        side(_DESTINATION, "key_partition").alias("d_key_partition"),
    ).persist(StorageLevel.MEMORY_AND_DISK)
    once = (F.col("s_copies") == 1) & (F.col("d_copies") == 1) & (F.col("f_copies") == 0)
    started = time.monotonic()
    counts = {row.pair: row for row in tally.groupBy("pair").agg(
        F.sum("s_copies").alias("s"), F.sum("d_copies").alias("d"), F.sum("f_copies").alias("f"),
        F.sum("uncovered").alias("uncovered"),
        F.count(F.when(~once & F.col("id_high").isNotNull(), 1)).alias("others")).collect()}
    total = {name: sum(getattr(row, name) or 0 for row in counts.values()) for name in ("s", "d", "f", "uncovered")}
    unpaired = sorted(pair for pair, row in counts.items() if row.others)
    log.info("verify: %d topic pairs: read both sides (%d and %d records compared, %d more at the destination) in "
             "%.1f s; %d pairs with identities without one copy a side", len(plans), total["s"], total["d"],
             total["f"] + total["uncovered"], time.monotonic() - started, len(unpaired))
    pair_columns = ["pair", "s_partition", "s_offset", "s_key_hash", "s_home", "d_partition", "d_offset",
                    "d_key_partition"]
    paired = tally.where(once).select(*pair_columns)
    found = []
    if unpaired:
        rows = rows.where(F.col("pair").isin(unpaired)).persist(StorageLevel.MEMORY_AND_DISK)
        left, found = _unpaired(rows, rows.where(kind == _RECORD).join(
            tally.where(~once).select(*IDENTITY, "s_copies"), IDENTITY), F, Window)
        paired = paired.unionByName(left.select(*pair_columns))
        if any(counts[pair].f for pair in unpaired):
            found += _foreign(rows, later_producers(), F)
    # By key: a keyed record on the partition its key gives it, a keyless one on its home;
    # otherwise on its source partition (its home).
    expected = F.coalesce(F.col("d_key_partition"), F.col("s_home"))
    found.append(_per_partition(paired.where(F.col("d_partition") != expected), "misplaced", "d_", F))
    along = Window.partitionBy("pair", "d_partition", "s_partition", "s_key_hash").orderBy("d_offset")
    reordered = paired.withColumn("before", F.lag("s_offset").over(along)).where(F.col("before") > F.col("s_offset"))
    found.append(_per_partition(reordered, "reordered", "d_", F))
    union = found[0]
    for frame in found[1:]:
        union = union.unionByName(frame)
    findings: dict[int, list[Finding]] = {}
    for row in union.collect():
        plan = plans[row["pair"]]
        topic = plan.source_topic if row["kind"] in ("missing", "cleaned") else plan.destination_topic
        findings.setdefault(row["pair"], []).append(Finding(row["kind"], topic, row["partition"], row["count"],
                                                            row["first"]))
    rows.unpersist()
    tally.unpersist()
    reports = []
    for pair, plan in enumerate(plans):
        row = counts.get(pair)
        s, d, f, uncovered = ((row.s or 0, row.d or 0, row.f or 0, row.uncovered or 0) if row else (0, 0, 0, 0))
        reports.append(PairReport(plan.source_topic, plan.destination_topic, s, d,
                                  tuple(sorted(findings.get(pair, ()), key=lambda f: (f.kind, f.topic, f.partition))),
                                  destination_total=d + f + uncovered, created=plan.created,
                                  topic_id=plan.topic_id, earlier_ids=plan.earlier_ids, lost_ids=plan.lost_ids))
    return reports


def _foreign(rows, later: set[int], F) -> list:
    """The findings of the destination records no copy of the job wrote: those equal to a
    source record of their pair (verified, or copied since) are **foreign duplicates**, the
    others **foreign**. A record one of ``later`` wrote is the job's after all (a copier whose
    first syncs came after the plan), in a span not verified: left out, as not covered."""
    foreign = rows.where(F.col("kind") == _FOREIGN)
    if later:
        foreign = foreign.where(~F.col("producer").isin(sorted(later)))
    source = rows.where((F.col("side") == _SOURCE) & F.col("kind").isin(_RECORD, _LATER)).select(*IDENTITY).distinct()
    return [_per_partition(foreign.join(source, IDENTITY, "left_semi"), "foreign-duplicate", "", F),
            _per_partition(foreign.join(source, IDENTITY, "left_anti"), "foreign", "", F)]


def _unpaired(rows, others, F, Window):
    """The records ``others`` of identities without one copy a side: those paired by occurrence
    (to be checked for placement and order), and the findings of the rest."""
    def numbered(number: int, prefix: str):
        frame = others.where(F.col("side") == number).select(
            *IDENTITY, "s_copies", *[F.col(c).alias(prefix + c) for c in ("near", "key_hash", "partition", "offset",
                                                                           "entry", "key_partition", "home")])
        order = Window.partitionBy(*IDENTITY).orderBy(prefix + "partition", prefix + "offset")
        return frame.withColumn("n", F.row_number().over(order))

    joined = numbered(_SOURCE, "s_").drop("s_copies").join(numbered(_DESTINATION, "d_"), on=[*IDENTITY, "n"],
                                                           how="full_outer")
    cleaned = rows.where(F.col("kind") == _CLEANED).select("pair", "side", "entry").distinct()
    source_cleaned = cleaned.where(F.col("side") == _SOURCE).select(
        "pair", F.col("entry").alias("d_entry"), F.lit(True).alias("source_cleaned"))
    destination_cleaned = cleaned.where(F.col("side") == _DESTINATION).select(
        "pair", F.col("entry").alias("s_entry"), F.lit(True).alias("destination_cleaned"))
    found = []
    source_left = joined.where(F.col("d_offset").isNull()).select(
        "pair", F.col("s_near").alias("near"), "s_partition", "s_offset", "s_entry")
    copied_since = rows.where(F.col("kind") == _LATER).select(*IDENTITY)
    destination_left = joined.where(F.col("s_offset").isNull()).join(copied_since, IDENTITY, "left_anti")
    found.append(_per_partition(destination_left.where(F.col("s_copies") > 0), "duplicated", "d_", F))
    unknown = destination_left.where(F.col("s_copies") == 0).select(
        "pair", F.col("d_near").alias("near"), "d_partition", "d_offset", "d_entry")
    by_near = Window.partitionBy("pair", "near")
    near = source_left.withColumn("m", F.row_number().over(by_near.orderBy("s_partition", "s_offset"))).join(
        unknown.withColumn("m", F.row_number().over(by_near.orderBy("d_partition", "d_offset"))),
        on=["pair", "near", "m"], how="full_outer")
    lost = near.where(F.col("d_offset").isNull()).join(destination_cleaned, ["pair", "s_entry"], "left")
    found.append(_per_partition(lost.where(F.col("destination_cleaned").isNull()), "missing", "s_", F))
    found.append(_per_partition(lost.where(F.col("destination_cleaned")), "cleaned", "s_", F))
    extra = near.where(F.col("d_offset").isNotNull()).join(source_cleaned, ["pair", "d_entry"], "left")
    gone = F.col("s_offset").isNull() & F.col("source_cleaned").isNotNull()
    found.append(_per_partition(extra.where(~gone), "altered", "d_", F))
    found.append(_per_partition(extra.where(gone), "gone", "d_", F))
    return joined.where(F.col("s_offset").isNotNull() & F.col("d_offset").isNotNull()), found


def _per_partition(frame, kind: str, prefix: str, F):
    """Count and first offset per pair and partition of ``frame``'s ``prefix`` side."""
    return (frame.groupBy("pair", F.col(prefix + "partition").alias("partition"))
            .agg(F.count("*").alias("count"), F.min(prefix + "offset").alias("first"))
            .select("pair", F.lit(kind).alias("kind"), "partition", "count", "first"))
