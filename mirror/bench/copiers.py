"""kmirror's own copies, as the bench runs them: the raw ceiling, the copy engine, the Spark job.

Both ``raw`` and the engine modes run :func:`mirror.engine.copy_ranges` over every partition
at once, as one Spark task copies its group: one Fetch per source leader, the idempotent
producer with five requests in flight. ``raw`` swaps the router for
:func:`~mirror.engine.fetched_set.forward_unchecked` (runs of batches framed the same way,
without the checks): no CRC check, no routing, only the mandatory header rewrites, which the
producer's stamp makes (KIP-31: base offset 0 for the destination to assign; its id and
sequences, which recomputes the CRC).
So ``raw`` is the ceiling of this same pipeline, and the gap to it is what routing costs.
``exactly-once`` is ``pass-through`` inside one destination transaction with the offsets and
offset-syncs records, as a task of an exactly-once job copies a micro-batch: the gap between the two is
what the guarantee costs.
"""

from __future__ import annotations

import contextlib
import re
import threading
import time
from pathlib import Path
from typing import Callable, Iterator

from kcodecs import Compression

from ..engine import (CommittedOffsets, Committer, CopyRequest, TopicRoute, copy_exactly_once, copy_ranges,
                      offset_syncs_topic, offset_syncs_topic_spec, offsets_topic, offsets_topic_spec, transactional_id)
from ..engine.fetched_set import RouteMode
from ..kafka import IdempotentProducer, KafkaClient, TopicPartition
from ..kafka.transactional_producer import TransactionalProducer
from ..routing import DEFAULT_COALESCE_BELOW_BYTES, RouteCounters, RoutingPolicy
from .datagen import DataSpec, Layout, build_dataset
from .fill import fill_topic
from .mode_run import ModeRun
from .proctree import TreeMeter
from .stats import Sample

__all__ = ["prepared", "copy_pipeline", "copy_spark", "ENGINE_POLICIES", "COALESCING_MODES"]

ENGINE_POLICIES = {"raw": "preserve", "pass-through": "preserve", "exactly-once": "preserve", "inspect": "by-key",
                   "recompress": "by-key", "coalesced": "preserve"}
"""Partitioning per copy-engine mode; the data (see :mod:`.datagen`) decides the routing class."""
COALESCING_MODES = {"coalesced"}
"""Modes that coalesce small batches with ``kmirror run``'s defaults; the others forward every
batch as it is, so that pass-through stays what it is named for at every batch size."""


@contextlib.contextmanager
def prepared(spec: ModeRun) -> Iterator[Callable[[], dict[str, int]]]:
    """Connected clients and a producer id (not timed: a running mirror has them) and the copy to time."""
    if spec.mode not in ENGINE_POLICIES:
        raise ValueError(f"unknown mode {spec.mode!r}")
    with KafkaClient(spec.source) as source, KafkaClient(spec.destination) as destination:
        source.topics(), destination.topics()  # connect and read metadata
        if spec.mode == "exactly-once":
            job = Path(spec.work_dir).name
            destination.create_topics([offsets_topic_spec(job), offset_syncs_topic_spec(job)])
            producer = TransactionalProducer(destination, transactional_id(job, 0))
            offsets = CommittedOffsets(destination, offsets_topic(job), max_wait_s=120)
            syncs_to = TopicPartition(offset_syncs_topic(job), 0)
        else:
            producer, offsets, syncs_to = IdempotentProducer(destination), None, None
        try:
            yield lambda: copy_pipeline(spec, source, producer, offsets, syncs_to)
        finally:
            producer.close()


def copy_pipeline(spec: ModeRun, source: KafkaClient, producer: IdempotentProducer,
                  offsets: CommittedOffsets | None = None, syncs_to: TopicPartition | None = None) -> dict[str, int]:
    """The whole topic as one task copies its group; with ``offsets`` (mode ``exactly-once``) in
    one destination transaction with its source offsets and offset syncs, as a task of an
    exactly-once job."""
    coalescing = spec.mode in COALESCING_MODES
    policy = RoutingPolicy(partitioning=ENGINE_POLICIES[spec.mode], destination_partitions=spec.destination_partitions,
                           coalesce_below_bytes=DEFAULT_COALESCE_BELOW_BYTES if coalescing else 0)
    route = TopicRoute(spec.source_topic, spec.destination_topic, len(spec.end_offsets), policy)
    routes = {spec.source_topic: route}
    requests = [CopyRequest(TopicPartition(spec.source_topic, p), 0, end) for p, end in enumerate(spec.end_offsets)]
    if offsets is not None:
        stats = copy_exactly_once(requests, routes, source, Committer(producer, syncs_to, offsets),
                                  fetch_max_bytes=spec.fetch_max_bytes)
    else:
        stats = copy_ranges(requests, routes, source, producer, fetch_max_bytes=spec.fetch_max_bytes,
                            mode=RouteMode.RAW_CEILING if spec.mode == "raw" else RouteMode.ROUTED)
    if spec.mode == "raw":
        return {}
    counters = RouteCounters()
    for ranged in stats.ranges:
        counters.merge(ranged.counters)
    return _records_by_class(counters)


def copy_spark(spec: ModeRun) -> Sample:
    """The pass-through copy through ``kmirror run --once`` on ``local[2]``.

    The Spark session (JVM start) is opened before the clock starts, and has run a query of
    many micro-batches (:func:`_warm_up_jvm`), as a long-running job's has; what is timed is
    the streaming query: planning, micro-batches, tasks, commits. The sample also carries
    the run's own seconds of copying (its summary's), the measure issue 9 holds to 0.8x of
    pass-through.
    """
    from ..config import load_config
    from ..spark.job import run_mirror
    from ..spark.session import spark_session

    suffix = spec.destination_topic.removeprefix(spec.source_topic)
    settings = {
        "source.bootstrap": spec.source, "destination.bootstrap": spec.destination, "partitioning": "preserve",
        "once": True, "master": "local[2]", "fetch_max_bytes": spec.fetch_max_bytes,
        **({} if spec.copy_tasks is None else {"copy_tasks": spec.copy_tasks}),
    }
    config = load_config(None, {**settings, "topics": re.escape(spec.source_topic), "rename": "{topic}" + suffix,
                                "checkpoint": str(Path(spec.work_dir) / "checkpoint")})
    spark_session(config)  # the session run_mirror will reuse
    _warm_up_jvm(spec, settings)
    meter = TreeMeter()
    began = time.perf_counter()
    with meter:
        totals = run_mirror(config, stop=threading.Event())
    wall = time.perf_counter() - began
    return Sample(wall, meter.cpu_s, meter.peak_rss_bytes, _records_by_class(totals.counters), copy_s=totals.seconds)


WARM_UP_BYTES = 1_000_000
"""Data of the JVM's warm-up query: about 60 batches of 16 KiB (1 KiB records)."""
WARM_UP_MICRO_BATCH_BYTES = 64 * 1024
"""Its rate limit: about 16 micro-batches."""


def _warm_up_jvm(spec: ModeRun, settings: dict) -> None:
    """Run the job's per-micro-batch path in this JVM before the clock starts.

    A long-running job's JVM has run it many times; the bench's timed query is one
    micro-batch in a fresh JVM, whose first micro-batches cost more while the JIT compiles
    (figures: docs/performance.md, "What changed: the bench's JVM warmed before the clock").
    So: one query over a small topic of the same codec and partitions, cut into about 16
    micro-batches, into a throwaway destination topic with its own checkpoint.
    """
    from ..config import load_config
    from ..spark.job import run_mirror

    data = build_dataset(DataSpec(Compression.parse(spec.codec), 1024, WARM_UP_BYTES, partitions=len(spec.end_offsets),
                                  base_timestamp_ms=time.time_ns() // 1_000_000), Layout.FLAGGED)
    topic = f"{spec.destination_topic}.spark-warm-up"
    with KafkaClient(spec.source) as client:
        fill_topic(client, topic, len(spec.end_offsets), data)
    run_mirror(load_config(None, {**settings, "topics": re.escape(topic), "rename": "{topic}",
                                  "checkpoint": str(Path(spec.work_dir) / "warm-up-checkpoint"),
                                  "max_bytes_per_trigger": WARM_UP_MICRO_BATCH_BYTES}), stop=threading.Event())


def _records_by_class(counters: RouteCounters) -> dict[str, int]:
    return {route: counts["records"] for route, counts in counters.as_dict().items()}
