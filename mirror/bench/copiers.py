"""kmirror's own copies, as the bench runs them: the raw ceiling, the copy engine, the Spark job.

``raw`` is the I/O limit of our stack: the same client, fetch size and one-batch-per-partition
produce requests as the engine, and nothing else: no CRC check, no routing, only the
mandatory base-offset zeroing (KIP-31: the destination assigns offsets). The engine modes
call :func:`mirror.engine.copy_range` exactly as a Spark task does, one range per partition.
"""

from __future__ import annotations

import contextlib
import re
import threading
import time
from pathlib import Path
from typing import Callable, Iterator

import kcodecs

from ..engine import CopyRequest, TopicRoute, copy_range
from ..kafka import KafkaClient, TopicPartition
from ..routing import RouteCounters, RoutingPolicy
from .proctree import TreeMeter
from .stats import Sample
from .worker import ModeRun

__all__ = ["prepared", "copy_raw", "copy_engine", "copy_spark", "ENGINE_POLICIES"]

ENGINE_POLICIES = {"pass-through": "preserve", "inspect": "by-key", "recompress": "by-key"}
"""Partitioning per copy-engine mode; the data (see :mod:`.datagen`) decides the routing class."""


@contextlib.contextmanager
def prepared(spec: ModeRun) -> Iterator[Callable[[], dict[str, int]]]:
    """Connected clients (not timed: a running mirror has them) and the copy to time."""
    copy = copy_raw if spec.mode == "raw" else copy_engine
    if spec.mode != "raw" and spec.mode not in ENGINE_POLICIES:
        raise ValueError(f"unknown mode {spec.mode!r}")
    with KafkaClient(spec.source) as source, KafkaClient(spec.destination) as destination:
        source.topics(), destination.topics()  # connect and read metadata
        yield lambda: copy(spec, source, destination)


def copy_raw(spec: ModeRun, source: KafkaClient, destination: KafkaClient) -> dict[str, int]:
    for partition, end in enumerate(spec.end_offsets):
        tp, out = TopicPartition(spec.source_topic, partition), TopicPartition(spec.destination_topic, partition)
        offset = 0
        while offset < end:
            buffer = bytearray(source.fetch(tp, offset, max_bytes=spec.fetch_max_bytes).records)
            outgoing = []
            for batch in kcodecs.iter_batches(buffer):  # headers only
                last = batch.last_offset
                if offset <= last < end:
                    kcodecs.set_base_offset(batch.raw, 0)
                    outgoing.append((out, batch.raw))
                    offset = last + 1
            if not outgoing:
                raise RuntimeError(f"raw copy made no progress at {tp} offset {offset}")
            destination.produce(outgoing)
    return {}


def copy_engine(spec: ModeRun, source: KafkaClient, destination: KafkaClient) -> dict[str, int]:
    policy = RoutingPolicy(partitioning=ENGINE_POLICIES[spec.mode], destination_partitions=spec.destination_partitions)
    route = TopicRoute(spec.source_topic, spec.destination_topic, len(spec.end_offsets), policy)
    counters = RouteCounters()
    for partition, end in enumerate(spec.end_offsets):
        request = CopyRequest(TopicPartition(spec.source_topic, partition), 0, end)
        stats = copy_range(request, route, source, destination, fetch_max_bytes=spec.fetch_max_bytes)
        counters.merge(stats.counters)
    return _records_by_class(counters)


def copy_spark(spec: ModeRun) -> Sample:
    """The pass-through copy through ``kmirror run --once`` on ``local[2]``.

    The Spark session (JVM start) is opened before the clock starts, as a long-running job
    has it; what is timed is the streaming query: planning, micro-batches, tasks, commits.
    """
    from ..config import load_config
    from ..spark.job import run_mirror, spark_session

    suffix = spec.destination_topic.removeprefix(spec.source_topic)
    config = load_config(None, {
        "source.bootstrap": spec.source, "destination.bootstrap": spec.destination,
        "topics": re.escape(spec.source_topic), "rename": "{topic}" + suffix, "partitioning": "preserve",
        "once": True, "checkpoint": str(Path(spec.work_dir) / "checkpoint"), "master": "local[2]",
        "fetch_max_bytes": spec.fetch_max_bytes,
    })
    spark_session(config)  # the session run_mirror will reuse
    meter = TreeMeter()
    began = time.perf_counter()
    with meter:
        totals = run_mirror(config, stop=threading.Event())
    wall = time.perf_counter() - began
    return Sample(wall, meter.cpu_s, meter.peak_rss_bytes, _records_by_class(totals.counters))


def _records_by_class(counters: RouteCounters) -> dict[str, int]:
    return {route: counts["records"] for route, counts in counters.as_dict().items()}
