"""Taking over from a stopped MirrorMaker 2: where it left each partition, what it may have
written twice, and how the groups it translated keep translating (issue 50).

MirrorMaker 2 leaves on the clusters all a successor needs:

- its Connect offsets topic on the destination (``mm2-offsets.<source>.internal``): per source
  partition, key ``["MirrorSourceConnector", {"cluster": "A", "partition": 1, "topic": "live"}]``
  and value ``{"offset": 29161}``, the last source offset it copied (``MirrorUtils``), so the
  copy goes on from one more;
- its offset syncs (``mm2-offset-syncs.<target>.internal``, on the source unless it was told
  otherwise): record ``upstreamOffset`` of a source partition is at destination offset
  ``offset`` of the same partition number (``OffsetSync``, Kafka's ``Struct`` encoding: a
  string is an int16 length and UTF-8, then int32 partition; the value two int64s);
- its Connect group on the destination (``<source>-mm2``), with a member per running worker.

At-least-once, MM2 writes the offsets topic only every ``offset.flush.interval.ms``, so
records it copied after the last flush are copied again: :class:`TakeoverPlan` bounds how many
per partition, from the destination's end and the last offset sync at or below the flushed
offset. Exactly-once (KIP-618) the offsets commit in the records' transaction, so the start is
exact.

Groups: kmirror translates a group's source offsets with its own offset syncs, which start
where it took over. Below that, the records are MM2's, and :func:`seeded_syncs` turns MM2's
offset syncs into kmirror's (the record synced exact, the records between two syncs a bound:
at or after the one before), so a group that committed before the takeover is translated as
MM2's checkpoints translated it (at most one record lower) and never skips; a group MM2 had
already committed further at the destination keeps its offsets (translation never moves one
backwards).
"""

from __future__ import annotations

import json
import logging
import struct
import time
from dataclasses import dataclass, field
from typing import Iterable, Mapping

from kcodecs import KMirrorError, Record

from ..config import MirrorConfig
from ..kafka import IdempotentProducer, KafkaClient, TopicPartition
from ..kafka.groups import GroupAdmin
from .commit import Committer
from .offset_syncs import SyncLog, offset_syncs_topic
from .topic_tail import CommittedTail

__all__ = ["take_over", "MirrorMakerRunningError", "TakeoverError", "TakeoverPlan", "plan_takeover", "connect_offsets",
           "mm2_offset_syncs", "seeded_syncs", "check_stopped", "SOURCE_CONNECTOR"]

log = logging.getLogger(__name__)

SOURCE_CONNECTOR = "MirrorSourceConnector"
"""The connector whose offsets say where MM2's copy is (dedicated mode names it after its class)."""
LEAVE_S = 15.0
"""How long MM2's Connect group may keep members before kmirror refuses: Connect's
``session.timeout.ms`` (10 s by default), and a heartbeat, for a worker that died uncleanly."""
PROBE_S = 5.0
"""How long MM2's offsets topic is watched for a write: a MirrorMaker 2 that left its group but
still runs (another group id) would move it."""
_READ_WAIT_S = 120.0
"""How long an open transaction may hide MM2's offsets: a killed exactly-once MM2 leaves one,
which the destination aborts after its ``transaction.timeout.ms`` (Connect's default 60 s)."""


class MirrorMakerRunningError(KMirrorError):
    """MirrorMaker 2 still runs: two mirrors would copy the same records into the same topics."""


class TakeoverError(KMirrorError):
    """MirrorMaker 2's state on the clusters is not what MirrorMaker 2 writes."""


@dataclass(frozen=True)
class TakeoverPlan:
    """Where the copy starts in each partition MM2 copied, and what may be copied twice."""

    starts: dict[TopicPartition, int]
    """Source partition -> the next source offset to copy (MM2's last copied, plus one)."""
    duplicates: dict[TopicPartition, int] = field(default_factory=dict)
    """Source partition -> records MM2 wrote past its flushed offset, at most (at-least-once MM2)."""
    syncs: SyncLog = field(default_factory=SyncLog)
    """MM2's offset syncs as kmirror's, for the groups (:func:`seeded_syncs`)."""
    unrecorded: dict[TopicPartition, int] = field(default_factory=dict)
    """Source partition -> records at the destination though MM2 recorded no offset for it (it
    copied them and was stopped before its first offset flush, or another writer did)."""


def check_stopped(destination: KafkaClient, group: str, offsets_topic: str, *, leave_s: float = LEAVE_S,
                  probe_s: float = PROBE_S, sleep=time.sleep, clock=time.monotonic) -> None:
    """Raise :class:`MirrorMakerRunningError` if MM2's Connect group still has members after
    ``leave_s``, or its offsets topic grows while watched for ``probe_s``."""
    _wait_for_members_to_leave(GroupAdmin(destination), group, leave_s, sleep, clock)
    partitions = _partitions(destination, offsets_topic)
    if not partitions:
        return
    before = destination.list_offsets(partitions, "latest")
    sleep(probe_s)
    after = destination.list_offsets(partitions, "latest")
    if after != before:
        moved = sum(after[tp] - before[tp] for tp in partitions)
        raise MirrorMakerRunningError(
            f"MirrorMaker 2 still runs: its offsets topic {offsets_topic} on the destination grew by {moved} "
            f"records in {probe_s:g} s, though its Connect group {group} is empty; stop every MirrorMaker 2 "
            f"of this flow first")


def _wait_for_members_to_leave(admin: GroupAdmin, group: str, leave_s: float, sleep, clock) -> None:
    """Wait while MM2's Connect group has members, up to ``leave_s``: an operator starts kmirror
    right after stopping MM2, and a worker that was killed, or whose clean stop outlived its
    service manager's patience, stays a member until its session times out."""
    deadline = clock() + leave_s
    there = admin.describe(group)
    if there.members:
        log.info("MirrorMaker 2's Connect group %s on the destination has %d members (%s): waiting up to %g s "
                 "for them to leave", group, there.members, there.state, leave_s)
    while there.members:
        if clock() >= deadline:
            raise MirrorMakerRunningError(
                f"MirrorMaker 2 still runs: its Connect group {group} on the destination still has {there.members} "
                f"members ({there.state}) after {leave_s:g} s; stop it first (a worker killed without a clean stop "
                f"leaves the group after Connect's session timeout, 10 s by default)")
        sleep(1.0)
        there = admin.describe(group)


def connect_offsets(destination: KafkaClient, topic: str, source_alias: str) -> dict[TopicPartition, int]:
    """MM2's next source offset per partition: its last copied, from its Connect offsets topic
    (every partition read to its end, read_committed, the latest value of each key)."""
    latest: dict[TopicPartition, int] = {}
    for tp in _partitions(destination, topic):
        CommittedTail(destination, tp, max_wait_s=_READ_WAIT_S).update_latest(
            latest, lambda record: _connect_offset(record, source_alias, tp))
    return {tp: offset + 1 for tp, offset in latest.items()}


def _connect_offset(record: Record, source_alias: str, where: TopicPartition) -> tuple:
    try:
        connector, partition = json.loads(bytes(record.key or b""))
        if connector != SOURCE_CONNECTOR or partition.get("cluster") != source_alias:
            return None, None  # another connector's or cluster's: a tombstone of nothing
        tp = TopicPartition(str(partition["topic"]), int(partition["partition"]))
        if record.value is None:
            return tp, None
        return tp, int(json.loads(bytes(record.value))["offset"])
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise TakeoverError(f"{where} offset {record.offset} is not a Connect source offset of MirrorMaker 2: "
                            f"key {record.key!r}, value {record.value!r}") from exc


def mm2_offset_syncs(client: KafkaClient, topic: str) -> dict[TopicPartition, list[tuple[int, int]]]:
    """MM2's offset syncs, ``(upstream, downstream)`` per source partition in the order written."""
    syncs: dict[TopicPartition, list[tuple[int, int]]] = {}
    for tp in _partitions(client, topic):
        for record in CommittedTail(client, tp, max_wait_s=_READ_WAIT_S).read_to_end():
            source, upstream, downstream = _offset_sync(record, tp)
            syncs.setdefault(source, []).append((upstream, downstream))
    return syncs


def _offset_sync(record: Record, where: TopicPartition) -> tuple[TopicPartition, int, int]:
    key, value = bytes(record.key or b""), bytes(record.value or b"")
    try:
        (length,) = struct.unpack_from(">h", key, 0)
        topic = key[2:2 + length].decode()
        (partition,) = struct.unpack_from(">i", key, 2 + length)
        upstream, downstream = struct.unpack(">qq", value)
    except (struct.error, UnicodeDecodeError) as exc:
        raise TakeoverError(f"{where} offset {record.offset} is not a MirrorMaker 2 offset sync: "
                            f"key {record.key!r}, value {record.value!r}") from exc
    if length < 0 or len(key) != 2 + length + 4:
        raise TakeoverError(f"{where} offset {record.offset} is not a MirrorMaker 2 offset sync: key {record.key!r}")
    return TopicPartition(topic, partition), upstream, downstream


def seeded_syncs(source: TopicPartition, destination: TopicPartition, start: int, syncs: Iterable[tuple[int, int]],
                 log_start: int, end: int, into: SyncLog) -> None:
    """MM2's copy of ``source`` below ``start``, as kmirror's offset syncs into ``destination``:
    each synced record exact; the records after it, up to the next, a bound at the offset after
    it; the records before the first sync a bound at the destination's log start. Spans with
    no destination offsets left (``base >= end``) say nothing and are left out."""
    kept = sorted({(u, d) for u, d in syncs if 0 <= u < start and log_start <= d < end})
    previous_last, previous_base = -1, log_start
    for upstream, downstream in kept:
        if upstream <= previous_last:
            continue
        if previous_last + 1 < upstream and previous_base < downstream:
            into.add(source, previous_last + 1, upstream - 1, destination, previous_base, downstream, False)
        into.add(source, upstream, upstream, destination, downstream, downstream + 1, True)
        previous_last, previous_base = upstream, downstream + 1
    if previous_last + 1 < start and previous_base < end:
        into.add(source, previous_last + 1, start - 1, destination, previous_base, end, False)


def plan_takeover(destination: KafkaClient, routes: Mapping[TopicPartition, TopicPartition], *, source_alias: str,
                  offsets_topic: str, offset_syncs: KafkaClient, offset_syncs_topic: str,
                  exactly_once: bool) -> TakeoverPlan:
    """Where each mirrored partition MM2 copied goes on from, and what it may have written twice.

    ``routes``: every mirrored source partition -> its destination partition (the same number,
    as MM2 copies). MM2's offset syncs are read from ``offset_syncs`` (the source or the
    destination)."""
    starts = {tp: offset for tp, offset in connect_offsets(destination, offsets_topic, source_alias).items()
              if tp in routes}
    present = destination.topics()
    missing = sorted({routes[tp].topic for tp in starts if routes[tp].partition >= present.get(routes[tp].topic, 0)})
    if missing:
        raise TakeoverError(f"MirrorMaker 2 recorded offsets for partitions its destination topics do not have "
                            f"({', '.join(missing)}): was it another flow, or were they deleted?")
    there = [d for d in routes.values() if d.partition < present.get(d.topic, 0)]
    ends = destination.list_offsets(there, "latest") if there else {}
    log_starts = destination.list_offsets(there, "earliest") if there else {}
    history = mm2_offset_syncs(offset_syncs, offset_syncs_topic) if starts else {}
    plan = TakeoverPlan(starts)
    for tp, start in starts.items():
        to = routes[tp]
        seeded_syncs(tp, to, start, history.get(tp, ()), log_starts[to], ends[to], plan.syncs)
        if not exactly_once:
            below = [d for u, d in history.get(tp, ()) if u < start]
            floor = max(below) + 1 if below else log_starts[to]
            plan.duplicates[tp] = max(0, ends[to] - floor)
    for tp, to in routes.items():
        if tp not in starts and ends.get(to, 0) > log_starts.get(to, 0):
            plan.unrecorded[tp] = ends[to] - log_starts[to]
    return plan


def _partitions(client: KafkaClient, topic: str) -> list[TopicPartition]:
    return [TopicPartition(topic, p) for p in range(client.topics().get(topic, 0))]


def take_over(config: MirrorConfig, source: KafkaClient, destination: KafkaClient,
              routes: Mapping[str, str]) -> dict[TopicPartition, int]:
    """The driver's part of a takeover, before the job's first micro-batch (and after
    :func:`check_stopped`): where each partition goes on from (logged, with what may be
    copied twice), MM2's offset syncs written as the job's own. ``routes``: source topic ->
    destination topic."""
    takeover = config.takeover
    counts = source.topics()
    partitions = {TopicPartition(topic, p): TopicPartition(to, p) for topic, to in routes.items()
                  for p in range(counts.get(topic, 0))}
    plan = plan_takeover(destination, partitions, source_alias=config.clusters.source_cluster_alias,
                         offsets_topic=config.mm2_offsets_topic,
                         offset_syncs=source if takeover.offset_syncs_location == "source" else destination,
                         offset_syncs_topic=config.mm2_offset_syncs_topic, exactly_once=takeover.exactly_once)
    start = config.streaming.starting_offsets
    if plan.starts:
        log.info("taking over from MirrorMaker 2 (%s): %d partitions go on just after the last offset it recorded "
                 "(%s); partitions it never copied start at %s",
                 "exactly-once" if takeover.exactly_once else "at-least-once", len(plan.starts),
                 ", ".join(f"{tp} at {offset}" for tp, offset in sorted(plan.starts.items())), start)
    else:
        log.warning("taking over from MirrorMaker 2: %s on the destination holds no offset of a mirrored partition; "
                    "starting at %s", config.mm2_offsets_topic, start)
    if plan.unrecorded:
        log.warning("MirrorMaker 2 recorded no offset for %d partitions whose destination holds records (%d in all: "
                    "%s): they start at %s%s", len(plan.unrecorded), sum(plan.unrecorded.values()),
                    ", ".join(f"{tp}: {n}" for tp, n in sorted(plan.unrecorded.items())), start,
                    ", which copies those records again" if start == "earliest" else "")
    if plan.starts and not takeover.exactly_once:
        log.warning("MirrorMaker 2 ran at-least-once: records it wrote after its last offset flush are copied "
                    "again, at most %d in all (%s)", sum(plan.duplicates.values()),
                    ", ".join(f"{tp}: {n}" for tp, n in sorted(plan.duplicates.items()) if n) or "none")
    if plan.syncs.by_source():
        # Written as the job's own commits write theirs: by the Committer, idempotently.
        producer = IdempotentProducer(destination, timeout_ms=int(config.clusters.destination.request_timeout_s * 1000))
        try:
            Committer(producer, TopicPartition(offset_syncs_topic(config.job_name), 0)).commit({}, plan.syncs)
        finally:
            producer.close()
    return plan.starts
