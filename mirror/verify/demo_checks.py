"""Compare a mirrored destination with its source, check by check, reporting every failure.

The records themselves are ``kmirror verify``'s to check (:mod:`mirror.verify.compare`, one
verifier for the demo and for users): each source record at the destination exactly once, with
its key, value, headers and CreateTime, on the partition the pair's partitioning gives it, in
its source order per key. :func:`record_checks` turns its reports into the demo's checks.

What this module adds, for what the demo shows beyond the records:

* **timestamps** of LogAppendTime topics (``kmirror verify`` leaves a broker's stamp out of a
  record's identity): the destination is LogAppendTime too, stamped by its broker after the
  mirror started;
* **batches** (passed-through topics): each destination batch is a source batch byte for byte
  from the attributes to the max timestamp and from the record count on (bytes 21-42 and 61+
  of the v2 header, ``DefaultRecordBatch``); only base offset, length, leader epoch, CRC,
  producer state (id, epoch, sequence, the transactional bit) and a source cleaner's delete
  horizon bit may be rewritten, in the same order per source partition;
* **routes**: the run's routing classes for the topic are the ones its data should take;
* **group offsets**: a group resumed at the destination reads what it had not consumed.

Both clusters are read with the verifier's one reader (:class:`~.rows.CommittedBatches`, as a
read_committed consumer reads): records for the timestamp and group checks, raw batches for
the byte-identity check, which no consumer API exposes. The verdicts of this reader are
tested against librdkafka's (tests/verify/test_verify_rows.py).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Hashable, Iterable, Iterator, Mapping, Sequence, TypeVar

from kcodecs import Batch, KMirrorError, TimestampType

from ..kafka import KafkaClient, TopicPartition
from ..kafka.client import READ_COMMITTED
from ..routing import RouteClass, RouteCounters
from .rows import CommittedBatches

if TYPE_CHECKING:
    from .report import PairReport

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
    "record_checks",
    "verify_routes",
    "LOG_APPEND_TIME",
]

LOG_APPEND_TIME = 1
"""A record's ``timestamp_type`` under LogAppendTime, as Kafka's ``TimestampType`` numbers it."""
EXAMPLES = 3
"""Offending records quoted per failed check; the count covers the rest."""

# v2 header spans compared for passed-through batches (DefaultRecordBatch): attributes (21)
# through max timestamp (43), and record count (57) plus the records section.
_TRANSACTIONAL_BIT = 0x10
_DELETE_HORIZON_BIT = 0x40
_KEPT_FROM = 57

Headers = tuple[tuple[str, "bytes | None"], ...]
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


def read_records(bootstrap: str, topics: Sequence[str]) -> dict[str, TopicData]:
    """Every record of ``topics`` a read_committed consumer reads, from the log start to the
    current end (the verifier's reader, :class:`~.rows.CommittedBatches`)."""
    with KafkaClient(bootstrap, client_id="kmirror-demo-verify") as client:
        counts = client.topics()
        missing = [topic for topic in topics if topic not in counts]
        if missing:
            raise VerifyReadError(f"{bootstrap}: no such topic: {', '.join(missing)}")
        return {topic: TopicData(counts[topic], tuple(
            Rec(partition, r.offset, r.key, r.value, tuple(r.headers), r.timestamp,
                LOG_APPEND_TIME if batch.timestamp_type is TimestampType.LOG_APPEND_TIME else 0)
            for partition, batch in _committed_batches(client, topic, counts[topic]) for r in batch.records()))
            for topic in topics}


def read_batches(bootstrap: str, topic: str, partitions: int) -> dict[int, list[bytes]]:
    """The raw data batches of every partition of ``topic`` a read_committed consumer reads:
    transaction markers and aborted transactions left out."""
    out: dict[int, list[bytes]] = {p: [] for p in range(partitions)}
    with KafkaClient(bootstrap, client_id="kmirror-demo-verify") as client:
        for partition, batch in _committed_batches(client, topic, partitions):
            out[partition].append(bytes(batch.raw))
    return out


def _committed_batches(client: KafkaClient, topic: str, partitions: int) -> Iterator[tuple[int, Batch]]:
    """Each partition's committed data batches, up to its last stable offset as it is now."""
    tps = [TopicPartition(topic, p) for p in range(partitions)]
    ends = client.list_offsets(tps, "latest", isolation_level=READ_COMMITTED)
    for tp in tps:
        batches = CommittedBatches(client, tp, 0, ends[tp])
        for batch, aborted in batches:
            if not aborted and not batch.is_control:
                yield tp.partition, batch
        if batches.position < ends[tp]:
            raise VerifyReadError(f"{client.bootstrap}: {tp} could be read to offset {batches.position} only, "
                                  f"not to its end {ends[tp]}")


# ---- checking --------------------------------------------------------------------------------


def record_checks(reports: Sequence[PairReport]) -> list[Check]:
    """A check per topic pair from ``kmirror verify``'s reports: every finding is a problem
    (the demo's mirror is exactly-once, and nothing is cleaned while it runs), and so is any
    destination record verify did not cover (the demo's copy ends caught up: it covers all)."""
    from .report import KINDS

    return [Check(report.source_topic, "records",
                  f"{report.destination_records} of {report.source_records} source records at the destination once, "
                  f"unaltered, placed and in order, and nothing else there (kmirror verify)",
                  tuple(f"{f.count} {f.kind} ({KINDS[f.kind]}), the first at {f.topic}-{f.partition} offset "
                        f"{f.first_offset}" for f in report.findings)
                  + ((f"{report.not_covered} of the destination's {report.destination_total} records not covered "
                      "by the copy verified",) if report.not_covered else ()))
            for report in reports]


def verify_topic(topic: str, source: TopicData, destination: TopicData, *, mirror_started_ms: int,
                 source_batches: Mapping[int, Sequence[bytes]] | None = None,
                 destination_batches: Mapping[int, Sequence[bytes]] | None = None) -> list[Check]:
    """The checks of one topic beyond its records (see the module's docstring): LogAppendTime
    stamping, for such a topic; the batch check when both batch maps are given."""
    checks = [_log_append_time(topic, source, destination, mirror_started_ms)] if any(
        r.timestamp_type == LOG_APPEND_TIME for r in source.records) else []
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


def _log_append_time(topic: str, source: TopicData, destination: TopicData, mirror_started_ms: int) -> Check:
    early = [f"{r.show()}: timestamp {r.timestamp} < mirror start {mirror_started_ms}" if r.timestamp_type == LOG_APPEND_TIME
             else f"{r.show()}: CreateTime, expected LogAppendTime" for r in destination.records
             if r.timestamp_type != LOG_APPEND_TIME or r.timestamp < mirror_started_ms]
    summary = "LogAppendTime, stamped by the destination broker after the mirror started"
    return Check(topic, "timestamps", summary,
                 (_examples(f"{len(early)} records not stamped by the destination", early),) if early else ())


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


def _examples(headline: str, items: Sequence[str]) -> str:
    shown = "; ".join(items[:EXAMPLES])
    return f"{headline}: {shown}" + (f"; ... {len(items) - EXAMPLES} more" if len(items) > EXAMPLES else "")


def _short(data: bytes | None, limit: int = 40) -> str:
    if data is None:
        return "null"
    return repr(data[:limit]) + ("..." if len(data) > limit else "")
