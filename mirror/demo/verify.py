"""Compare a mirrored destination with its source, check by check, reporting every failure.

Records are read with kafka-python's ``KafkaConsumer``, a client independent of kmirror's
own reader, so a bug in kcodecs cannot hide itself. Only the byte-identity check of
passed-through batches reads raw batches with kmirror's :func:`kcodecs.iter_batches`: no
consumer API exposes batch bytes. The comparisons themselves are pure functions over
:class:`TopicData`, tested without brokers (``tests/demo``).

What "mirrored correctly" means, per topic:

* **records**: the multiset of (key, value, headers) is the source's: nothing lost, nothing
  duplicated, nothing made up;
* **placement**: a keyed record sits on ``murmur2(key) & 0x7fffffff % N`` (kafka-python's
  murmur2, Kafka's ``DefaultPartitioner``), an unkeyed one on its source partition mod N;
* **order**: each key's records, and each source partition's unkeyed records, keep their
  source order (Kafka orders per partition, so the key's order within each source partition);
* **timestamps**: CreateTime records keep their source timestamps; on a LogAppendTime source
  the destination is LogAppendTime too, stamped by its broker after the mirror started;
* **batches** (passed-through topics): each destination batch is a source batch byte for byte
  from the attributes to the max timestamp and from the record count on (bytes 21-42 and 61+
  of the v2 header, ``DefaultRecordBatch``); only base offset, length, leader epoch, CRC,
  producer state (id, epoch, sequence, the transactional bit) and a source cleaner's delete
  horizon bit may be rewritten, in the same order per source partition;
* **routes**: the run's routing classes for the topic are the ones its data should take.
"""

from __future__ import annotations

import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Callable, Hashable, Iterable, Mapping, Sequence, TypeVar

from kafka import KafkaConsumer
from kafka import TopicPartition as KafkaTopicPartition
from kafka.partitioner.default import murmur2 as kafka_python_murmur2

from kcodecs import KMirrorError, iter_batches

from ..kafka import KafkaClient, TopicPartition
from ..kafka.client import READ_COMMITTED
from ..routing import RouteClass, RouteCounters
from ..routing.transactions import ReadCommitted

__all__ = [
    "Rec",
    "TopicData",
    "Check",
    "Verification",
    "RouteExpectation",
    "VerifyReadError",
    "read_records",
    "read_batches",
    "verify_topic",
    "verify_routes",
    "LOG_APPEND_TIME",
]

LOG_APPEND_TIME = 1
"""kafka-python's ``ConsumerRecord.timestamp_type`` for LogAppendTime (Kafka's ``TimestampType``)."""
EXAMPLES = 3
"""Offending records quoted per failed check; the count covers the rest."""

# v2 header spans compared for passed-through batches (DefaultRecordBatch): attributes (21)
# through max timestamp (43), and record count (57) plus the records section.
_TRANSACTIONAL_BIT = 0x10
_DELETE_HORIZON_BIT = 0x40
_KEPT_FROM = 57

Headers = tuple[tuple[str, "bytes | None"], ...]
Content = tuple["bytes | None", "bytes | None", Headers]
T = TypeVar("T", bound=Hashable)


class VerifyReadError(KMirrorError):
    """A cluster could not be read completely, so nothing can be concluded about it."""


@dataclass(frozen=True)
class Rec:
    """One record as a consumer sees it."""

    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: Headers = ()
    timestamp: int = -1
    timestamp_type: int = 0

    @property
    def content(self) -> Content:
        return (self.key, self.value, self.headers)

    def show(self) -> str:
        return f"key={_short(self.key)} value={_short(self.value)} (partition {self.partition} offset {self.offset})"


@dataclass(frozen=True)
class TopicData:
    """Every record of one topic, in (partition, offset) order, and its partition count."""

    partitions: int
    records: tuple[Rec, ...]


@dataclass(frozen=True)
class Check:
    """One property of one topic; passed when ``problems`` is empty."""

    topic: str
    name: str
    summary: str
    problems: tuple[str, ...] = ()

    @property
    def passed(self) -> bool:
        return not self.problems


@dataclass(frozen=True)
class Verification:
    """Every check of a run, failed or not; ``ok`` only if there were checks and all passed."""

    checks: tuple[Check, ...]

    @property
    def failures(self) -> tuple[Check, ...]:
        return tuple(check for check in self.checks if not check.passed)

    @property
    def ok(self) -> bool:
        return bool(self.checks) and not self.failures

    def report(self) -> str:
        width = max((len(check.topic) for check in self.checks), default=0)
        lines = [f"verification: {len(self.checks) - len(self.failures)} of {len(self.checks)} checks passed"]
        for check in self.checks:
            lines.append(f"  {'ok  ' if check.passed else 'FAIL'}  {check.topic:<{width}}  {check.name}: {check.summary}")
            lines.extend(f"          {problem}" for problem in check.problems)
        return "\n".join(lines)


@dataclass(frozen=True)
class RouteExpectation:
    """Routing classes a topic's batches may take (``allowed``) and must take at least once (``required``)."""

    allowed: frozenset[RouteClass]
    required: frozenset[RouteClass] = field(default_factory=frozenset)


# ---- reading ---------------------------------------------------------------------------------


def read_records(bootstrap: str, topics: Sequence[str], *, timeout_s: float = 60.0) -> dict[str, TopicData]:
    """Every record of ``topics`` from the log start to the current end, with kafka-python."""
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
                             client_id="kmirror-demo-verify", isolation_level="read_committed")
    try:
        counts = {topic: len(consumer.partitions_for_topic(topic)) for topic in topics}
        missing = [topic for topic, n in counts.items() if n == 0]
        if missing:
            raise VerifyReadError(f"{bootstrap}: no such topic: {', '.join(missing)}")
        parts = [KafkaTopicPartition(topic, p) for topic, n in counts.items() for p in range(n)]
        consumer.assign(parts)
        consumer.seek_to_beginning(*parts)
        end = consumer.end_offsets(parts)
        seen: dict[str, list[Rec]] = {topic: [] for topic in topics}
        deadline = time.monotonic() + timeout_s
        while any(consumer.position(tp) < end[tp] for tp in parts):
            if time.monotonic() > deadline:
                short = {f"{tp.topic}/{tp.partition}": end[tp] - consumer.position(tp) for tp in parts
                         if consumer.position(tp) < end[tp]}
                raise VerifyReadError(f"{bootstrap}: records still unread after {timeout_s:.0f} s: {short}")
            for tp, batch in consumer.poll(timeout_ms=500).items():
                seen[tp.topic].extend(
                    Rec(r.partition, r.offset, r.key, r.value, tuple(r.headers or ()), r.timestamp, r.timestamp_type)
                    for r in batch if r.offset < end[tp])
    finally:
        consumer.close()
    return {topic: TopicData(counts[topic], tuple(sorted(recs, key=lambda r: (r.partition, r.offset))))
            for topic, recs in seen.items()}


def read_batches(bootstrap: str, topic: str, partitions: int) -> dict[int, list[bytes]]:
    """The raw v2 data batches of every partition of ``topic``, read committed (kmirror's fetch
    and header reader): transaction markers and aborted transactions left out."""
    out: dict[int, list[bytes]] = {}
    with KafkaClient(bootstrap, client_id="kmirror-demo-verify") as client:
        for partition in range(partitions):
            tp, offset, batches = TopicPartition(topic, partition), 0, []
            while True:
                fetched = client.fetch(tp, offset, max_bytes=1 << 20, max_wait_ms=0, isolation_level=READ_COMMITTED)
                if offset >= fetched.last_stable_offset:
                    break
                found = [batch for batch in iter_batches(fetched.records) if batch.next_offset > offset]
                if not found:
                    raise VerifyReadError(f"{bootstrap}: fetching {tp} at offset {offset} returned no complete batch")
                read_committed = ReadCommitted(fetched.aborted_transactions)
                batches += [bytes(batch.raw) for batch in found
                            if not read_committed.is_aborted(batch) and not batch.is_control]
                offset = found[-1].next_offset
            out[partition] = batches
    return out


# ---- checking --------------------------------------------------------------------------------


def verify_topic(topic: str, source: TopicData, destination: TopicData, *, mirror_started_ms: int,
                 source_batches: Mapping[int, Sequence[bytes]] | None = None,
                 destination_batches: Mapping[int, Sequence[bytes]] | None = None) -> list[Check]:
    """Every record-level check of one topic; the batch check too when both batch maps are given."""
    checks = [_records(topic, source, destination), _placement(topic, source, destination),
              _order(topic, source, destination), _timestamps(topic, source, destination, mirror_started_ms)]
    if source_batches is not None and destination_batches is not None:
        checks.append(_batches(topic, source_batches, destination_batches, destination.partitions))
    return checks


def verify_routes(topic: str, counters: RouteCounters, expected: RouteExpectation, source_records: int) -> Check:
    """The run routed every source record of the topic once, through the expected classes."""
    taken = {route for route, counts in counters.by_class.items() if counts.records}
    problems = [f"{route.value}: {counters.by_class[route].records} records, expected none"
                for route in sorted(taken - expected.allowed, key=list(RouteClass).index)]
    problems += [f"{route.value}: no batches, expected some" for route in sorted(expected.required - taken, key=list(RouteClass).index)]
    if counters.total_records != source_records:
        problems.append(f"the run routed {counters.total_records} records, the source has {source_records}")
    shown = ", ".join(f"{route.value} {counts.batches} batches/{counts.records} records"
                      for route, counts in counters.by_class.items() if counts.batches) or "nothing routed"
    return Check(topic, "routes", shown, tuple(problems))


def _records(topic: str, source: TopicData, destination: TopicData) -> Check:
    want = Counter(r.content for r in source.records)
    have = Counter(r.content for r in destination.records)
    first_at = _first_by_content(source.records)
    problems: list[str] = []
    missing = want - have
    extra = have - want
    duplicated = {c: n for c, n in extra.items() if c in want}
    unknown = {c: n for c, n in extra.items() if c not in want}
    dest_at = _first_by_content(destination.records)
    if missing:
        problems.append(_examples(f"{sum(missing.values())} source records missing",
                                  [f"source {first_at[c].show()}" for c in missing]))
    if duplicated:
        problems.append(_examples(f"{sum(duplicated.values())} extra copies of source records",
                                  [f"{n + want[c]} copies of source {first_at[c].show()}" for c, n in duplicated.items()]))
    if unknown:
        problems.append(_examples(f"{sum(unknown.values())} records not in the source",
                                  [f"destination {dest_at[c].show()}" for c in unknown]))
    return Check(topic, "records", f"{len(destination.records)} of {len(source.records)} present exactly once"
                 if not problems else f"{len(destination.records)} records at the destination, {len(source.records)} at the source",
                 tuple(problems))


def _placement(topic: str, source: TopicData, destination: TopicData) -> Check:
    n = destination.partitions
    homes = _homes(source, n)
    wrong = [f"{r.show()} belongs on partition {' or '.join(map(str, sorted(homes(r))))}"
             for r in destination.records if not _placed_right(r, homes)]
    keyed = sum(r.key is not None for r in destination.records)
    parts = []
    if keyed:
        parts.append(f"{keyed} keyed records on murmur2(key) % {n}")
    if len(destination.records) > keyed:
        parts.append(f"{len(destination.records) - keyed} unkeyed records on source partition % {n}")
    return Check(topic, "placement", " and ".join(parts) or "no records",
                 (_examples(f"{len(wrong)} records on the wrong partition", wrong),) if wrong else ())


def _order(topic: str, source: TopicData, destination: TopicData) -> Check:
    """Per key and source partition (unkeyed: per source partition), the destination keeps the
    source order. Compared on the records both sides hold on the right partition (the records
    and placement checks report the rest), first copies only, and only for records whose
    content is unique at the source."""
    unique = {c for c, n in Counter(r.content for r in source.records).items() if n == 1}
    group_of: dict[Content, tuple[bytes | None, int]] = {}
    wanted: dict[tuple[bytes | None, int], list[Content]] = defaultdict(list)
    for r in source.records:  # (partition, offset) order
        if r.content in unique:
            group_of[r.content] = (r.key, r.partition)
            wanted[(r.key, r.partition)].append(r.content)
    homes = _homes(source, destination.partitions)
    got: dict[tuple[bytes | None, int], list[Content]] = defaultdict(list)
    for r in destination.records:
        if r.content in group_of and _placed_right(r, homes):
            got[group_of[r.content]].append(r.content)
    problems = []
    for group, want in wanted.items():
        have = _first_copies(got.get(group, []))
        present = set(have)
        want = [c for c in want if c in present]
        if have != want:
            at = next(i for i, (a, b) in enumerate(zip(want, have)) if a != b)
            key, partition = group
            who = f"key {_short(key)} from source partition {partition}" if key is not None else f"unkeyed records of source partition {partition}"
            problems.append(f"{who}: destination order differs from the source at position {at}: "
                            f"expected value {_short(want[at][1])}, found {_short(have[at][1])}")
    keys = len({key for key, _ in wanted if key is not None})
    unkeyed = len({partition for key, partition in wanted if key is None})
    parts = []
    if keys:
        parts.append(f"{keys} keys")
    if unkeyed:
        parts.append(f"the unkeyed records of {unkeyed} source partitions")
    return Check(topic, "order", "source order kept for " + (" and ".join(parts) or "no records"),
                 (_examples(f"{len(problems)} sequences reordered", problems),) if problems else ())


def _timestamps(topic: str, source: TopicData, destination: TopicData, mirror_started_ms: int) -> Check:
    appended = any(r.timestamp_type == LOG_APPEND_TIME for r in source.records)
    if appended:
        early = [f"{r.show()}: timestamp {r.timestamp} < mirror start {mirror_started_ms}" if r.timestamp_type == LOG_APPEND_TIME
                 else f"{r.show()}: CreateTime, expected LogAppendTime" for r in destination.records
                 if r.timestamp_type != LOG_APPEND_TIME or r.timestamp < mirror_started_ms]
        summary = "LogAppendTime, stamped by the destination broker after the mirror started"
        return Check(topic, "timestamps", summary,
                     (_examples(f"{len(early)} records not stamped by the destination", early),) if early else ())
    by_content = defaultdict(set)
    for r in source.records:
        by_content[r.content].add(r.timestamp)
    changed = [f"{r.show()}: {'LogAppendTime' if r.timestamp_type == LOG_APPEND_TIME else f'timestamp {r.timestamp}'}, "
               f"source {' or '.join(map(str, sorted(by_content[r.content])))}"
               for r in destination.records if r.content in by_content
               and (r.timestamp_type == LOG_APPEND_TIME or r.timestamp not in by_content[r.content])]
    return Check(topic, "timestamps", "CreateTime, source timestamps kept",
                 (_examples(f"{len(changed)} records with changed timestamps", changed),) if changed else ())


def _batches(topic: str, source: Mapping[int, Sequence[bytes]], destination: Mapping[int, Sequence[bytes]],
             partitions: int) -> Check:
    """Byte identity of passed-through batches: same multiset per destination partition, and
    each source partition's batches in their source order."""
    problems = []
    for d in range(partitions):
        feeds = {p: batches for p, batches in sorted(source.items()) if p % partitions == d}
        kept_feeds = {p: [_kept(b) for b in batches] for p, batches in feeds.items()}
        arrived = destination.get(d, [])
        have = [_kept(b) for b in arrived]
        want = Counter(k for kept in kept_feeds.values() for k in kept)
        missing, extra = want - Counter(have), Counter(have) - want
        if extra:
            at = [f"destination partition {d} batch #{i} at offset {_base_offset(arrived[i])}" for i in _positions(have, extra)]
            problems.append(_examples(f"{sum(extra.values())} destination batches match no source batch byte for byte", at))
        if missing:
            at = [f"source partition {p} batch #{i} at offset {_base_offset(feeds[p][i])}"
                  for p, kept in kept_feeds.items() for i in _positions(kept, missing)]
            problems.append(_examples(f"{sum(missing.values())} source batches have no byte-identical copy", at))
        present = set(have)
        for p, kept in kept_feeds.items():
            mine = set(kept)
            if _first_copies(k for k in have if k in mine) != [k for k in _first_copies(kept) if k in present]:
                problems.append(f"destination partition {d}: the batches of source partition {p} are out of order")
    count = sum(len(b) for b in destination.values())
    return Check(topic, "batches", f"{count} destination batches byte-identical to source batches, in source order",
                 tuple(problems))


def verify_group_resume(topic: str, group: str, source: TopicData, consumed: Mapping[int, int],
                        resumed: Mapping[int, Sequence[bytes]]) -> Check:
    """The group, resumed at the destination, read exactly what it had not consumed at the
    source: per partition, the source's values after the first ``consumed[p]``, in order."""
    problems = []
    for p in range(source.partitions):
        values = [r.value for r in source.records if r.partition == p]
        want, got = values[consumed.get(p, 0):], list(resumed.get(p, ()))
        if got == want:
            continue
        duplicated = sum((Counter(got) - Counter(want)).values())
        missing = sum((Counter(want) - Counter(got)).values())
        problems.append(f"partition {p}: read {len(got)} records, expected {len(want)}: {duplicated} already "
                        f"consumed at the source or extra, {missing} missing"
                        + ("" if duplicated or missing else ", out of order"))
    resumed_total = sum(len(v) for v in resumed.values())
    return Check(topic, "group offsets", f"group {group} resumed at the destination after its "
                 f"{sum(consumed.values())} consumed records: {resumed_total} read, 0 duplicates, 0 gaps",
                 tuple(problems))


# ---- helpers ---------------------------------------------------------------------------------


def _homes(source: TopicData, partitions: int) -> Callable[[Rec], set[int]]:
    """Where a destination record belongs: keyed, Kafka's ``DefaultPartitioner`` (kafka-python's
    murmur2); unkeyed, the partition mod N of any source partition holding the same record."""
    unkeyed: dict[Content, set[int]] = defaultdict(set)
    for r in source.records:
        if r.key is None:
            unkeyed[r.content].add(r.partition % partitions)
    keyed: dict[bytes, set[int]] = {}  # kafka-python's murmur2 is pure Python: once per key

    def homes(r: Rec) -> set[int]:
        if r.key is None:
            return unkeyed.get(r.content, set())
        if r.key not in keyed:
            keyed[r.key] = {(kafka_python_murmur2(r.key) & 0x7FFFFFFF) % partitions}
        return keyed[r.key]

    return homes


def _placed_right(r: Rec, homes: Callable[[Rec], set[int]]) -> bool:
    """An unkeyed record that is not in the source has no home; the records check reports it."""
    where = homes(r)
    return r.partition in where or (r.key is None and not where)


def _kept(batch: bytes) -> bytes:
    """The bytes a pass-through must not change (see the module docstring); the transactional
    attribute bit is producer state, which an exactly-once mirror sets, and the delete horizon
    bit the source cleaner's, which the mirror clears."""
    attributes = int.from_bytes(batch[21:23], "big") & ~(_TRANSACTIONAL_BIT | _DELETE_HORIZON_BIT)
    return attributes.to_bytes(2, "big") + batch[23:43] + batch[_KEPT_FROM:]


def _base_offset(batch: bytes) -> int:
    return int.from_bytes(batch[:8], "big", signed=True)


def _positions(items: Sequence[T], wanted: Counter) -> list[int]:
    left = Counter(wanted)
    out = []
    for i, item in enumerate(items):
        if left[item] > 0:
            left[item] -= 1
            out.append(i)
    return out


def _first_copies(items: Iterable[T]) -> list[T]:
    return list(dict.fromkeys(items))


def _first_by_content(records: Iterable[Rec]) -> dict[Content, Rec]:
    out: dict[Content, Rec] = {}
    for r in records:
        out.setdefault(r.content, r)
    return out


def _examples(headline: str, items: Sequence[str]) -> str:
    shown = "; ".join(items[:EXAMPLES])
    return f"{headline}: {shown}" + (f"; ... {len(items) - EXAMPLES} more" if len(items) > EXAMPLES else "")


def _short(data: bytes | None, limit: int = 40) -> str:
    if data is None:
        return "null"
    return repr(data[:limit]) + ("..." if len(data) > limit else "")
