"""``kmirror-kafka``: a Python streaming data source whose rows are copy descriptors, not records.

Name
    ``kmirror-kafka``
Options
    ``configFile``: path on the driver's machine of the job's :class:`~mirror.config.MirrorConfig`
    as JSON (source cluster, topic selection, starting offsets, rate limits), passwords
    included; a file because options show in Spark's plans and logs.
    ``startsFile``: optional path on the driver's machine of the job's
    :class:`~mirror.spark.offsets.Bounds` (JSON): where a job with no checkpoint starts those
    partitions instead of ``starting_offsets`` (taking over from MirrorMaker 2:
    :mod:`mirror.engine.takeover`), and what no micro-batch copies, checkpoint or not (a
    failback's promotion points and skipped spans: :mod:`mirror.engine.failback`).
    ``stopFile``: optional path on the driver's machine; once it exists the reader plans no new
    micro-batch, so the job can stop between micro-batches.
    ``rewindsFile``: optional path on the driver's machine of the destination losses whose
    source topics are copied again from their log start (:mod:`.rewinds`).
Schema
    ``topic string, partition int, start_offset long, end_offset long, task int, floor long``: one row per
    source partition range of the micro-batch, and one Spark partition (one task) per group of
    ranges that share a source leader (:mod:`.grouping`), about ``copy_tasks`` of them, numbered
    from 0 in ``task`` (exactly-once names each task's transactional id after it). The bytes never
    enter Spark: moving payloads through rows costs about 10x more than copying inside the
    executor, so ``foreachBatch`` hands each task's rows to :func:`mirror.engine.copy_ranges`,
    which fetches and produces on the executor. ``floor`` is the job's starting offset in the
    partition (-1 if unknown): nothing below it is copied, not even of the batch that holds it.
Examples
    >>> spark.dataSource.register(KafkaRangeSource)
    >>> path.write_text(config.model_dump_json(context=REVEAL_SECRETS))
    >>> spark.readStream.format("kmirror-kafka").option("configFile", str(path)).load()

Offsets are ``{"topic/partition": next_offset}``, with each source topic's id (:mod:`mirror.spark.offsets`).
A topic made again under its name (another id, :mod:`mirror.engine.topic_identity`) is followed
from its log start, as a new topic is: its old offsets leave the plan, and its partitions show
up at their earliest offsets with nothing to copy in that micro-batch, under the new id; no
range spans two ids. ``--on-topic-recreated fail`` stops the job instead. A partition
that appears while the job runs (a new matching topic, or more partitions) first shows up at
its earliest offset with nothing to copy, so the checkpoint holds where it starts before any
of it is copied. Under ``Trigger.AvailableNow`` the latest offsets are pinned when the query
starts and partitions found later wait for the next run.

The latest offsets are the source's last stable offsets (ListOffsets read_committed): the
copy reads committed data only (issue 10), and nothing past the first offset of a transaction
still open. Without open transactions they are the high watermarks.
"""

from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable, Iterator, TypeVar

from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxBytes,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)

from kcodecs import KMirrorError

from ..config import MirrorConfig
from ..logs import configure_spark_process
from ..kafka.client import READ_COMMITTED
from ..engine.own_topics import mirrored
from ..engine.topic_identity import check_identities, follow_or_fail
from ..kafka.types import TopicListing, TopicPartition
from .grouping import group_ranges
from .offsets import Bounds, Offsets, cap_end_offsets, format_offsets, parse_offsets, parse_rewound, parse_topic_ids
from .outage import Outage, OutageInterrupted, is_outage, ride_out
from .rewinds import REWINDS_FILE_OPTION, read_rewinds, unrewound

__all__ = ["KafkaRangeSource", "KafkaRangeReader", "CopyRange", "CopyGroup", "groups_of_rows", "SCHEMA",
           "STOP_FILE_OPTION", "STARTS_FILE_OPTION", "CONFIG_FILE_OPTION", "REWINDS_FILE_OPTION"]

log = logging.getLogger(__name__)

SCHEMA = "topic string, partition int, start_offset long, end_offset long, task int, floor long, topic_id string"
STOP_FILE_OPTION = "stopFile"
STARTS_FILE_OPTION = "startsFile"
CONFIG_FILE_OPTION = "configFile"
T = TypeVar("T")
_STOP_POLL_S = 0.2
PROBE_BYTES = 64 * 1024
"""Bytes fetched to estimate a partition's bytes per offset when a byte limit is set."""


@dataclass(frozen=True)
class CopyRange:
    """Offsets ``[start, end)`` of one source partition: one output row."""

    topic: str
    partition: int
    start: int
    end: int
    floor: int = -1
    """The job's starting offset in the partition, -1 if unknown (:attr:`KafkaRangeReader.floors`)."""
    topic_id: str = ""
    """The planned source topic's id, "" from a cluster without ids (:mod:`mirror.engine.topic_identity`)."""

    @property
    def tp(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)


@dataclass
class CopyGroup(InputPartition):
    """The ranges one Spark task copies together; they share a source leader (:mod:`.grouping`)."""

    index: int
    ranges: tuple[CopyRange, ...]


def groups_of_rows(rows: Iterable[tuple]) -> list[CopyGroup]:
    """The groups whose rows (:data:`SCHEMA`, as :meth:`KafkaRangeReader.read` writes them) are
    among ``rows``, in task order."""
    ranges: dict[int, list[CopyRange]] = {}
    for topic, partition, start, end, task, floor, topic_id in rows:
        ranges.setdefault(task, []).append(CopyRange(topic, partition, start, end, floor, topic_id))
    return [CopyGroup(task, tuple(found)) for task, found in sorted(ranges.items())]


class KafkaRangeSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return "kmirror-kafka"

    def schema(self) -> str:
        return SCHEMA

    def streamReader(self, schema) -> "KafkaRangeReader":
        config = MirrorConfig.model_validate_json(Path(self.options[CONFIG_FILE_OPTION]).read_text())
        starts = self.options.get(STARTS_FILE_OPTION)
        rewinds = self.options.get(REWINDS_FILE_OPTION)
        return KafkaRangeReader(config, stop_file=self.options.get(STOP_FILE_OPTION),
                                bounds=Bounds.decode(Path(starts).read_text()) if starts else None,
                                rewinds_file=Path(rewinds) if rewinds else None)


class KafkaRangeReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Plans ranges on the driver side; :meth:`read` (on executors) only emits the descriptor."""

    def __init__(self, config: MirrorConfig, *, stop_file: str | None = None, bounds: Bounds | None = None,
                 rewinds_file: Path | None = None):
        configure_spark_process(logging.INFO)  # the planner's own process: its outage lines
        self.config = config
        self.stop_file = stop_file
        self.bounds = bounds or Bounds()
        """Where the job starts the partitions named, instead of ``starting_offsets``, and what
        it never copies, checkpoint or not (:class:`~.offsets.Bounds`): a job with a checkpoint
        from before a failover jumps to the flow's promotion points."""
        self._parent = os.getppid()
        """The process that started this planner's (Spark's): if it dies, so does the job."""
        self._client = None
        self._target: Offsets | None = None
        self.rewinds_file = rewinds_file
        """The driver's destination losses (:mod:`.rewinds`), None: none are followed."""
        self._rewinds: tuple[tuple[int, int, int] | None, dict[str, str]] = (None, {})
        self._gone: set[str] = set()
        """Planned topics the source no longer lists, said once (:meth:`_say_gone`)."""
        self.floors: Offsets = {}
        """Where the job started in each partition, as :meth:`initialOffset` found it: no record
        below is copied, not even of the batch that holds it. A time start is found record by
        record (Kafka's time index), so it often lies inside a batch, and the copy, which
        takes whole batches, must leave that batch's earlier records out; the first
        micro-batch's range may even end inside that batch (a rate limit), and a later one
        copies it. Known to the run of the job that started it: Spark asks a reader for
        initial offsets only when no micro-batch was committed yet (and again, to the same
        time the same offsets, when the first one is replayed). A job restarted after its
        first micro-batch copies the batch that holds its starting offset whole if it was not
        copied yet, which only a rate limit inside that very batch can leave to do."""

    @property
    def client(self):
        if self._client is None:
            from ..engine.clients import client_for

            self._client = client_for(self.config.clusters.source, self.config.limits.retry)
        return self._client

    def _listings(self) -> dict[str, TopicListing]:
        from ..engine.topics import selected_listings

        return selected_listings(self.config, self.client)

    def _partitions(self, listings: dict[str, TopicListing] | None = None) -> list[TopicPartition]:
        listings = self._listings() if listings is None else listings
        return [TopicPartition(topic, p) for topic, listing in sorted(listings.items()) for p in range(listing.partitions)]

    def _offsets(self, tps: list[TopicPartition], which: str) -> Offsets:
        """Read committed, as the copy reads: "latest" is where a read_committed fetch stops."""
        return self.client.list_offsets(tps, which, isolation_level=READ_COMMITTED) if tps else {}

    def initialOffset(self) -> dict:
        listings = self._waiting(self._listings)
        floors = self._waiting(lambda: self._offsets(self._partitions(listings), self.config.streaming.starting_offsets))
        self.floors = self.bounds.past(floors)
        # A new plan starts where it is told to: no loss before it is planned again.
        return format_offsets(self.floors, check_identities({}, listings).ids, self._read_rewinds())

    def prepareForTriggerAvailableNow(self) -> None:
        tps = self._waiting(self._partitions)
        self._target = self._waiting(lambda: self._offsets(tps, "latest"))
        log.info("copying up to the current end of %d source partitions, then stopping", len(tps))

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        if self._stopping():
            return start  # stopping: no new micro-batch
        try:
            return self._waiting(lambda: self._latest(start, limit))
        except OutageInterrupted:
            return start

    def _latest(self, start: dict, limit: ReadLimit) -> dict:
        begun = parse_offsets(start)
        listings = self._listings()
        identities = check_identities(parse_topic_ids(start), listings)
        followed = follow_or_fail(identities, self.config.delivery.on_topic_recreated)
        rewinds = self._read_rewinds()
        rewound = parse_rewound(start)
        again = unrewound(rewinds, rewound)
        rewound.update({topic: rewinds[topic] for topic in again})
        followed |= again
        if followed:  # the old topic's offsets mean nothing in the new one: it starts as a new topic
            begun = {tp: offset for tp, offset in begun.items() if tp.topic not in followed}
            self.floors = {tp: floor for tp, floor in self.floors.items() if tp.topic not in followed}
            self.bounds = self.bounds.without(followed)
        begun = self.bounds.past(begun)
        self._say_gone({tp.topic for tp in begun if tp.topic not in listings and mirrored(self.config, tp.topic)},
                       identities.ids)
        tps = self._partitions(listings) if self._target is None else list(self._target)
        known = [tp for tp in tps if tp in begun]
        latest = self._offsets(known, "latest")
        if self._target is not None:
            latest = {tp: min(end, self._target[tp]) for tp, end in latest.items()}
        ends = dict(begun)  # partitions gone from metadata keep their offsets
        ends.update(self.bounds.cut(begun, self._limit(begun, latest, limit)))
        fresh = [tp for tp in tps if tp not in begun]
        if fresh:
            earliest = self._offsets(fresh, "earliest")
            ends.update(self.bounds.past(earliest))
            new = [tp for tp in fresh if tp.topic not in followed]
            if new:
                log.info("new source partitions, starting at their earliest offsets: %s", ", ".join(map(str, new)))
            for topic in sorted(again):
                log.info("source topic %s: copied again from its log start (partition %s), since its destination "
                         "topic was lost", topic, ", ".join(f"{tp.partition} from {offset}"
                                                            for tp, offset in sorted(earliest.items()) if tp.topic == topic))
            for recreated in identities.recreated:
                restarts = ", ".join(f"{tp.partition} from {offset}" for tp, offset in sorted(earliest.items())
                                     if tp.topic == recreated.topic)
                log.warning("%s: following the new topic from its log start (partition %s); what was copied of "
                            "the old topic stays at the destination", recreated.line(), restarts or "none listed yet")
        return format_offsets(ends, identities.ids, rewound)

    def _read_rewinds(self) -> dict[str, str]:
        """The driver's file of losses, read again only when it changed."""
        if self.rewinds_file is None:
            return {}
        try:
            stat = self.rewinds_file.stat()
        except FileNotFoundError:
            return {}
        # Each write replaces the file (a new inode): its identity changes though two writes share a clock tick.
        changed = (stat.st_ino, stat.st_mtime_ns, stat.st_size)
        if changed != self._rewinds[0]:
            self._rewinds = (changed, read_rewinds(self.rewinds_file))
        return dict(self._rewinds[1])

    def _say_gone(self, missing: set[str], topic_ids: dict[str, str]) -> None:
        """One WARN line per planned topic the source stopped listing (deleted): nothing more of
        it is planned, and its offsets stay in the plan, so that it goes on where it was if it
        was only missing from one listing; a topic made again under its name is followed."""
        for topic in sorted(missing - self._gone):
            log.warning("source topic %s (topic id %s) is not listed by the source any more (deleted): the job "
                        "stops copying it and goes on with the others; what was copied of it stays at the "
                        "destination, and a topic made again under its name will be followed from its log start",
                        topic, topic_ids.get(topic, "unknown"))
        self._gone = missing

    def _waiting(self, call: Callable[[], T]) -> T:
        """``call()``, through outages of the source (:mod:`.outage`); a stop ends the wait."""
        return ride_out(call, Outage(self.config.outage_limit_s), self._sleep,
                        describe=lambda error: f"outage: source {error}")

    def _sleep(self, seconds: float) -> bool:
        """Wait ``seconds``, or less if a stop is requested (then False)."""
        deadline = time.monotonic() + seconds
        while not self._stopping() and time.monotonic() < deadline:
            time.sleep(min(_STOP_POLL_S, max(0.0, deadline - time.monotonic())))
        return not self._stopping()

    def _stopping(self) -> bool:
        """A stop was requested (the stop file), or the job is gone: the process that started
        this one died (a SIGKILLed ``kmirror run``), which would otherwise leave the planner
        waiting out a source outage on its own, for ever."""
        return (bool(self.stop_file) and os.path.exists(self.stop_file)) or os.getppid() != self._parent

    def _limit(self, start: Offsets, latest: Offsets, limit: ReadLimit) -> Offsets:
        if isinstance(limit, ReadAllAvailable):
            return latest
        max_records = self.config.streaming.max_records_per_trigger
        max_bytes = self.config.streaming.max_bytes_per_trigger
        if isinstance(limit, ReadMaxRows):
            max_records = limit.max_rows
        elif isinstance(limit, ReadMaxBytes):
            max_bytes = limit.max_bytes
        estimate = None
        if max_bytes is not None:
            estimate = {tp: self._bytes_per_offset(tp, start[tp]) for tp in latest if latest[tp] > start[tp]}
        return cap_end_offsets(start, latest, max_records=max_records, max_bytes=max_bytes, bytes_per_offset=estimate)

    def _bytes_per_offset(self, tp: TopicPartition, offset: int) -> float:
        """Average stored bytes per offset just after ``offset``, from headers only."""
        from kcodecs import iter_batches

        fetched = self.client.fetch(tp, offset, max_bytes=PROBE_BYTES)
        batches = list(iter_batches(fetched.records))
        if not batches:
            return 1.0
        span = batches[-1].last_offset + 1 - min(offset, batches[0].last_offset)
        return sum(b.size for b in batches) / max(span, 1)

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.config.streaming.max_bytes_per_trigger is not None:
            return ReadMaxBytes(self.config.streaming.max_bytes_per_trigger)
        if self.config.streaming.max_records_per_trigger is not None:
            return ReadMaxRows(self.config.streaming.max_records_per_trigger)
        return ReadAllAvailable()

    def partitions(self, start: dict, end: dict) -> list[CopyGroup]:
        begun, topic_ids = self.bounds.past(parse_offsets(start)), parse_topic_ids(end)
        before = parse_topic_ids(start)
        # Planned before a loss was (of the lost topic), or planned across it (where the new copy starts).
        lost = unrewound(self._read_rewinds(), parse_rewound(end)) | unrewound(parse_rewound(end), parse_rewound(start))
        # A topic made again between the two (another id): its offsets in ``start`` are the old
        # topic's, and those in ``end`` where the new one starts; nothing spans them.
        ranges = [CopyRange(tp.topic, tp.partition, begun[tp], stop,
                            max(self.floors.get(tp, -1), self.bounds.floor(tp, begun[tp])), topic_ids.get(tp.topic, ""))
                  for tp, stop in sorted(parse_offsets(end).items())
                  if tp in begun and stop > begun[tp] and before.get(tp.topic, "") in ("", topic_ids.get(tp.topic, ""))
                  and tp.topic not in lost]
        if not ranges:
            return []
        groups = group_ranges(ranges, self._leaders(ranges).get, lambda r: r.end - r.start,
                              self.config.streaming.copy_tasks or 1)
        return [CopyGroup(index, tuple(group)) for index, group in enumerate(groups)]

    def _leaders(self, ranges: list[CopyRange]) -> dict[CopyRange, str | None]:
        """Each range's source leader, to group by. Grouping only saves requests, so during an
        outage every range goes to one unknown leader rather than the plan waiting: the copy
        tasks find the leaders themselves, and the driver waits out what they cannot reach."""
        try:
            routes = self.client.leaders(r.tp for r in ranges)
        except KMirrorError as exc:
            if not is_outage(exc):
                raise
            log.warning("source leaders unknown (%s); grouping the micro-batch's ranges without them", exc)
            return {r: None for r in ranges}
        leader = {tp: address for address, tps in routes.items() for tp in tps}
        return {r: leader[r.tp] for r in ranges}

    def read(self, partition: CopyGroup) -> Iterator[tuple]:
        """The group as rows of :data:`SCHEMA` (:func:`groups_of_rows` reads them back)."""
        for r in partition.ranges:
            yield (r.topic, r.partition, r.start, r.end, partition.index, r.floor, r.topic_id)

    def stop(self) -> None:
        if self._client is not None:
            self._client.close()
