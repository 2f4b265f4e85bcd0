"""Route one source batch to destination partitions, opening it only when keys force us to.

A batch is *forwardable* when its bytes can go to a destination as they are: magic 2,
contiguous offsets, and the codec the policy asks for (``compression=None`` keeps any).
The first matching row wins (``docs/routing.md`` explains each one):

===  ===================================================  ==============  =========================
row  source batch                                         class           destination partition
===  ===================================================  ==============  =========================
0    data of an aborted transaction (``aborted``)         ABORTED         none
1    control batch (transaction marker)                   DROPPED         none
2    forwardable, ``preserve``                            PASSED_THROUGH  the source partition
3    forwardable, ``by-key``, no-keys flag (seed 000)     PASSED_THROUGH  source partition mod N
4    no records left (compaction can empty a batch)       DROPPED         none
5    forwardable, every record routes to one partition    INSPECTED       that partition
6    anything else: v0/v1, offset holes, another codec,   REBUILT         ``preserve``: the source
     records routing to several partitions                                partition; ``by-key``:
                                                                          each record's own
===  ===================================================  ==============  =========================

Rows 4-6 decompress and decode the records. Under ``by-key`` a keyed record routes to ``partition_for_key(key, N)`` and a null-keyed one
to the source partition mod N. Forwarded batches (rows 2, 3, 5) are copies of the source
bytes with the destination rewrites applied in place (:func:`_forward`); rebuilt ones are
built clean. Either way each outgoing batch has base offset 0, no producer state, no leader
epoch and CreateTime, so the destination assigns offsets and, for LogAppendTime topics, its
own timestamps (seeds 000 and 001).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

import kcodecs
from kcodecs import Batch, Record, TimestampType, V2Batch, V2Header

from .murmur2 import partition_for_key
from .policy import Partitioning, RouteClass, RoutingError, RoutingPolicy

__all__ = ["Outgoing", "Routed", "route_batch", "passes_through", "home_partition"]


@dataclass(slots=True)
class Outgoing:
    """One v2 batch for one destination partition, ready to produce. Built for every batch,
    so slots and not frozen (see :class:`Routed`)."""

    partition: int
    data: bytearray | memoryview
    """A new ``bytearray``, or with ``in_place`` a view of the caller's buffer."""
    records: int


@dataclass(slots=True)
class Routed:
    """What became of one source batch. Built for every batch, so slots and not frozen: a
    frozen dataclass's ``__init__`` sets each field through ``object.__setattr__``, several
    times the cost (figures: docs/performance.md, "Small costs behind choices in the code")."""

    route: RouteClass
    outgoing: tuple[Outgoing, ...]
    records: int
    """Records in the source batch."""
    source_bytes: int
    """Size of the source batch, log overhead included."""


def route_batch(batch: Batch, source_partition: int, policy: RoutingPolicy, *, in_place: bool = False,
                aborted: bool = False, producer_restamps: bool = False) -> Routed:
    """Decide the class of ``batch`` (read from ``source_partition``) and build its outgoing batches.

    ``aborted`` says that the batch belongs to a transaction the source aborted: one batch
    cannot tell, its fetch's :class:`~.transactions.ReadCommitted` can.

    The source buffer is never written, unless ``in_place``: then a forwarded batch is rewritten
    where it lies (in the caller's own writable copy, e.g. of a whole fetch response) and goes
    out as a view of it. That saves a copy and an allocation per batch; the allocation costs
    more, as glibc hands buffers of 128 KiB and up straight from (and back to) the OS.

    ``producer_restamps`` says that every outgoing batch goes to a producer that makes it what
    a Kafka producer sends, as the copy engine's :class:`~mirror.kafka.IdempotentProducer`
    does: base offset 0, no leader epoch, CreateTime, no delete horizon, and its own producer
    id, epoch, sequence and transactional bit (one :func:`kcodecs.stamp_v2`, CRC recomputed).
    Those are all of a forward's rewrites, so a forwarded batch then goes out as the source
    wrote it, for that producer to rewrite: patching it here first would check the header
    and write the same fields twice, and compute the CRC twice for every batch whose bits it
    changes (a LogAppendTime source, or with the source's producer state cleared, every
    batch of an idempotent source producer, Java's default since Kafka 3.0).

    Raises :class:`~kcodecs.CorruptBatchError` for a batch that fails its CRC or does not
    decode, and :class:`RoutingError` for a source partition the policy cannot place.
    """
    home = home_partition(source_partition, policy)
    # The rewrites recompute the CRC, which would launder a corrupt batch: check it first.
    if isinstance(batch, V2Batch):
        # One read of the header serves the check and every question below: with each
        # question a read of its own, a forwarded 16 KiB batch spent more in them than in its CRC.
        header = batch.checked_header()
        count, control, passing = header.record_count, header.is_control, passes_through(header, policy)
        forwardable = passing or _forwardable(header, policy)
    else:
        batch.validate(max_size=policy.max_decompressed_size)
        count, control, forwardable, passing = batch.record_count or 0, batch.is_control, False, False
    if aborted:
        return Routed(RouteClass.ABORTED, (), count, batch.size)
    if control:
        # Transaction markers belong to the source's transactions; the destination has none.
        return Routed(RouteClass.DROPPED, (), count, batch.size)
    if passing:
        return _forward(batch, home, RouteClass.PASSED_THROUGH, count, in_place, producer_restamps)
    if forwardable and policy.partitioning is Partitioning.BY_KEY:
        # The keys alone decide whether the batch can go as it is, and the first key that
        # disagrees ends the look: the batch is then decoded in full and rebuilt.
        shared = _shared_target(batch.keys(max_size=policy.max_decompressed_size), home, policy.destination_partitions)
        if shared == _EMPTY:
            return Routed(RouteClass.DROPPED, (), 0, batch.size)
        if shared != _SPLIT:
            return _forward(batch, shared, RouteClass.INSPECTED, count, in_place, producer_restamps)
    records = _decode(batch, policy.max_decompressed_size)
    if not records:
        return Routed(RouteClass.DROPPED, (), 0, batch.size)
    if policy.partitioning is Partitioning.PRESERVE:
        targets = [home] * len(records)
    else:
        targets = _key_targets((record.key for record in records), home, policy.destination_partitions)
    return _rebuild(batch, records, targets, policy)


def home_partition(source_partition: int, policy: RoutingPolicy) -> int:
    """Where unkeyed records (and everything, under ``preserve``) go."""
    if source_partition < 0:
        raise RoutingError(f"source partition {source_partition} is negative")
    if policy.partitioning is Partitioning.BY_KEY:
        return source_partition % policy.destination_partitions
    if source_partition >= policy.destination_partitions:
        raise RoutingError(
            f"partitioning 'preserve' needs partition {source_partition} at the destination, "
            f"which has only {policy.destination_partitions}"
        )
    return source_partition


def passes_through(header: V2Header, policy: RoutingPolicy) -> bool:
    """Rows 2 and 3 for a v2 batch whose header was checked and which was not aborted: it goes
    as it is, to its :func:`home_partition`. Nearly every batch of a mirror, so the copy engine
    asks this first and builds its outgoing batch itself, without :func:`route_batch`."""
    return not header.is_control and _forwardable(header, policy) and (
        policy.partitioning is Partitioning.PRESERVE or header.has_no_keys_flag)


def _forwardable(header: V2Header, policy: RoutingPolicy) -> bool:
    """Whether a v2 batch's bytes may go to the destination as they are (header rewrites aside).
    v0/v1 never may: Produce v3+ carries magic 2 only (KIP-98)."""
    if not header.has_contiguous_offsets:
        # Compacted. Kafka's LogValidator rejects a compressed batch whose inner offsets are
        # not incremental (seed 001 weighed reassigning them instead), and would keep the
        # holes of an uncompressed one; our broker rejects both.
        return False
    return policy.compression is None or policy.compression.value == header.codec_id


def _decode(batch: Batch, max_size: int) -> list[Record]:
    """The batch's records with the timestamps a forwarded copy of it would show.

    Under LogAppendTime ``records()`` gives every record the source broker's append time,
    while a forwarded copy, its bit cleared, shows each record's CreateTime again. Reading a
    cleared copy makes rebuilt records carry those same CreateTimes.
    """
    if batch.timestamp_type is TimestampType.LOG_APPEND_TIME:
        copy = bytearray(batch.raw)
        kcodecs.clear_log_append_time(copy)
        batch = kcodecs.read_batch(copy, position=batch.position)
    return list(batch.records(max_size=max_size))


_EMPTY = -1
_SPLIT = -2


def _shared_target(keys: Iterable[bytes | None], home: int, partitions: int) -> int:
    """The partition every key routes to; ``_SPLIT`` as soon as two differ, ``_EMPTY`` for no records."""
    shared = _EMPTY
    seen: set[bytes] = set()
    for key in keys:
        if key is None:
            target = home
        elif key in seen:
            continue
        else:
            seen.add(key)
            target = partition_for_key(key, partitions)
        if shared == _EMPTY:
            shared = target
        elif target != shared:
            return _SPLIT
    return shared


def _key_targets(keys: Iterable[bytes | None], home: int, partitions: int) -> list[int]:
    """Each record's destination partition; keys repeat within a batch, so each is hashed once."""
    seen: dict[bytes, int] = {}
    targets = []
    for key in keys:
        if key is None:
            targets.append(home)
            continue
        target = seen.get(key)
        if target is None:
            target = seen[key] = partition_for_key(key, partitions)
        targets.append(target)
    return targets


def _forward(batch: Batch, partition: int, route: RouteClass, count: int, in_place: bool,
             producer_restamps: bool) -> Routed:
    """The source bytes (a copy, or themselves ``in_place``) with the destination rewrites; the
    payload is untouched.

    Base offset 0 and no leader epoch: the destination assigns both (KIP-31). No producer
    state: the source's ids and sequences mean nothing to the destination, and a
    transactional batch without a producer id is invalid. No LogAppendTime bit: the
    destination stamps its own time where its topic asks for it. No delete horizon
    (KIP-534): it is when the source's cleaner may drop the batch's tombstones; at the
    destination they have just arrived, and its own cleaner gives them its own
    ``delete.retention.ms``. With ``producer_restamps`` the producer makes all of these
    rewrites, with its own producer state, so none is made here.
    """
    data = batch.raw if in_place else bytearray(batch.raw)
    if not producer_restamps:
        kcodecs.stamp_v2(data, base_offset=0, partition_leader_epoch=kcodecs.NO_PARTITION_LEADER_EPOCH,
                         clear_producer_state=True, clear_delete_horizon=True)
    return Routed(route, (Outgoing(partition, data, count),), count, batch.size)


def _rebuild(batch: Batch, records: list[Record], targets: list[int], policy: RoutingPolicy) -> Routed:
    """One new v2 batch per destination partition, records in source order within each."""
    groups: dict[int, list[Record]] = {}
    for record, target in zip(records, targets):
        groups.setdefault(target, []).append(record)
    # Compression.NONE is 0, so test for None rather than truthiness.
    codec = batch.compression if policy.compression is None else policy.compression
    outgoing = tuple(
        Outgoing(
            partition,
            # build_batch sets the no-keys flag exactly when this group has no key.
            bytearray(kcodecs.build_batch(group, compression=codec, base_offset=0,
                                          timestamp_type=TimestampType.CREATE_TIME)),
            len(group),
        )
        for partition, group in sorted(groups.items())
    )
    return Routed(RouteClass.REBUILT, outgoing, len(records), batch.size)
