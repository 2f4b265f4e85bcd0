"""One range's fetched record set, routed a slice at a time.

The copy loop is one thread that both routes fetched batches and keeps the destination's
pipeline full, and the pipeline is shallow: five Produce requests of one batch per
partition, little of the destination broker's work. Routing a whole fetch response at once
(up to ``fetch_max_bytes``: hundreds of small batches, many times longer) let those requests
drain long before the loop read their answers and sent the next ones, so the mirror and the
destination broker took turns instead of working together. The copy loop therefore routes
:data:`SLICE` batches of each fetched set per turn, between reading answers and sending
requests, as Kafka's consumer hands a buffered fetch to ``poll`` ``max.poll.records`` at a
time (figures: docs/performance.md, "Routing in slices").

A set owns the batches whose *last* offset falls inside its range (``copy.py`` explains
why); batches of aborted transactions are left out (read_committed), and so are records
below the set's floor (:attr:`FetchedSet.floor`). The set keeps its place, and the
:class:`~mirror.routing.ReadCommitted` state that reading in order builds, from one slice to
the next.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Iterator

import kcodecs
from kcodecs import (Batch, CorruptBatchError, KcodecsError, TimestampType, V2Batch, V2Header, check_v2, iter_batches,
                     iter_v2)

from ..kafka import FetchedData, TopicPartition
from ..routing import (ReadCommitted, RouteClass, RouteCounters, coalesce, home_partition, passes_through,
                       route_batch)
from .errors import CorruptSourceError
from .topics import TopicRoute

__all__ = ["SLICE", "RouteMode", "FetchedSet", "Outgoing", "OutgoingBatch", "route_one", "forward_unchecked"]

SLICE = 8
"""Batches of one set routed per turn of the copy loop: few enough that with four sets in a
turn the destination's five requests in flight still outlast the routing (figures:
docs/performance.md, "Small costs behind choices in the code")."""

_NOTHING = object()
"""No step held (:attr:`FetchedSet._held`)."""
_PAST_END = object()
"""The walk reached a batch of a later range (:meth:`FetchedSet._advance`)."""

_ONE_FOR_ONE = (RouteClass.PASSED_THROUGH, RouteClass.INSPECTED)
"""Classes whose outgoing batch is the source batch, record for record."""


@dataclass(slots=True)
class OutgoingBatch:
    """One batch to produce, and where its records came from (for :mod:`.offset_syncs`). One
    per batch: slots, not frozen (cheaper to build; see :class:`~mirror.routing.Routed`)."""

    tp: TopicPartition
    """The destination partition."""
    data: bytearray | memoryview
    records: int
    source: TopicPartition
    first: int
    """Source offset of the first record of the source batch it came from (its base offset)."""
    last: int
    exact: bool
    """Forwarded as it was: its records are the source batch's, one for one, in order."""
    max_timestamp: int = -1
    """The source batch's max timestamp in ms (-1: none, magic 0), for replication latency."""

    @property
    def rebuilt_bytes(self) -> int:
        """The bytes this batch holds of its own until acknowledged: a rebuilt batch's; none for
        a forwarded view of a fetch buffer, which is counted with the buffer."""
        return 0 if type(self.data) is memoryview else len(self.data)


Outgoing = list[OutgoingBatch]


class RouteMode(Enum):
    """How a fetched set's batches are routed."""

    ROUTED = "routed"
    """The mirror's: every batch checked (CRC), counted and routed by its route's policy, runs
    of small batches coalesced (:func:`route_one`)."""
    RAW_CEILING = "raw-ceiling"
    """``kmirror bench``'s raw ceiling: every batch forwarded as it is to its own partition,
    nothing checked or counted (:func:`forward_unchecked`)."""


def route_one(batch: Batch, last: int, tp: TopicPartition, route: TopicRoute, counters: RouteCounters,
              aborted: bool) -> Outgoing:
    """Route one source batch of ``tp`` (:func:`~mirror.routing.route_batch`) and count it. A
    forwarded batch goes out as a view of the fetched bytes, for the producer's stamp to rewrite
    in place. Runs of batches that pass through, nearly every batch of a mirror, do not come
    here: :meth:`FetchedSet._forward_run` forwards them from one read of each header."""
    # Before the producer's in-place stamp zeroes it; a v0/v1 wrapper names only its last offset (and
    # such a batch is rebuilt, so its span is a bound anyway).
    first = batch.base_offset if batch.magic >= 2 else last
    stamped = batch.max_timestamp
    # Every outgoing batch goes to the copy's idempotent producer, whose stamp makes the destination's rewrites.
    routed = route_batch(batch, tp.partition, route.policy, in_place=True, aborted=aborted, producer_restamps=True)
    counters.add(routed)
    exact = routed.route in _ONE_FOR_ONE
    return [OutgoingBatch(route.destinations[out.partition], out.data, out.records, tp, first, last, exact,
                          stamped) for out in routed.outgoing]


def forward_unchecked(batch: Batch, last: int, tp: TopicPartition, route: TopicRoute, counters: RouteCounters,
                      aborted: bool) -> Outgoing:
    """``kmirror bench``'s raw ceiling: the batch as it is, to the same partition, nothing
    checked or counted (the bench's sources have no transactions to leave out; the producer's
    stamp zeroes the base offset). The copy engine's own pipeline with no routing, so the gap
    between the two is what routing costs."""
    return [OutgoingBatch(route.destinations[tp.partition], batch.raw, batch.record_count, tp, batch.base_offset, last,
                          True)]


class FetchedSet:
    """The batches of ``[offset, end)`` in one fetched record set of ``tp``, not yet routed.

    A run of v2 batches that pass through, nearly every batch of a mirror, is forwarded
    straight from the record set's bytes (:meth:`_forward_run`: each header read and checked
    once, no object per batch but the outgoing one); so is a run for the raw ceiling
    (:attr:`RouteMode.RAW_CEILING`), unchecked. Anything else, and every batch of a set with
    aborted transactions in it (or of one made ``batch_by_batch``), goes through
    :func:`route_one` (or :func:`forward_unchecked`) one batch at a time, with the same
    outcome: ``tests/engine/test_fetched_set.py`` holds the runs to that walk."""

    def __init__(self, fetched: FetchedData, tp: TopicPartition, offset: int, end: int, route: TopicRoute,
                 counters: RouteCounters, mode: RouteMode = RouteMode.ROUTED, floor: int = -1, *,
                 batch_by_batch: bool = False):
        self.fetched = fetched
        self.tp, self.end, self.route, self.counters = tp, end, route, counters
        checked = mode is RouteMode.ROUTED
        self._route_batch = route_one if checked else forward_unchecked
        self.start = offset
        self.offset = offset
        """The next offset to route, and once :attr:`done` the next to fetch."""
        self.floor = max(floor, fetched.log_start_offset)
        """No record below it is copied: the job's starting offset in the partition (a time
        start finds one inside a batch), or the source's log start (DeleteRecords moves it
        inside a batch). Kafka answers a fetch with whole batches, so the batch that holds the
        floor comes with the records before it; Kafka's consumer drops those
        (``CompletedFetch``), and so does the copy, rebuilding that one batch without them.
        At most ``start``, so only the first batch the set owns can hold it; once that one
        is routed, -1."""
        self.done = False
        self._position = 0
        """Where in the record set the next batch starts."""
        self._batches: Iterator[Batch] | None = None
        """The one-batch-at-a-time walk from :attr:`_position`, while it is the one in use."""
        self._held: object = _NOTHING
        """A step of the walk taken but not yet routed (see :meth:`_advance`)."""
        self._below = 0
        """Batches smaller than this are coalesced (0: none is); set by each :meth:`route_slice`."""
        self._runs = not batch_by_batch and not fetched.aborted_transactions
        self._checked = checked
        self._committed = ReadCommitted(fetched.aborted_transactions)
        self._destination = route.destinations[home_partition(tp.partition, route.policy)]

    @property
    def progressed(self) -> bool:
        return self.offset > self.start

    @property
    def destination(self) -> TopicPartition:
        """The destination partition of the set's unkeyed records (all of them, under ``preserve``)."""
        return self._destination

    def route_slice(self, limit: int | None = SLICE, *, backlog: bool = False) -> Outgoing:
        """Route up to ``limit`` more batches (``None``: all the rest); :attr:`done` once the
        record set or the range ends. ``backlog`` says that batches for :attr:`destination`
        already queue behind its requests in flight, so the policy may merge larger batches
        (:meth:`~mirror.routing.RoutingPolicy.coalesces_below`). A batch that fails its check raises
        :class:`~.errors.CorruptSourceError` naming the partition and offset; the batches
        routed before it stand (the copy stops there, and its caller's retry or
        transaction decides what they become)."""
        outgoing: Outgoing = []
        routed = 0
        self._below = self.route.policy.coalesces_below(backlog) if self._checked else 0
        try:
            while routed != limit:
                if self._runs and self._held is _NOTHING:
                    routed += self._forward_run(outgoing, None if limit is None else limit - routed)
                    if routed == limit:
                        return outgoing
                step = self._advance()
                if step is None:
                    break
                if step is _PAST_END:
                    self.offset = self.end  # the next batch belongs to a later range
                    break
                batch, aborted = step
                last = batch.last_offset
                if self.floor > 0:
                    floor, self.floor = self.floor, -1
                    if not aborted and batch.base_offset < floor:
                        kept = _from_floor(batch, floor, self.route.policy.max_decompressed_size)
                        if kept is None:  # compaction left nothing from the floor on
                            self.counters.count(RouteClass.DROPPED, 0, batch.size)
                            self.offset = last + 1
                            routed += 1
                            continue
                        batch = kept
                if not aborted and batch.size < self._below and batch.magic == 2 and not batch.is_control:
                    outgoing += self._coalesce_from(batch)
                    routed += 1
                    continue
                outgoing += self._route_batch(batch, last, self.tp, self.route, self.counters, aborted)
                self.offset = last + 1
                routed += 1
            else:
                return outgoing
        except KcodecsError as exc:
            where = exc.offset if isinstance(exc, CorruptBatchError) and exc.offset is not None else self.offset
            raise CorruptSourceError(self.tp, where, getattr(exc, "reason", str(exc))) from exc
        self.done = True
        return outgoing

    def _advance(self) -> tuple[Batch, bool] | None | object:
        """The next batch this set owns and whether it is aborted, asked of
        :class:`~mirror.routing.ReadCommitted` once, in order; ``None`` when the record set
        ends, :data:`_PAST_END` at a batch of a later range. A run being coalesced looks one
        step past its end, and hands that step back through :attr:`_held`."""
        if self._held is not _NOTHING:
            step, self._held = self._held, _NOTHING
            return step
        if self._batches is None:
            self._batches = iter_batches(self.fetched.records, start=self._position)
        for batch in self._batches:
            self._position = batch.position + batch.size
            last = batch.last_offset
            if last >= self.end:
                return _PAST_END
            aborted = self._committed.is_aborted(batch)  # asked of every batch, in order, as it keeps state
            if last >= self.offset:  # else: the fetch began inside an earlier batch that is not ours
                return batch, aborted
        return None

    def _coalesce_from(self, first: Batch) -> Outgoing:
        """``first`` (a small v2 data batch) merged with the small batches after it in this
        record set (:func:`~mirror.routing.coalesce`), up to ``coalesce_target_bytes`` of
        them; transaction markers and aborted batches among them are left out as routing
        leaves them out. What the fetch holds is all it merges: it never waits for more.

        The merged batch maps source offsets ``[first, last]`` of its data onto its
        destination run, exactly (one for one) when the records fill the span, i.e. no hole
        from compaction or a marker, and they all went to one partition; otherwise as a
        bound, as a rebuilt batch does (:mod:`.offset_syncs`). A lone small batch is routed
        as any other."""
        policy = self.route.policy
        codec = first.checked_header().codec_id
        run, size, last = [first], first.size, first.last_offset
        while size < policy.coalesce_target_bytes:
            step = self._advance()
            if step is None or step is _PAST_END:
                self._held = step
                break
            batch, aborted = step
            if aborted or batch.is_control:
                # Data of an aborted transaction, or a marker: routed (to nothing) here by
                # route_batch, which checks it first, and the run goes on past it.
                self.counters.add(route_batch(batch, self.tp.partition, policy, aborted=aborted))
                self.offset = batch.last_offset + 1
                continue
            if (batch.magic != 2 or batch.size >= self._below or size + batch.size > policy.coalesce_target_bytes
                    or batch.checked_header().codec_id != codec):
                self._held = step  # routed on its own next (and checked there, if it was not here)
                break
            run.append(batch)
            size += batch.size
            last = batch.last_offset
        self.offset = max(self.offset, last + 1)
        if len(run) == 1:
            return self._route_batch(first, last, self.tp, self.route, self.counters, False)
        routed = coalesce(run, self.tp.partition, policy)
        self.counters.count(RouteClass.COALESCED, routed.records, routed.source_bytes, batches=len(run))
        begin = first.base_offset
        exact = len(routed.outgoing) == 1 and routed.records == last - begin + 1
        newest = max(batch.max_timestamp for batch in run)
        return [OutgoingBatch(self.route.destinations[out.partition], out.data, out.records, self.tp, begin, last,
                              exact, newest) for out in routed.outgoing]

    def _forward_run(self, outgoing: Outgoing, limit: int | None) -> int:
        """Forward the v2 batches from :attr:`_position` that pass through, up to ``limit``, as
        :func:`route_one` would (checked, counted, sent to their home partition as views of the
        fetched bytes), or for the raw ceiling as :func:`forward_unchecked` would; return how
        many. Stops before the first batch it does not forward itself: one of a later range,
        one to route, or anything not a whole v2 batch (the one-batch walk takes it from there)."""
        routed = records = size = 0
        tp, end, policy, destination, read = self.tp, self.end, self.route.policy, self._destination, V2Header.read
        checked, floor, below = self._checked, self.floor, self._below
        offset, resume = self.offset, self._position
        try:
            for position, raw in iter_v2(self.fetched.records, start=resume):
                header = read(raw)
                last = header.base_offset + header.last_offset_delta
                if last >= end:
                    break
                if last >= offset:  # else: the fetch began inside an earlier batch that is not ours
                    if header.base_offset < floor or len(raw) < below:
                        break  # records below the floor, or a small batch: the one-batch walk takes it
                    if checked:
                        check_v2(raw, position, header)
                        if not passes_through(header, policy):
                            break
                    outgoing.append(OutgoingBatch(destination, raw, header.record_count, tp, header.base_offset, last,
                                                  True, header.max_timestamp if checked else -1))
                    records += header.record_count
                    size += len(raw)
                    offset = last + 1
                    routed += 1
                resume = position + len(raw)
                if routed == limit:
                    break
        finally:  # what was forwarded stands, also when a batch fails its check
            if resume != self._position:
                self.offset, self._position, self._batches = offset, resume, None
            if routed:
                self.floor = -1  # the batches after the first one owned all start above it
            if routed and checked:
                self.counters.count(RouteClass.PASSED_THROUGH, records, size, routed)
        return routed


def _from_floor(batch: Batch, floor: int, max_size: int) -> Batch | None:
    """``batch`` as if it held only its records from ``floor`` on (None if none is left),
    checked first as routing checks every batch: a new batch, for routing to take as any
    other (rebuilt in the source's codec, it may then pass through)."""
    if isinstance(batch, V2Batch):
        batch.checked_header()
    else:
        batch.validate(max_size=max_size)
    if batch.timestamp_type is TimestampType.LOG_APPEND_TIME:
        # As routing's rebuilds do: the records keep their CreateTimes, and the destination
        # topic (LogAppendTime too) stamps its own time.
        copy = bytearray(batch.raw)
        kcodecs.clear_log_append_time(copy)
        batch = kcodecs.read_batch(copy)
    kept = [record for record in batch.records(max_size=max_size) if record.offset >= floor]
    if not kept:
        return None
    return kcodecs.read_batch(bytearray(kcodecs.build_batch(kept, compression=batch.compression,
                                                            base_offset=kept[0].offset)))
