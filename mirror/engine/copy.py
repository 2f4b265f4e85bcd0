"""The copy itself: fetch raw batches of one source range, route them, produce them. Runs on executors.

A range ``[start, end)`` owns the batches whose *last* offset falls inside it. Ranges end
where the source's high watermark was, which is always a batch boundary; when a rate limit
cuts a batch in two, the whole batch goes with the range that holds its last offset. Every
batch is therefore copied by exactly one range, whole, and never split.

Routing checks each batch's CRC first: the destination rewrites recompute the CRC, so a
batch corrupted at the source would otherwise arrive at the destination looking valid.

Each fetch response is copied once into a buffer of our own, and forwarded batches are
rewritten in it and produced as views of it: one copy per fetch instead of one per batch,
whose allocations (128 KiB and up come straight from the OS) cost 6.9 ms of mostly page
faults per 8 MB fetch against 0.5 ms (``docs/performance.md``).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Iterable, Iterator, Literal, Mapping

from kcodecs import CorruptBatchError, KcodecsError, iter_batches

from ..config import ClusterConfig, RetryConfig
from ..kafka import KafkaClient, OffsetOutOfRangeError, TopicPartition
from ..routing import RouteCounters, route_batch
from .clients import client_for
from .errors import CorruptSourceError, DataLossError, SourceTruncatedError
from .topics import TopicRoute

__all__ = ["CopyRequest", "RangeStats", "CopyJob", "copy_range"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class CopyRequest:
    """One micro-batch row: copy ``[start, end)`` of ``tp``."""

    tp: TopicPartition
    start: int
    end: int


@dataclass
class RangeStats:
    """What one range's copy did; pickled back to the driver by ``collect()``."""

    tp: TopicPartition
    start: int
    end: int
    high_watermark: int = -1
    counters: RouteCounters = field(default_factory=RouteCounters)
    lost_records: int = 0
    produced_batches: int = 0
    produced_bytes: int = 0
    seconds: float = 0.0

    @property
    def lag(self) -> int:
        """Offsets at the source not yet copied after this range (at fetch time)."""
        return max(0, self.high_watermark - self.end)


def copy_range(request: CopyRequest, route: TopicRoute, source: KafkaClient, destination: KafkaClient, *,
               fetch_max_bytes: int, on_data_loss: Literal["fail", "skip-to-earliest"] = "fail") -> RangeStats:
    """Copy one range; raise a typed error naming the partition and offset on anything wrong."""
    began = time.perf_counter()
    tp, offset = request.tp, request.start
    stats = RangeStats(tp, request.start, request.end)
    while offset < request.end:
        try:
            fetched = source.fetch(tp, offset, max_bytes=fetch_max_bytes)
        except OffsetOutOfRangeError as exc:
            skipped_to = _after_data_loss(source, tp, offset, request.end, on_data_loss, exc)
            stats.lost_records += min(skipped_to, request.end) - offset
            offset = skipped_to
            continue
        stats.high_watermark = fetched.high_watermark
        outgoing, next_offset = _route_fetched(fetched.records, tp, offset, request.end, route, stats.counters)
        if next_offset == offset:
            _no_progress(tp, offset, fetched)
        if outgoing:
            destination.produce(outgoing)
            stats.produced_batches += len(outgoing)
            stats.produced_bytes += sum(len(data) for _, data in outgoing)
        offset = next_offset
    stats.seconds = time.perf_counter() - began
    return stats


def _route_fetched(records, tp: TopicPartition, offset: int, end: int, route: TopicRoute,
                   counters: RouteCounters) -> tuple[list[tuple[TopicPartition, bytearray | memoryview]], int]:
    """Route the batches this range owns; return them and the offset to fetch next."""
    outgoing: list[tuple[TopicPartition, bytearray | memoryview]] = []
    try:
        for batch in iter_batches(bytearray(records)):
            last = batch.last_offset
            if last < offset:
                continue  # the fetch began inside an earlier batch that is not ours
            if last >= end:
                return outgoing, end  # this batch belongs to a later range
            routed = route_batch(batch, tp.partition, route.policy, in_place=True)
            counters.add(routed)
            outgoing.extend((TopicPartition(route.topic, out.partition), out.data) for out in routed.outgoing)
            offset = last + 1
    except KcodecsError as exc:
        where = exc.offset if isinstance(exc, CorruptBatchError) and exc.offset is not None else offset
        raise CorruptSourceError(tp, where, getattr(exc, "reason", str(exc))) from exc
    return outgoing, offset


def _no_progress(tp: TopicPartition, offset: int, fetched) -> None:
    """A fetch that moved nothing forward would loop forever: say why instead."""
    if fetched.high_watermark <= offset:
        raise SourceTruncatedError(tp, offset, fetched.high_watermark)
    raise CorruptSourceError(tp, offset, f"a fetch below the high watermark {fetched.high_watermark} returned "
                                         f"{len(fetched.records)} bytes and no complete batch at or after the offset "
                                         f"(a batch larger than fetch_max_bytes on a broker without KIP-74?)")


def _after_data_loss(source: KafkaClient, tp: TopicPartition, offset: int, end: int, on_data_loss: str,
                     cause: OffsetOutOfRangeError) -> int:
    """Where to go on after OFFSET_OUT_OF_RANGE: the earliest offset, or an error."""
    earliest = source.list_offsets([tp], "earliest")[tp]
    if offset >= earliest:
        raise SourceTruncatedError(tp, offset, cause.high_watermark) from cause
    if on_data_loss != "skip-to-earliest":
        raise DataLossError(tp, offset, earliest) from cause
    log.warning("DATA LOSS in %s: offsets %d to %d were deleted at the source before they were copied; "
                "skipping to %d (--on-data-loss skip-to-earliest)", tp, offset, min(earliest, end) - 1, earliest)
    return earliest


@dataclass(frozen=True)
class CopyJob:
    """What an executor needs to copy a micro-batch's rows; small, pickled into each task."""

    source: ClusterConfig
    destination: ClusterConfig
    retry: RetryConfig
    routes: Mapping[str, TopicRoute]
    fetch_max_bytes: int
    on_data_loss: Literal["fail", "skip-to-earliest"] = "fail"

    def copy_rows(self, rows: Iterable) -> Iterator[RangeStats]:
        """``mapPartitions`` body: rows are ``(topic, partition, start_offset, end_offset)``."""
        source = client_for(self.source, self.retry)
        destination = client_for(self.destination, self.retry)
        for topic, partition, start, end in rows:
            yield copy_range(CopyRequest(TopicPartition(topic, partition), start, end), self.routes[topic],
                             source, destination, fetch_max_bytes=self.fetch_max_bytes, on_data_loss=self.on_data_loss)
