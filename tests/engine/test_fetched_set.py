"""The copy engine's shortcut for batches that pass through, against the general path.

A fetched set forwards runs of batches that pass through straight from its bytes, from one
read of each header, without route_batch (and, unchecked, runs for the bench's raw ceiling).
- For one batch, whatever a run decides must be what route_batch decides: the same class,
  destination partition, bytes, record count and source span, and the same counts. A
  corrupt batch must be refused on that path too.
- Sliced however, over record sets mixing batches that pass, batches to rebuild, v1
  batches, control batches, a cut-off tail, a range that starts inside a batch or ends
  before the set does, and a corrupt batch anywhere, it must give what the one-batch walk
  through route_one (route_batch) gives: the same outgoing batches slice by slice, counts,
  offsets and errors.

The batches come from kafka-python's builders, so the headers read are not ours.
"""

from __future__ import annotations

import crc32c
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.record.default_records import DefaultRecordBatchBuilder
from kafka.record.legacy_records import LegacyRecordBatchBuilder

import kcodecs
from kcodecs import NO_KEYS_MASK, CorruptBatchError
from mirror.engine.errors import CorruptSourceError
from mirror.engine.fetched_set import FetchedSet, OutgoingBatch, RouteMode, route_one
from mirror.engine.topics import TopicRoute
from mirror.kafka import FetchedData, TopicPartition
from mirror.routing import Partitioning, RouteClass, RouteCounters, RoutingPolicy, route_batch

CODEC_IDS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
SOURCE = TopicPartition("src", 2)


def _their_batch(codec: str, *, keys: bool, no_keys_flag: bool = False, base_offset: int = 500,
                 records: int = 6) -> bytearray:
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=CODEC_IDS[codec], is_transactional=False,
                                        producer_id=9, producer_epoch=1, base_sequence=30, batch_size=1 << 20)
    for i in range(records):
        builder.append(i, timestamp=1_700_000_000_000 + i, key=b"k%d" % i if keys else None,
                       value=b"value-%d" % i * 20, headers=[])
    data = bytearray(builder.build())
    data[0:8] = base_offset.to_bytes(8, "big")  # as a fetch returns it: base offset outside the CRC
    if no_keys_flag:  # our seed-000 bit, set as a source kmirror broker would, CRC made again
        attributes = int.from_bytes(data[21:23], "big") | NO_KEYS_MASK
        data[21:23] = attributes.to_bytes(2, "big")
        data[17:21] = crc32c.crc32c(bytes(data[21:])).to_bytes(4, "big")
    return data


def _route(partitioning: Partitioning, partitions: int = 4) -> TopicRoute:
    policy = RoutingPolicy(partitioning=partitioning, destination_partitions=partitions)
    return TopicRoute("src", "dst", 4, policy)


def _through_route_batch(batch, last, route, counters) -> list[OutgoingBatch]:
    routed = route_batch(batch, SOURCE.partition, route.policy, in_place=True, producer_restamps=True)
    counters.add(routed)
    return [OutgoingBatch(route.destinations[out.partition], out.data, out.records, SOURCE, batch.base_offset,
                          last, routed.route in (RouteClass.PASSED_THROUGH, RouteClass.INSPECTED),
                          batch.max_timestamp) for out in routed.outgoing]


def _run(data: bytearray, route: TopicRoute, counters: RouteCounters) -> list[OutgoingBatch]:
    """A fetched set of ``data`` (base offset 500 on), routed in one slice."""
    fetched = FetchedData(memoryview(data), 10**6, 0, 10**6, ())
    return FetchedSet(fetched, SOURCE, 500, 10**6, route, counters).route_slice(None)


@pytest.mark.parametrize("codec", ["none", "lz4", "zstd"])
@pytest.mark.parametrize("partitioning, keys, flag, expected", [
    (Partitioning.PRESERVE, True, False, RouteClass.PASSED_THROUGH),
    (Partitioning.BY_KEY, False, True, RouteClass.PASSED_THROUGH),
    (Partitioning.BY_KEY, True, False, RouteClass.REBUILT),  # the general path: the run stops before it
])
def test_a_run_decides_as_route_batch_does(codec, partitioning, keys, flag, expected):
    route = _route(partitioning)
    data = _their_batch(codec, keys=keys, no_keys_flag=flag)
    last = 500 + 5
    ours, theirs = RouteCounters(), RouteCounters()
    fast = _run(bytearray(data), route, ours)
    general = _through_route_batch(kcodecs.read_batch(bytearray(data)), last, route, theirs)
    assert [(o.tp, bytes(o.data), o.records, o.source, o.first, o.last, o.exact, o.max_timestamp) for o in fast] \
        == [(o.tp, bytes(o.data), o.records, o.source, o.first, o.last, o.exact, o.max_timestamp) for o in general]
    assert ours.by_class == theirs.by_class
    counted = ours.by_class[expected]
    assert (counted.batches, counted.records, counted.bytes) == (1, 6, len(data))
    if expected is RouteClass.PASSED_THROUGH:
        (out,) = fast
        assert out.tp == TopicPartition("dst", 2) and out.exact and (out.first, out.records) == (500, 6)
        assert out.max_timestamp == 1_700_000_000_005


@pytest.mark.parametrize("flip", [30, 70, -1])  # the header's attributes, a record, the last byte
def test_a_batch_whose_crc_fails_is_refused_by_a_run_and_by_route_one(flip):
    route = _route(Partitioning.PRESERVE)
    data = _their_batch("lz4", keys=True)
    data[flip] ^= 0x01
    counters = RouteCounters()
    with pytest.raises(CorruptSourceError, match="CRC") as refused:
        _run(bytearray(data), route, counters)
    assert refused.value.offset == 500
    with pytest.raises(CorruptBatchError, match="CRC"):
        route_one(kcodecs.read_batch(data), 505, SOURCE, route, counters, False)
    assert all(c.batches == 0 for c in counters.by_class.values())


# --- a fetched set's runs against the one-batch walk ---------------------------------------------------------

KINDS = ["passes", "keyed", "flagged", "legacy", "control"]


def _legacy_batch(base_offset: int, records: int) -> bytearray:
    builder = LegacyRecordBatchBuilder(magic=1, compression_type=0, batch_size=1 << 20)
    for i in range(records):
        builder.append(i, timestamp=1_700_000_000_000 + i, key=b"k%d" % i, value=b"legacy-%d" % i)
    data = bytearray(builder.build())
    # A v1 message set of uncompressed records: each wrapper names its own offset.
    pos = 0
    for i in range(records):
        data[pos:pos + 8] = (base_offset + i).to_bytes(8, "big")
        pos += 12 + int.from_bytes(data[pos + 8:pos + 12], "big")
    return data


def _batch_of(kind: str, base_offset: int, records: int) -> bytearray:
    if kind == "legacy":
        return _legacy_batch(base_offset, records)
    if kind == "control":
        marker = kcodecs.control_record(kcodecs.ControlType.COMMIT, coordinator_epoch=0, timestamp=1_700_000_000_000)
        return bytearray(kcodecs.build_batch([marker], base_offset=base_offset, producer_id=9, producer_epoch=1,
                                             transactional=True, control=True))
    return _their_batch("lz4", keys=kind == "keyed", no_keys_flag=kind == "flagged", base_offset=base_offset,
                        records=records)


def _record_set(kinds: list[tuple[str, int]]) -> tuple[bytearray, list[tuple[int, int]]]:
    """The batches back to back from offset 100, and each one's (first, last) offset."""
    data, spans, offset = bytearray(), [], 100
    for kind, records in kinds:
        records = 1 if kind == "control" else records
        data += _batch_of(kind, offset, records)
        spans.append((offset, offset + records - 1))
        offset += records
    return data, spans


def _walk(data: bytes, mode: RouteMode, start: int, end: int, limit: int | None, policy: Partitioning, *,
          batch_by_batch: bool = False):
    """Every slice's outgoing batches (as plain tuples), then the counts, the offset reached,
    and the error, if any, that ended the walk."""
    counters = RouteCounters()
    fetched = FetchedData(memoryview(bytearray(data)), 10**6, 0, 10**6, ())
    fetched_set = FetchedSet(fetched, SOURCE, start, end, _route(policy), counters, mode,
                             batch_by_batch=batch_by_batch)
    slices, error = [], None
    try:
        while not fetched_set.done:
            slices.append([(o.tp, bytes(o.data), o.records, o.source, o.first, o.last, o.exact, o.max_timestamp)
                           for o in fetched_set.route_slice(limit)])
    except CorruptSourceError as exc:
        error = (exc.tp, exc.offset, str(exc))
    return slices, counters.by_class, fetched_set.offset, error


@settings(max_examples=150, deadline=None)
@given(kinds=st.lists(st.tuples(st.sampled_from(KINDS), st.integers(1, 5)), min_size=1, max_size=12),
       policy=st.sampled_from([Partitioning.PRESERVE, Partitioning.BY_KEY]),
       mode=st.sampled_from([RouteMode.ROUTED, RouteMode.RAW_CEILING]),
       limit=st.sampled_from([1, 2, 3, 8, None]),
       cut=st.integers(0, 40), start_in=st.integers(0, 11), end_in=st.integers(0, 12), corrupt=st.integers(-1, 11),
       data=st.data())
def test_runs_route_as_the_one_batch_walk_does(kinds, policy, mode, limit, cut, start_in, end_in, corrupt, data):
    """route_one's runs, and the raw ceiling's (forward_unchecked, which checks nothing)."""
    record_set, spans = _record_set(kinds)
    if 0 <= corrupt < len(spans):  # a byte inside one batch's CRC-covered part (v2) or its value (v1)
        sizes = [len(_batch_of(k, 0, 1 if k == "control" else n)) for k, n in kinds[:corrupt + 1]]
        # A one-record v1 batch is 44 bytes: the byte is drawn within the batch it corrupts.
        within = data.draw(st.integers(30, min(60, sizes[-1] - 1)), label="corrupt byte")
        record_set[sum(sizes[:-1]) + within] ^= 0x10
    if cut:
        record_set = record_set[:-cut]  # a fetch ends inside its last batch
    first, _ = spans[min(start_in, len(spans) - 1)]
    start = first + data.draw(st.integers(0, 2), label="start inside")  # maybe inside that batch
    end = spans[min(end_in, len(spans) - 1)][1] + 1 if end_in < len(spans) else 10**6
    assert _walk(record_set, mode, start, end, limit, policy) == \
        _walk(record_set, mode, start, end, limit, policy, batch_by_batch=True)


def test_a_run_forwards_views_and_counts_every_batch():
    record_set, spans = _record_set([("passes", 3)] * 5)
    counters = RouteCounters()
    fetched = FetchedData(memoryview(record_set), 10**6, 0, 10**6, ())
    fetched_set = FetchedSet(fetched, SOURCE, 100, spans[3][1] + 1, _route(Partitioning.PRESERVE), counters)
    out = fetched_set.route_slice(None)
    assert [(o.first, o.last) for o in out] == spans[:4] and fetched_set.done and fetched_set.offset == spans[3][1] + 1
    assert all(isinstance(o.data, memoryview) and o.data.obj is record_set for o in out)  # no copies
    counted = counters.by_class[RouteClass.PASSED_THROUGH]
    assert (counted.batches, counted.records, counted.bytes) == (4, 12, sum(len(o.data) for o in out))


@pytest.mark.parametrize("codec", ["none", "zstd"])
@pytest.mark.parametrize("floor, log_start", [(503, 0), (-1, 503), (503, 501)])
def test_records_below_the_floor_are_left_out_of_the_batch_that_holds_it(codec, floor, log_start):
    """A time start (the job's floor) or a log start (DeleteRecords) inside a batch: of that
    batch only the records from there on go out, the batches after it pass through whole."""
    record_set = _their_batch(codec, keys=False, base_offset=500) + _their_batch(codec, keys=False, base_offset=506)
    counters = RouteCounters()
    fetched = FetchedData(memoryview(record_set), 10**6, log_start, 10**6, ())
    fetched_set = FetchedSet(fetched, SOURCE, 503, 10**6, _route(Partitioning.PRESERVE), counters, floor=floor)
    out = fetched_set.route_slice(None)
    values = [[r.value for r in kcodecs.read_batch(bytes(o.data)).records()] for o in out]
    assert values == [[b"value-%d" % i * 20 for i in (3, 4, 5)], [b"value-%d" % i * 20 for i in range(6)]]
    assert [(o.first, o.last, o.records) for o in out] == [(503, 505, 3), (506, 511, 6)]
    assert fetched_set.offset == 512 and counters.total_records == 9
    assert kcodecs.read_batch(bytes(out[0].data)).compression.name.lower() == codec  # still the source's codec


def test_without_a_floor_a_range_that_starts_inside_a_batch_copies_it_whole():
    """A rate limit cut the batch: the range holding its last offset copies all of it."""
    record_set = _their_batch("lz4", keys=False, base_offset=500)
    fetched = FetchedData(memoryview(record_set), 10**6, 0, 10**6, ())
    fetched_set = FetchedSet(fetched, SOURCE, 503, 10**6, _route(Partitioning.PRESERVE), RouteCounters(), floor=500)
    (out,) = fetched_set.route_slice(None)
    assert (out.first, out.last, out.records, out.exact) == (500, 505, 6, True)
