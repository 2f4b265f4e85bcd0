"""The one commit: the order in which a copy's records become durable at the destination, the
same for a copy task of a micro-batch (:mod:`.task`, :mod:`.exactly_once`) and for a resident
copier (:mod:`.copier`).

1. The copy's records are produced and acknowledged (the caller's loop): only an
   acknowledgement says where a record landed.
2. The offset syncs, where they landed (:mod:`.offset_syncs`), for group offset translation.
3. Exactly-once: the source offsets the records reach, to the offsets topic
   (:mod:`.offsets_topic`), then EndTxn: the destination holds the records, their syncs and
   their offsets all, or none of them. At-least-once: the syncs are flushed; a copy that
   fails before is run again and writes them again.
4. The positions recorded, so the next commit's reader need not read them back.

Readers of what a transaction wrote wait, for one left open by a producer that died, as
long as :func:`open_transaction_wait_s` says: the coordinator aborts it once its timeout
passes.

A copy task commits once, at its end. A copy that runs on (a resident copier's
:class:`~.copy.CopyLoop`) commits as it goes, and :class:`LoopCommits` says when:

- the copy has caught up with the source and ``commit_interval_ms`` passed since the last
  commit: a record waits at most that long for its transaction (the latency target);
- a waiting task's ranges are routed to their ends: the task, and with it Spark's
  micro-batch, can finish;
- a second passed while catching up: a long backlog is committed in pieces, each costing
  a flush and an EndTxn, so not every few milliseconds.

At-least-once there is no flush but the last: a record is visible once acknowledged, and the
acknowledgements, as they come, say how far each partition is durable
(:meth:`~.copy.CopyLoop.durable`). A waiting task is answered from them, and a commit every
``commit_interval_ms`` only writes the offset syncs (once a second) and notes the durable
positions: a flush would wait for every batch in flight while the copy stops.

A copy task's commit writes every partition's position. A copy that runs on writes those that
moved since its last commit, and every :data:`FULL_POSITIONS_S` all of them: the offsets topic
is compacted by partition, so its last value per partition is where the copy got to, and a
copier starting reads back at most that far to find every partition it follows (a copier
following 10,000 partitions wrote 10,000 records a commit, every 20 ms, and that was half its
CPU: issue 69). Every write of the copy's bookkeeping at the destination (offset syncs, offsets,
and a takeover's syncs seeded from MirrorMaker 2's, :mod:`.takeover`) goes through a
:class:`Committer`, so through an idempotent or transactional producer.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Iterable, Mapping

from ..kafka import IdempotentProducer, TopicPartition
from ..kafka.transactional_producer import TransactionalProducer
from .copy import CopyLoop
from .offset_syncs import SyncLog, write_syncs
from .offsets_topic import CommittedOffsets, encode_offsets
from .own_batches import chunks
from .ranges import CopyRequest

__all__ = ["Committer", "LoopCommits", "open_transaction_wait_s", "CATCH_UP_COMMIT_S", "SYNCS_INTERVAL_S",
           "FULL_POSITIONS_S"]

CATCH_UP_COMMIT_S = 1.0
"""While catching up, a transaction is committed after this long (each commit flushes the
producer and waits for EndTxn: every few milliseconds would halve the copy's speed)."""
FULL_POSITIONS_S = 60.0
"""How often a copy that runs on writes every partition's position, not only those that moved."""
SYNCS_INTERVAL_S = 1.0
"""Offset syncs go out with the first commit after this long, not with every commit: one record
per source partition per commit would be a hundred a second for the driver to read back at
every start, where micro-batches wrote about one. What a copier that dies loses is at most this
long of syncs (group offsets in that stretch are not translated until later ones cover them)."""


def open_transaction_wait_s(transaction_timeout_s: float) -> float:
    """How long a reader of the destination's offsets or syncs waits behind an open
    transaction: twice the producers' transaction timeout, long enough for the coordinator to
    abort one left open by a producer that died (and for the abort's markers to be written)."""
    return 2 * transaction_timeout_s


@dataclass
class Committer:
    """Commits one copy's records, in the order of the module's docstring. ``offsets`` set
    means exactly-once (``producer`` is then a :class:`TransactionalProducer`)."""

    producer: IdempotentProducer
    syncs_to: TopicPartition | None = None
    """The offset-syncs topic's partition (None: no syncs written, for copies no group follows)."""
    offsets: CommittedOffsets | None = None
    topic_ids: dict[str, str] = field(default_factory=dict)
    """The id of the source topic each topic's positions are offsets of (KIP-516), written with
    them: a commit of a topic since deleted, or made again, is not taken for the new one's."""
    destination_ids: dict[str, str] = field(default_factory=dict)
    """By source topic, the id of the destination topic its records were copied into, written
    with them: a commit into a destination topic since lost is not taken for the new one's."""

    @property
    def exactly_once(self) -> bool:
        return self.offsets is not None

    def begin(self, requests: Iterable[CopyRequest]) -> dict[TopicPartition, int]:
        """Before a copy task's attempt: exactly-once, this attempt's epoch (no earlier producer
        of the task can commit after it), then :meth:`committed`; at-least-once, nothing is known."""
        if self.offsets is None:
            return {}
        assert isinstance(self.producer, TransactionalProducer)
        self.producer.renew()
        return self.committed(requests)

    def committed(self, requests: Iterable[CopyRequest]) -> dict[TopicPartition, int]:
        """Exactly-once, what the destination says was committed of the source topics
        ``requests`` copy (Kafka's read-process-write order), waiting only for a transaction
        still open that wrote them; their topics' ids go with every commit from now on."""
        wanted = {request.tp: (request.topic_id, request.destination_id) for request in requests}
        for tp, (topic_id, destination_id) in wanted.items():
            if topic_id is not None:
                self.topic_ids[tp.topic] = topic_id
            if destination_id is not None:
                self.destination_ids[tp.topic] = destination_id
        return {} if self.offsets is None else self.offsets.latest(wanted)

    def commit(self, positions: Mapping[TopicPartition, int], syncs: SyncLog, *, flush: bool = True) -> None:
        """Make durable what was produced and acknowledged so far, with ``syncs`` (where it
        landed) and, exactly-once, ``positions`` (the source offsets it reaches).

        At-least-once without ``flush``, the syncs are only enqueued: a resident copier's
        loop takes their acknowledgements with its own (they carry no token), and its last
        commit flushes."""
        if self.syncs_to is not None:
            write_syncs(self.producer, self.syncs_to, syncs, self.topic_ids, self.destination_ids)
        if self.offsets is None:
            if flush:
                self.producer.flush()
                self.producer.take_acks()  # the syncs': the next copy must not see them as its own
            return
        self._enqueue(positions)
        self.producer.commit()
        self.producer.take_acks()  # the offsets' and syncs': the next copy must not see them as its own
        self.offsets.record(dict(positions), self.topic_ids, self.destination_ids)

    def seal(self, positions: Mapping[TopicPartition, int], syncs: SyncLog) -> bool:
        """Exactly-once, without waiting: ``syncs`` and ``positions`` join the open transaction,
        which ends once its batches are acknowledged, while the copy goes on into the next
        (:meth:`TransactionalProducer.seal`); :meth:`sealed_committed` when it has. False when
        the transaction is empty: there is nothing to end."""
        if self.syncs_to is not None:
            write_syncs(self.producer, self.syncs_to, syncs, self.topic_ids, self.destination_ids)
        self._enqueue(positions)
        self.producer.seal()
        return self.producer.ending

    def _enqueue(self, positions: Mapping[TopicPartition, int]) -> None:
        """Exactly-once: ``positions`` join the open transaction, on the job's offsets topic."""
        assert isinstance(self.producer, TransactionalProducer) and self.offsets is not None
        now_ms = time.time_ns() // 1_000_000
        for some in chunks(sorted(positions)):  # bounded batches (:mod:`.own_batches`)
            self.producer.enqueue(self.offsets.partition,
                                  encode_offsets({tp: positions[tp] for tp in some}, now_ms, self.topic_ids,
                                                 self.destination_ids), len(some))

    def sealed_committed(self, positions: Mapping[TopicPartition, int]) -> None:
        """The sealed transaction (:meth:`seal`) with ``positions`` committed."""
        assert self.offsets is not None
        self.offsets.record(dict(positions), self.topic_ids, self.destination_ids)

    def abort(self, cause: BaseException) -> None:
        """What the producer holds belongs to a failed copy: dropped, and exactly-once its
        transaction aborted, before anything else is produced."""
        self.producer.abort(cause)


class LoopCommits:
    """The commits of a copy that runs on (see the module's docstring): when, and what each
    made durable."""

    def __init__(self, committer: Committer, loop: CopyLoop, interval_ms: int, trace=None):
        self.committer = committer
        self.loop = loop
        self.interval_s = interval_ms / 1000
        self.trace = trace
        self.positions: dict[TopicPartition, int] = {}
        """What the last commit made durable, per partition (what a waiting task may be told)."""
        self.last_commit = time.monotonic()
        self.last_syncs = self.last_commit
        self.last_full = float("-inf")
        """When every partition's position was last written (the first commit writes them all)."""
        self._sealed: dict[TopicPartition, int] | None = None
        """Exactly-once: the positions of the transaction sealed and not yet ended."""

    def reached(self, ends: Mapping[TopicPartition, int]) -> bool:
        """Whether every one of ``ends`` is committed (at-least-once: acknowledged, as the
        acknowledgements come, with no commit), or can never be: its topic is gone from under
        its copy (:attr:`~.range_copy.RangeCopy.gone`), which committed what it got."""
        copies = self.loop.copies
        if not self.committer.exactly_once:
            return all(tp in copies and (self.loop.durable(tp) >= end or copies[tp].gone) for tp, end in ends.items())
        return all(self.positions.get(tp, -1) >= end or (tp in copies and copies[tp].gone and not self._pending_of(tp))
                   for tp, end in ends.items())

    def _pending_of(self, tp: TopicPartition) -> bool:
        """Exactly-once: ``tp``'s copy routed more than the last commit holds."""
        return self.loop.position(tp) != self.positions.get(tp)

    def routed(self, ends: Mapping[TopicPartition, int]) -> bool:
        """Whether every one of ``ends`` is routed (a commit would make it durable)."""
        copies = self.loop.copies
        return all(self.loop.position(tp) >= end or copies[tp].gone for tp, end in ends.items() if tp in copies)

    def due(self, ends_waited: list[Mapping[TopicPartition, int]], now: float) -> bool:
        """Whether to commit now (see the module's docstring); never while a sealed transaction
        ends (one at a time)."""
        if self._sealed is not None:
            return False
        if not self._pending():
            # Idle, with the syncs of its last records still held: a copier that caught up
            # and then got nothing more would hold them for ever, and a failover or a group
            # translation would not place those records.
            return self.loop.holds_syncs and now - self.last_syncs >= SYNCS_INTERVAL_S
        since = now - self.last_commit
        if not self.committer.exactly_once:
            # At-least-once, a record is visible once acknowledged, and the acknowledgements
            # say how far the copy is durable: a commit only writes that down, with the offset
            # syncs, and flushes nothing (a flush would stop the copy until every batch in
            # flight is answered: docs/performance.md, "The copier's trace").
            return since >= self.interval_s
        if any(self.routed(ends) and not self.reached(ends) for ends in ends_waited):
            return True
        if self.loop.caught_up:
            return since >= self.interval_s
        return since >= CATCH_UP_COMMIT_S

    def _pending(self) -> bool:
        loop = self.loop
        if not self.committer.exactly_once:
            return any(loop.durable(tp) != self.positions.get(tp) for tp in loop.moved)
        return (any(loop.position(tp) != self.positions.get(tp) for tp in loop.moved)
                or not self.committer.producer.idle)

    def _positions(self, at) -> tuple[dict[TopicPartition, int], dict[TopicPartition, int]]:
        """Every partition's position as of now (``at``: the loop's position or durable offset),
        and what to write of it: those that moved since the last commit, or all of them every
        :data:`FULL_POSITIONS_S`."""
        positions = dict(self.positions)
        moved = {}
        for tp in self.loop.take_moved():
            if tp in self.loop.copies and (offset := at(tp)) != positions.get(tp):
                positions[tp] = moved[tp] = offset
        now = time.monotonic()
        if now - self.last_full >= FULL_POSITIONS_S:
            self.last_full = now
            return positions, positions
        return positions, moved

    def commit(self, *, last: bool = False) -> None:
        """Make everything routed so far durable, with the offset syncs once a second and at the
        ``last`` commit. Exactly-once, but for the ``last`` one, the transaction is sealed and
        the copy goes on while it ends (:meth:`Committer.seal`; :meth:`poll` sees it end).
        At-least-once, but for the ``last`` one, write down what the acknowledgements made
        durable, and flush nothing. The ``last`` commit waits for everything."""
        loop, step = self.loop, self.loop.step
        if self.committer.exactly_once and not last:
            positions, written = self._positions(loop.position)
            # The syncs of the records acknowledged so far (those of the sealed transaction's
            # last batches go with the next): where a record landed is known only then.
            if self.committer.seal(written, self._syncs(last)):
                self._sealed = positions
            else:
                self._committed(positions, time.time(), time.time())
            return
        flush = last or self.committer.exactly_once
        if flush:
            with step("flush"):
                loop.flush()  # acknowledged (a sealed transaction ended): the syncs know where the records landed
            self.poll()
            positions, written = self._positions(loop.position)
        else:
            positions, written = self._positions(loop.durable)
        syncs = self._syncs(last)
        began = time.time()
        with step("commit"):
            self.committer.commit(written, syncs, flush=flush)
        self._committed(positions, began, time.time())

    def poll(self) -> None:
        """Exactly-once: whether the sealed transaction ended (after each turn of the loop)."""
        if self._sealed is None:
            return
        for began, ended in self.committer.producer.take_ended():
            positions, self._sealed = self._sealed, None
            self.committer.sealed_committed(positions)
            self._committed(positions, began, ended)

    def _syncs(self, last: bool) -> SyncLog:
        """The offset syncs to write with this commit: once a second, and at the last."""
        now = time.monotonic()
        if last or now - self.last_syncs >= SYNCS_INTERVAL_S:
            self.last_syncs = now
            return self.loop.take_syncs()
        return SyncLog()

    def _committed(self, positions: dict[TopicPartition, int], began: float, ended: float) -> None:
        self.loop.committed(ended)  # exactly-once: the records are visible from now
        if self.trace is not None:
            self.trace.committed(began, ended)
        self.positions = positions
        self.last_commit = time.monotonic()
