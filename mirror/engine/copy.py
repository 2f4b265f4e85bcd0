"""The copy itself: fetch raw batches of a group of source ranges, route them, produce them.
Runs on executors, one call per Spark task.

A range ``[start, end)`` owns the batches whose *last* offset falls inside it. Ranges end
where the source's last stable offset was, which is always a batch boundary; when a rate limit
cuts a batch in two, the whole batch goes with the range that holds its last offset. Every
batch is therefore copied by exactly one range, whole, and never split, but for where the
copy of a partition begins: its *floor*, the job's starting offset (a time start finds the
first record stamped that recently, often inside a batch) or the source's log start
(DeleteRecords), below which nothing is copied, not even records of the batch that holds it.

Routing checks each batch's CRC first: the destination rewrites recompute the CRC, so a
batch corrupted at the source would otherwise arrive at the destination looking valid.

The shape of the copy is Kafka's own clients': one Fetch per source leader covers every
range of the task it leads (:class:`~mirror.kafka.Fetcher`), the routed batches go to an
idempotent producer that keeps up to five Produce requests in flight per destination broker
(:class:`~mirror.kafka.IdempotentProducer`), and the next fetches go out while produce
requests are in flight, all in one thread (:func:`~mirror.kafka.wait_readable`). Fetched
record sets are routed a few batches per turn of the loop, between reading answers and
sending requests, so that routing a large fetch never leaves the destination idle
(:mod:`.fetched_set`); a range is fetched again once its last set is routed. Memory is
bounded by ``max_buffer_bytes``: what counts is the buffers fetch responses are read into,
pinned until the last batch taken from them is acknowledged or kept idle for the next
responses (:class:`~mirror.kafka.FrameBuffers`), and the batches rebuilt from them until
acknowledged. A fetch goes out only while what it may bring still fits, so a slow destination
slows the fetching and memory stays flat however long the backlog. Below that bound, a fetch
goes out only while less than ``fetch_max_bytes`` waits for the destination's
acknowledgement, as Kafka's consumer fetches a partition only once its buffered records are
consumed: fetching further ahead copies no faster, and costs memory.

Forwarded batches are rewritten inside the fetch response's own buffer and produced as views
of it: the bytes of a batch are never copied between the socket that read them and the
socket that writes them.
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
import uuid
from typing import Literal, Mapping, Sequence

from ..kafka import (
    FRAME_SLACK,
    READ_COMMITTED,
    Fetcher,
    FrameBuffers,
    IdempotentProducer,
    KafkaClient,
    TopicPartition,
    wait_readable,
)
from ..kafka.fetcher import MAX_FETCHES_IN_FLIGHT
from .collector import collecting_new_objects_only
from .fetched_set import OutgoingBatch, RouteMode
from .latency import Invisible, LatencyHistogram
from .offset_syncs import SyncLog
from .range_copy import TAIL, RangeCopy, route_slice, take_fetched
from .ranges import CopyRequest, TaskStats
from .topics import TopicRoute
from .trace import CopierTrace

__all__ = ["copy_ranges", "CopyLoop", "TAIL", "DEFAULT_MAX_BUFFER_BYTES"]

DEFAULT_MAX_BUFFER_BYTES = 64 * 1024 * 1024
"""Bytes of fetch buffers and rebuilt batches not yet acknowledged by the destination, at most
(Kafka's ``buffer.memory`` is 32 MiB)."""
_MAX_WAIT_S = 1.0


@collecting_new_objects_only()
def copy_ranges(requests: Sequence[CopyRequest], routes: Mapping[str, TopicRoute], source: KafkaClient,
                producer: IdempotentProducer, *, fetch_max_bytes: int,
                max_buffer_bytes: int = DEFAULT_MAX_BUFFER_BYTES,
                on_data_loss: Literal["fail", "skip-to-earliest"] = "fail",
                mode: RouteMode = RouteMode.ROUTED) -> TaskStats:
    """Copy every range, returning when the destination acknowledged all of it; raise a typed
    error naming the partition and offset on anything wrong.

    ``mode`` :attr:`~.fetched_set.RouteMode.RAW_CEILING` is ``kmirror bench``'s raw ceiling:
    forwarded without routing or checks, through this same loop."""
    began = time.perf_counter()
    if len({request.tp for request in requests}) != len(requests):
        raise ValueError("copy_ranges takes at most one range per partition")
    loop = CopyLoop(routes, source, producer, fetch_max_bytes=fetch_max_bytes, max_buffer_bytes=max_buffer_bytes,
                    on_data_loss=on_data_loss, mode=mode)
    try:
        for request in requests:
            loop.assign(request)
        while not loop.finished:
            loop.turn()
    except BaseException as exc:
        # Whatever the producer still holds belongs to this failed copy: it must not go out
        # with the next task's batches. A new producer (a new id) takes over.
        producer.abort(exc)
        raise
    finally:
        loop.close()
    stats = loop.take_stats()
    stats.invisible = loop.take_invisible()
    stats.seconds = time.perf_counter() - began
    return stats


class CopyLoop:
    """The fetch -> route -> produce loop over a set of ranges, one :meth:`turn` at a time.

    :func:`copy_ranges` turns it until its ranges are copied. A resident copier
    (:mod:`.copier`) turns it for as long as it holds a lease, over ranges that end at
    :data:`TAIL`: those are fetched with long polls and followed as the source grows, and
    reaching the source's end is being caught up (:attr:`caught_up`), not a truncated
    source. Ranges are added as they come (:meth:`assign`); statistics accumulate until
    :meth:`take_stats` hands them over."""

    def __init__(self, routes: Mapping[str, TopicRoute], source: KafkaClient, producer: IdempotentProducer, *,
                 fetch_max_bytes: int, max_buffer_bytes: int = DEFAULT_MAX_BUFFER_BYTES,
                 on_data_loss: Literal["fail", "skip-to-earliest"] = "fail", mode: RouteMode = RouteMode.ROUTED,
                 max_wait_ms: int = 100, trace: CopierTrace | None = None):
        """``trace``: a resident copier's latency trace (:mod:`.trace`), or None (no cost)."""
        self.routes = routes
        self.source = source
        self.producer = producer
        self.fetch_max_bytes = fetch_max_bytes
        self.max_buffer_bytes = max_buffer_bytes
        self.on_data_loss = on_data_loss
        self.mode = mode
        self.copies: dict[TopicPartition, RangeCopy] = {}
        # Idle buffers beyond what the bound leaves room for would only sit there.
        self.frames = FrameBuffers(fetch_max_bytes + FRAME_SLACK,
                                   keep=max(1, max_buffer_bytes // (fetch_max_bytes + FRAME_SLACK)))
        self.fetcher = Fetcher(source, max_bytes=fetch_max_bytes, isolation_level=READ_COMMITTED, frames=self.frames,
                               max_wait_ms=max_wait_ms)
        self.rebuilt = 0
        self._peak = 0
        self._syncs = SyncLog()
        self._latency = LatencyHistogram()
        self._invisible = Invisible() if producer.transactional_id is not None else None
        """Exactly-once: acknowledged batches are visible once their transaction commits
        (:meth:`committed`), and only then is their latency counted."""
        self.trace = trace
        self.step = trace.step if trace is not None else _untimed
        """Times one step of the loop under a trace: ``with loop.step("kind"): ...``."""
        if trace is not None:
            producer.on_send = trace.sent
        # What each turn and each commit needs, kept as the copies change rather than found
        # by walking every copy: a copier following 10,000 partitions of which four move
        # walked them all several times a turn, and every commit wrote them all (issue 69;
        # docs/performance.md, "A whole cluster").
        self._active: set[TopicPartition] = set()
        self._unfetched: set[TopicPartition] = set()
        """Active copies with no fetched set waiting to be routed: those a fetch may ask for."""
        self._routing: dict[TopicPartition, RangeCopy] = {}
        self._behind: set[TopicPartition] = set()
        """Active copies not caught up."""
        self._moved: set[TopicPartition] = set()
        """Copies whose position or durable offset may have changed since :meth:`take_moved`."""
        self._touched: set[TopicPartition] = set()
        """Copies whose statistics may have changed since :meth:`take_stats`."""

    def assign(self, request: CopyRequest) -> None:
        """Copy ``request`` too: a partition not yet in the loop, or (the same partition) a
        range that goes on from where the loop's copy of it is. A range of another topic under
        the partition's name (another topic id: the plan follows a topic made again) replaces
        the loop's copy, which has nothing more to copy, as does any range of a copy whose topic
        went (:attr:`~.range_copy.RangeCopy.gone`)."""
        copy = self.copies.get(request.tp)
        if copy is not None and (copy.gone or request.of_another_topic_than(copy.request)):
            self._drop(copy)
            self._syncs.seal(copy.request.tp, copy.request.topic_id, copy.request.destination_id)
            copy = None
        if copy is not None:
            if request.start != copy.offset and copy.active:
                raise ValueError(f"{request.tp}: a range from {request.start} while the copy is at {copy.offset}")
            copy.request = dataclasses.replace(copy.request, end=max(request.end, copy.request.end))
        else:
            copy = self.copies[request.tp] = RangeCopy(request, self.routes[request.tp.topic])
            if request.topic_id is not None:
                self.fetcher.identify({request.tp.topic: uuid.UUID(request.topic_id)})
        self._track(copy)

    def _drop(self, copy: RangeCopy) -> None:
        """``copy`` leaves the loop, once what it produced is acknowledged."""
        if copy.unacked:
            self.flush()
        tp = copy.request.tp
        del self.copies[tp]
        self._routing.pop(tp, None)
        for kept in (self._active, self._unfetched, self._behind, self._moved, self._touched):
            kept.discard(tp)

    def _track(self, copy: RangeCopy) -> None:
        """Keep the loop's sets true to ``copy``'s state, after anything that may change it."""
        tp = copy.request.tp
        active = copy.active
        for member, kept in ((active, self._active), (active and copy.fetched is None, self._unfetched),
                             (active and not copy.caught_up, self._behind)):
            if member:
                kept.add(tp)
            else:
                kept.discard(tp)
        if copy.fetched is not None:
            self._routing[tp] = copy
        else:
            self._routing.pop(tp, None)
        self._moved.add(tp)
        self._touched.add(tp)

    def take_moved(self) -> set[TopicPartition]:
        """The partitions whose position or durable offset may have changed since the last
        call (a commit writes only those: :class:`~.commit.LoopCommits`)."""
        moved, self._moved = self._moved, set()
        return moved

    @property
    def moved(self) -> set[TopicPartition]:
        """As :meth:`take_moved`, without taking them."""
        return self._moved

    def position(self, tp: TopicPartition) -> int:
        """The next offset of ``tp`` to route (every one before it is routed, and enqueued or dropped)."""
        return self.copies[tp].offset

    def durable(self, tp: TopicPartition) -> int:
        """The offset of ``tp`` below which every record is acknowledged by the destination (or
        was dropped): the first source offset of its oldest batch not yet acknowledged, else
        :meth:`position`. At-least-once, that is how far the copy is durable, with no flush."""
        copy = self.copies[tp]
        return next(iter(copy.unacked.values()), copy.offset)

    @property
    def finished(self) -> bool:
        """Every range copied to its end and acknowledged (never, while one tails)."""
        return not self._active and self.producer.idle

    @property
    def caught_up(self) -> bool:
        """Every tailing range has routed all the source had when it was last fetched."""
        return not self._behind

    def turn(self, also: Sequence = (), max_wait_s: float = _MAX_WAIT_S) -> list:
        """One turn: fetch what is wanted, send what is ready, read what came, route a slice;
        waits at most ``max_wait_s`` for answers (or for ``also``, sockets of the caller's).
        Returns those of ``also`` that are readable."""
        copies, fetcher, producer, frames = self.copies, self.fetcher, self.producer, self.frames
        wanted = {tp: copies[tp].offset for tp in fetcher.not_fetching(self._unfetched)}
        # Fetch ahead only while less than a fetch waits for the destination (a fetch per
        # fetch in flight, for a source far away): more would not copy faster, only hold
        # more memory (each buffer mapped fresh, every batch an object the garbage
        # collector walks).
        if wanted and producer.buffered_bytes < self.fetch_max_bytes * fetcher.widest_window():
            room = _fetches_that_fit(frames, self.rebuilt, fetcher.in_flight(), self.max_buffer_bytes, producer.idle)
            if room:
                fetcher.send(wanted, limit=room)
        producer.send_ready()
        routing = list(self._routing.values())
        trace, step = self.trace, self.step
        # With batches left to route, only look at the sockets (no wait).
        with step("wait for the source" if producer.idle else "wait for produce acks"):
            readable = wait_readable(fetcher.connections() + producer.connections(),
                                     0.0 if routing else min(max_wait_s, _timeout(fetcher, producer)), also=also)
        ours = []
        for tp, gone in fetcher.take_gone().items():  # topics metadata stopped listing
            if tp in copies:
                take_fetched(copies[tp], gone, self.source, self.on_data_loss, self.mode)
                self._track(copies[tp])
        with step("read answers"):
            for conn in readable:
                if conn in also:
                    ours.append(conn)
                elif fetcher.owns(conn):
                    _read_fetch(fetcher, conn, copies, self.source, self.on_data_loss, self.mode, trace, self._track)
                    self._peak = max(self._peak, frames.usage().pinned + self.rebuilt)
                else:
                    producer.on_readable(conn)
        if routing and len(ours) == len(readable):
            # Answers first: an acknowledgement frees a place in the producer's window, to
            # be filled at once. A slice is routed in a turn with nothing to read, while
            # the destination works on the requests in flight. (Answers cannot crowd
            # routing out: none come without requests, and none go without routed batches.)
            with step("route"):
                grown = 0
                for copy in routing:
                    grown += route_slice(copy, producer, len(copies), trace)
                    self._track(copy)
            if grown:
                self.rebuilt += grown
                self._peak = max(self._peak, frames.usage().pinned + self.rebuilt)
        self.rebuilt -= _take_acks(producer, self._syncs, self._counted_at_ack, copies, self._moved, trace)
        return ours

    def flush(self) -> None:
        """Turn until the producer holds nothing unacknowledged (routing no further)."""
        while not self.producer.idle:
            self.producer.send_ready()
            for conn in wait_readable(self.producer.connections(), _timeout(self.fetcher, self.producer)):
                self.producer.on_readable(conn)
            self.rebuilt -= _take_acks(self.producer, self._syncs, self._counted_at_ack, self.copies, self._moved,
                                       self.trace)

    @property
    def _counted_at_ack(self) -> LatencyHistogram | Invisible:
        return self._latency if self._invisible is None else self._invisible

    def take_invisible(self) -> Invisible:
        """The acknowledged batches still waiting for their transaction's commit, handed over
        to whoever commits it (:func:`copy_ranges`'s caller)."""
        taken = self._invisible or Invisible()
        if self._invisible is not None:
            self._invisible = Invisible()
        return taken

    def committed(self, at: float) -> None:
        """The transaction holding every batch acknowledged so far committed at ``at`` (seconds
        since the epoch): their latency counts from then. Nothing at-least-once."""
        if self._invisible is not None:
            self._invisible.visible(at, self._latency)

    @property
    def holds_syncs(self) -> bool:
        """Whether records were acknowledged whose syncs :meth:`take_syncs` has not taken yet."""
        return bool(self._syncs.open or self._syncs.closed)

    def take_syncs(self) -> SyncLog:
        """Where the records acknowledged since the last call landed."""
        syncs, self._syncs = self._syncs, SyncLog()
        return syncs

    def take_stats(self, *, with_syncs: bool = True, changed_only: bool = False) -> TaskStats:
        """What the loop did since the last call: per partition, from where the last call left
        it to where it is now, and the acknowledged batches' latencies and (``with_syncs``,
        else they wait for :meth:`take_syncs`) syncs. ``changed_only``: only the partitions
        that changed since, and those behind (a resident copier's report, every few seconds:
        not 10,000 idle partitions each time)."""
        ranges = []
        chosen = (self.copies[tp] for tp in self._touched | self._behind) if changed_only else self.copies.values()
        self._touched = set()
        for copy in chosen:
            live = copy.stats
            end = copy.offset if copy.request.end == TAIL or copy.gone else copy.request.end
            # A report of its own; the live stats (and the counters a fetched set being routed
            # counts into) go on from here.
            ranges.append(dataclasses.replace(live, end=end, counters=live.counters.take()))
            live.start = live.end = end
            live.lost_records = live.produced_batches = live.produced_bytes = 0
            live.max_timestamp = -1
        taken = TaskStats(ranges, 0.0, self._peak, syncs=self.take_syncs() if with_syncs else SyncLog(),
                          latency=self._latency)
        self._latency, self._peak = LatencyHistogram(), 0
        return taken

    def close(self) -> None:
        self.fetcher.close()
        self.frames.clear()


def _untimed(_kind: str) -> contextlib.nullcontext:
    """A step of the loop when no trace is kept."""
    return contextlib.nullcontext()


def _timeout(fetcher: Fetcher, producer: IdempotentProducer) -> float:
    """Until the first backoff ends, at most :data:`_MAX_WAIT_S` (answers end the wait sooner)."""
    deadlines = [d for d in (fetcher.next_deadline(), producer.next_deadline()) if d is not None]
    if not deadlines:
        return _MAX_WAIT_S
    return min(_MAX_WAIT_S, max(0.0, min(deadlines) - time.monotonic()))


def _fetches_that_fit(frames: FrameBuffers, rebuilt: int, in_flight: int, max_buffer_bytes: int, idle: bool) -> int:
    """How many more fetches fit the memory bound: each fetch in flight may fill a buffer, an
    idle one or a new one. With nothing in flight and nothing unacknowledged, one always goes
    (whatever a lingering view still pins), so the copy cannot stall."""
    usage = frames.usage()
    held = usage.pinned + rebuilt
    fit = 0
    while (fit < MAX_FETCHES_IN_FLIGHT
           and held + max(usage.idle, frames.size * (in_flight + fit + 1)) <= max_buffer_bytes):
        fit += 1
    return fit or int(in_flight == 0 and idle)


def _read_fetch(fetcher: Fetcher, conn, copies: Mapping[TopicPartition, RangeCopy], source: KafkaClient,
                on_data_loss: str, mode: RouteMode, trace: CopierTrace | None, track) -> None:
    """Take the fetch answered on ``conn``: each partition's record set waits in its range to be
    routed (``track`` told of each copy changed). A function of its own so that no view of the
    response outlives it here but those sets: a lingering view would keep the response's buffer
    from being reused."""
    for tp, outcome in fetcher.on_readable(conn).items():
        if trace is not None:
            trace.fetched(tp)
        take_fetched(copies[tp], outcome, source, on_data_loss, mode)
        track(copies[tp])


def _take_acks(producer: IdempotentProducer, syncs: SyncLog, latency: LatencyHistogram | Invisible,
               copies: Mapping[TopicPartition, RangeCopy], moved: set[TopicPartition],
               trace: CopierTrace | None = None) -> int:
    """Record where each acknowledged batch landed, and its replication latency (``latency``:
    counted now, or in a transaction kept until it commits), the batch's source partition
    among those ``moved`` (its durable offset did); return the bytes of rebuilt batches let go.
    (A function of its own for the reason :func:`_read_fetch` is: no acknowledged batch's view
    lingers in the loop.)"""
    acks = producer.take_acks()
    if not acks:
        return 0
    now = time.time()
    invisible = isinstance(latency, Invisible)
    released = 0
    for ack in acks:
        batch: OutgoingBatch = ack.token
        if batch is None:
            continue  # a record of the mirror's own (offset syncs), not a copied batch
        del copies[batch.source].unacked[id(batch)]
        moved.add(batch.source)
        if trace is not None:
            trace.acked(batch)
        if batch.max_timestamp >= 0:
            if invisible:
                latency.add(batch.max_timestamp / 1000)
            else:
                latency.observe(now - batch.max_timestamp / 1000)
        if ack.base_offset >= 0:  # -1: a retry found it written, and the broker did not say where
            syncs.add(batch.source, batch.first, batch.last, batch.tp, ack.base_offset,
                      ack.base_offset + batch.records, batch.exact)
        released += batch.rebuilt_bytes
    return released
