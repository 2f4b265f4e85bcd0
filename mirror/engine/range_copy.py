"""One range of a copy: how far it got, the fetched set it is routing, and the two steps
:class:`~.copy.CopyLoop` takes for it each turn: taking a fetch's record set
(:func:`take_fetched`) and routing a slice of it to the producer (:func:`route_slice`). What a
fetch that moves nothing means (caught up, a transaction open at the source, truncation or a
corrupt source), what OFFSET_OUT_OF_RANGE means (data loss) and what a topic gone from under
its id means (the range stops where it got: :attr:`RangeCopy.gone`) are decided here, per range.
"""

from __future__ import annotations

import logging
from collections import OrderedDict

from ..kafka import FetchedData, IdempotentProducer, KafkaClient, OffsetOutOfRangeError, TopicIdGoneError, TopicPartition
from .errors import CorruptSourceError, DataLossError, SourceTruncatedError
from .fetched_set import FetchedSet, RouteMode
from .ranges import CopyRequest, RangeStats
from .topics import TopicRoute
from .trace import CopierTrace

__all__ = ["RangeCopy", "take_fetched", "route_slice", "TAIL"]

log = logging.getLogger(__name__)

TAIL = (1 << 63) - 1
"""The end of a range that has none: :meth:`~.copy.CopyLoop.assign` of a tailing copy."""


class RangeCopy:
    """Progress of one range: the next offset to fetch or route, the fetched set being routed,
    and its statistics."""

    def __init__(self, request: CopyRequest, route: TopicRoute):
        self.request = request
        self.route = route
        self.offset = request.start
        self.fetched: FetchedSet | None = None
        self.stalls = 0
        self.unacked: OrderedDict[int, int] = OrderedDict()
        """Its enqueued batches not yet acknowledged (id -> first source offset), in routing
        order: what :meth:`~.copy.CopyLoop.durable` reads."""
        self.caught_up = False
        """A tailing range routed all the source had at its last fetch (reset by new data)."""
        self.stats = RangeStats(request.tp, request.start, request.end, topic_id=request.topic_id)
        self.gone = False
        """The source topic the range was planned in is gone (deleted, or made again under its
        name): nothing more of it can be copied, and the copy stops at :attr:`offset`. What
        follows (the new topic, or none) is the planner's to decide."""

    @property
    def active(self) -> bool:
        return self.offset < self.request.end and not self.gone


def take_fetched(copy: RangeCopy, outcome, source: KafkaClient, on_data_loss: str, mode: RouteMode) -> None:
    """One partition's fetched bytes: the set to route, or after data loss the offset to go on from."""
    request, stats = copy.request, copy.stats
    if isinstance(outcome, TopicIdGoneError):
        copy.gone = stats.gone = True
        log.warning("%s; its copy stopped at offset %d (the plan decides what follows)", outcome, copy.offset)
        return
    if isinstance(outcome, OffsetOutOfRangeError):
        skipped_to = _after_data_loss(source, request.tp, copy.offset, request.end, on_data_loss, outcome)
        stats.lost_records += min(skipped_to, request.end) - copy.offset
        copy.offset = skipped_to
        return
    fetched: FetchedData = outcome
    stats.high_watermark = fetched.high_watermark
    copy.fetched = FetchedSet(fetched, request.tp, copy.offset, request.end, copy.route, stats.counters, mode,
                              floor=request.floor)


def route_slice(copy: RangeCopy, producer: IdempotentProducer, fetched_together: int,
                 trace: CopierTrace | None = None) -> int:
    """Route the next slice of the range's fetched set and enqueue it; return the bytes of the
    batches rebuilt in it (forwarded ones are views of a fetch buffer, counted with it)."""
    fetched_set, stats = copy.fetched, copy.stats
    # A tailing copy's batches queued at the producer wait behind its requests in flight:
    # merged, they drain in fewer round trips (routing.md, "Under a backlog"). A copy catching
    # up always has a queue, and forwards byte for byte: it is there for throughput.
    backlog = copy.caught_up and producer.queued(fetched_set.destination) > 0
    outgoing = fetched_set.route_slice(backlog=backlog)
    copy.offset = fetched_set.offset
    if fetched_set.done:
        copy.fetched = None
        fetched = fetched_set.fetched
        if copy.request.end == TAIL:
            stable = fetched.last_stable_offset if fetched.last_stable_offset >= 0 else fetched.high_watermark
            copy.caught_up = copy.offset >= stable
        if not fetched_set.progressed:
            _no_progress(copy, fetched, fetched_together)
            return 0
        copy.stalls = 0
    size = rebuilt = 0
    newest = stats.max_timestamp
    unacked = copy.unacked
    for out in outgoing:
        producer.enqueue(out.tp, out.data, out.records, out)
        unacked[id(out)] = out.first
        if trace is not None:
            trace.routed(out, copy.request.tp)
        size += len(out.data)
        rebuilt += out.rebuilt_bytes
        if out.max_timestamp > newest:
            newest = out.max_timestamp
    stats.produced_batches += len(outgoing)
    stats.produced_bytes += size
    stats.max_timestamp = newest
    return rebuilt


def _no_progress(copy: RangeCopy, fetched: FetchedData, fetched_together: int) -> None:
    """A fetch that moved nothing forward. In a fetch of several partitions that is normal for
    a partition whose next batch is larger than its share of ``max_bytes`` (only the first
    partition of a response is sure to get a whole batch, KIP-74; the fetcher puts the most
    starved one first). Persisting longer than one fetch per partition would loop forever:
    say why instead.

    At the last stable offset nothing moves while the source transaction open there goes on:
    ranges end at the LSO, but one planned before (from the high watermark) or read from a new
    leader whose LSO lags may reach it. That is a wait, not an error; the fetcher bounds it
    (:class:`~mirror.kafka.HangingTransactionError`)."""
    tp, offset = copy.request.tp, copy.offset
    if copy.request.end == TAIL and fetched.high_watermark == offset:
        return  # a tailing copy at the source's end: caught up, the next fetch waits for more
    if fetched.high_watermark <= offset:
        raise SourceTruncatedError(tp, offset, fetched.high_watermark)
    if 0 <= fetched.last_stable_offset <= offset:
        return
    copy.stalls += 1
    if copy.stalls > fetched_together + 1:
        raise CorruptSourceError(tp, offset, f"{copy.stalls} fetches below the last stable offset "
                                             f"{fetched.last_stable_offset} "
                                             f"returned no complete batch at or after the offset (last: "
                                             f"{len(fetched.records)} bytes; a batch larger than fetch_max_bytes on a "
                                             f"broker without KIP-74?)")


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
