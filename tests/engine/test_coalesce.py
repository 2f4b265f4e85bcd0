"""Coalescing small source batches, read back by kafka-python.

The source batches come from kafka-python's builder (codecs, keys, tombstones, headers,
timestamps out of order, offset holes as compaction leaves them, transactions committed and
aborted, LogAppendTime), and the expected records are what kafka-python reads from them,
markers and aborted transactions left out as the generator knows them. A fetched set that
coalesces must give exactly those records, in order, on the partition kafka-python's
partitioner picks (by-key) or the source's (preserve), in batches a destination broker takes:
valid CRC, base offset 0, offsets 0..n-1, CreateTime, no producer state. Every outgoing
batch's source span must hold its records, and an exact span must be them, one for one.
"""

from __future__ import annotations

import random
import struct

import crc32c
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.partitioner.default import murmur2 as their_murmur2
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

import kcodecs
from kcodecs import ControlType
from mirror.engine.fetched_set import FetchedSet
from mirror.engine.topics import TopicRoute
from mirror.kafka import FetchedData, TopicPartition
from mirror.routing import Partitioning, RouteClass, RouteCounters, RoutingPolicy

CODEC_IDS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
SOURCE = TopicPartition("src", 1)
PARTITIONS = 3
T0 = 1_700_000_000_000
APPEND_TIME = 1_800_000_000_000
BELOW = 400
_NOISE = random.Random(0).randbytes(600)


def _their_rows(data: bytes) -> list[tuple]:
    return [(r.offset, r.key, r.value, tuple((k, bytes(v) if v is not None else None) for k, v in r.headers),
             r.timestamp) for r in DefaultRecordBatch(bytes(data))]


records_st = st.lists(st.tuples(
    st.one_of(st.none(), st.binary(min_size=0, max_size=6)),  # key
    st.one_of(st.none(), st.binary(max_size=40)),  # value: None is a tombstone
    st.lists(st.tuples(st.sampled_from(["h", "trace", "é"]), st.one_of(st.none(), st.binary(max_size=5))),
             max_size=2),
    st.integers(-5_000, 5_000),  # timestamp, out of order
    st.integers(1, 3),  # offset step: above 1 is a hole compaction left
), min_size=1, max_size=4)

batch_st = st.fixed_dictionaries({
    "records": records_st,
    "codec": st.sampled_from(["none", "lz4", "zstd", "gzip", "snappy"]),
    "txn": st.sampled_from([None, "commit", "abort"]),
    "lat": st.booleans(),
    "big": st.booleans(),  # padded past BELOW: forwarded or rebuilt on its own
})


def _build(spec: dict, base_offset: int, producer_id: int) -> tuple[bytearray, list[tuple], int]:
    """One source batch as a fetch returns it, the rows kafka-python reads from it (CreateTimes)
    and the next free offset."""
    transactional = spec["txn"] is not None
    builder = DefaultRecordBatchBuilder(2, CODEC_IDS[spec["codec"]], transactional,
                                        producer_id if transactional else -1, 0 if transactional else -1,
                                        0 if transactional else -1, 1 << 20)
    delta = 0
    for i, (key, value, headers, ts, step) in enumerate(spec["records"]):
        if i:
            delta += step
        if spec["big"] and i == 0:
            value = (value or b"") + _NOISE  # incompressible: stays above BELOW in every codec
        builder.append(delta, timestamp=T0 + ts, key=key, value=value, headers=[(k, v) for k, v in headers])
    data = bytearray(builder.build())
    struct.pack_into(">q", data, 0, base_offset)
    rows = _their_rows(data)
    if spec["lat"]:  # the source broker's LogAppendTime: type bit and max timestamp, CRC again
        attributes = struct.unpack_from(">h", data, 21)[0] | 0x08
        struct.pack_into(">h", data, 21, attributes)
        struct.pack_into(">q", data, 35, APPEND_TIME)
        struct.pack_into(">I", data, 17, crc32c.crc32c(bytes(data[21:])))
    return data, rows, base_offset + delta + 1


def _marker(kind: str, offset: int, producer_id: int) -> bytearray:
    control = ControlType.COMMIT if kind == "commit" else ControlType.ABORT
    return bytearray(kcodecs.build_batch([kcodecs.control_record(control, timestamp=T0)], base_offset=offset,
                                         producer_id=producer_id, producer_epoch=0, transactional=True,
                                         control=True))


def _source(specs: list[dict]) -> tuple[bytearray, list[tuple], tuple]:
    """The record set, the expected rows (source offset first) and the aborted-transaction list."""
    data, expected, aborted, offset = bytearray(), [], [], 100
    for n, spec in enumerate(specs):
        producer_id = 1000 + n
        batch, rows, offset = _build(spec, offset, producer_id)
        data += batch
        if spec["txn"] == "abort":
            aborted.append((producer_id, rows[0][0]))
        else:
            expected += rows
        if spec["txn"] is not None:
            data += _marker(spec["txn"], offset, producer_id)
            offset += 1
    return data, expected, tuple(aborted)


def _home(key: bytes | None) -> int:
    if key is None:
        return SOURCE.partition
    return (their_murmur2(key) & 0x7FFFFFFF) % PARTITIONS


def _walk(data: bytearray, aborted: tuple, policy: RoutingPolicy, limit: int | None, backlog: bool = False):
    counters = RouteCounters()
    route = TopicRoute("src", "dst", PARTITIONS, policy)
    fetched = FetchedData(memoryview(data), 10**6, 0, 10**6, aborted)
    fetched_set = FetchedSet(fetched, SOURCE, 100, 10**6, route, counters)
    outgoing = []
    while not fetched_set.done:
        outgoing += fetched_set.route_slice(limit, backlog=backlog)
    return outgoing, counters, fetched_set.offset


def _check_destination_ready(data) -> list[tuple]:
    """The batch as the copy's producer sends it: a forwarded one gets the producer's stamp (base
    offset 0, no leader epoch, CreateTime, the producer's state: here none), a coalesced or
    rebuilt one is built so already, and the stamp changes nothing in it."""
    data = bytearray(data)
    kcodecs.stamp_v2(data, base_offset=0, partition_leader_epoch=-1, clear_producer_state=True,
                     clear_delete_horizon=True)
    batch = DefaultRecordBatch(bytes(data))
    assert batch.validate_crc()
    assert (batch.magic, batch.base_offset, batch.timestamp_type) == (2, 0, 0)
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (-1, -1, -1)
    assert not batch.is_transactional and not batch.is_control_batch
    rows = _their_rows(data)
    assert [row[0] for row in rows] == list(range(len(rows))) == list(range(batch.last_offset_delta + 1))
    return rows


@settings(max_examples=300, deadline=None)
@given(specs=st.lists(batch_st, min_size=1, max_size=10),
       partitioning=st.sampled_from([Partitioning.PRESERVE, Partitioning.BY_KEY]),
       target=st.sampled_from([BELOW, 1000, 65536]),
       limit=st.sampled_from([1, 3, 8, None]),
       backlog=st.booleans())
def test_coalesced_batches_hold_exactly_the_source_records(specs, partitioning, target, limit, backlog):
    """``backlog`` merges the big batches too (those below ``target``)."""
    data, expected, aborted = _source(specs)
    policy = RoutingPolicy(partitioning=partitioning, destination_partitions=PARTITIONS,
                           coalesce_below_bytes=BELOW, coalesce_target_bytes=target, coalesce_under_backlog=True)
    outgoing, counters, reached = _walk(data, aborted, policy, limit, backlog)

    by_partition: dict[int, list[tuple]] = {}
    for out in outgoing:
        rows = _check_destination_ready(out.data)
        assert out.records == len(rows) and out.source == SOURCE
        assert out.tp.topic == "dst"
        by_partition.setdefault(out.tp.partition, []).extend(row[1:] for row in rows)
        # The span holds the records; an exact one is them, one for one, and they are in order.
        spanned = [row for row in expected if out.first <= row[0] <= out.last and
                   (partitioning is Partitioning.PRESERVE or _home(row[1]) == out.tp.partition)]
        if out.exact:
            assert out.last - out.first + 1 == len(rows)
            assert [row[1:] for row in spanned] == [row[1:] for row in rows]
        else:
            assert all(any(row[1:] == mine[1:] for mine in spanned) for row in rows)

    wanted: dict[int, list[tuple]] = {}
    for row in expected:
        target_partition = SOURCE.partition if partitioning is Partitioning.PRESERVE else _home(row[1])
        wanted.setdefault(target_partition, []).append(row[1:])
    assert by_partition == wanted
    assert reached == max(_spans_end(data), 100)
    copied = sum(c.records for route, c in counters.by_class.items()
                 if route not in (RouteClass.DROPPED, RouteClass.ABORTED))
    assert copied == len(expected)
    assert counters.total_bytes == len(data)


def _spans_end(data: bytearray) -> int:
    last = 99
    for batch in kcodecs.iter_batches(data):
        last = batch.last_offset
    return last + 1


def test_a_run_of_small_batches_becomes_one_batch_with_an_exact_span():
    """Ten one-record lz4 batches, back to back: one destination batch, mapped one for one."""
    specs = [{"records": [(None, b"value-%d" % i * 10, [], i, 1)], "codec": "lz4", "txn": None, "lat": False,
              "big": False} for i in range(10)]
    data, expected, aborted = _source(specs)
    policy = RoutingPolicy(partitioning=Partitioning.PRESERVE, destination_partitions=PARTITIONS,
                           coalesce_below_bytes=BELOW)
    outgoing, counters, _ = _walk(data, aborted, policy, None)
    (out,) = outgoing
    assert (out.first, out.last, out.exact, out.records) == (100, 109, True, 10)
    assert DefaultRecordBatch(bytes(out.data)).compression_type == CODEC_IDS["lz4"]
    assert kcodecs.read_batch(out.data).has_no_keys_flag
    assert counters.by_class[RouteClass.COALESCED].batches == 10
    assert out.max_timestamp == T0 + 9


def test_batches_at_or_above_the_threshold_and_lone_small_ones_are_not_coalesced():
    big = {"records": [(b"k", b"v", [], 0, 1)], "codec": "lz4", "txn": None, "lat": False, "big": True}
    small = dict(big, big=False)
    data, _, aborted = _source([big, small, big, big])
    policy = RoutingPolicy(partitioning=Partitioning.PRESERVE, destination_partitions=PARTITIONS,
                           coalesce_below_bytes=BELOW)
    outgoing, counters, _ = _walk(data, aborted, policy, None)
    assert len(outgoing) == 4 and all(out.exact for out in outgoing)
    assert counters.by_class[RouteClass.COALESCED].batches == 0
    assert counters.by_class[RouteClass.PASSED_THROUGH].batches == 4


@pytest.mark.parametrize("under_backlog", [True, False])
def test_under_a_backlog_batches_below_the_target_are_coalesced_too(under_backlog):
    """Four batches above ``coalesce_below_bytes``: forwarded as they are without a backlog (or
    with the policy's ``coalesce_under_backlog`` off), one exact batch under one."""
    big = {"records": [(None, b"v%d" % i, [], i, 1) for i in range(3)], "codec": "lz4", "txn": None, "lat": False,
           "big": True}
    data, expected, aborted = _source([big] * 4)
    policy = RoutingPolicy(partitioning=Partitioning.PRESERVE, destination_partitions=PARTITIONS,
                           coalesce_below_bytes=BELOW, coalesce_under_backlog=under_backlog)
    calm, _, _ = _walk(data, aborted, policy, None, backlog=False)
    assert len(calm) == 4 and all(out.exact for out in calm)
    outgoing, counters, _ = _walk(data, aborted, policy, None, backlog=True)
    if not under_backlog:
        assert len(outgoing) == 4 and counters.by_class[RouteClass.COALESCED].batches == 0
        return
    (out,) = outgoing
    assert (out.first, out.last, out.exact, out.records) == (100, 111, True, 12)
    assert [row[1:] for row in _check_destination_ready(out.data)] == [row[1:] for row in expected]
    assert counters.by_class[RouteClass.COALESCED].batches == 4


def test_markers_and_aborted_batches_are_left_out_of_a_run_and_make_its_span_a_bound():
    """commit-marker, aborted batch, abort marker between small batches: one run, no exactness."""
    plain = {"records": [(None, b"a", [], 0, 1)], "codec": "zstd", "txn": None, "lat": False, "big": False}
    data, expected, aborted = _source([plain, dict(plain, txn="commit"), dict(plain, txn="abort"), plain])
    policy = RoutingPolicy(partitioning=Partitioning.PRESERVE, destination_partitions=PARTITIONS,
                           coalesce_below_bytes=BELOW)
    outgoing, counters, _ = _walk(data, aborted, policy, None)
    (out,) = outgoing
    assert out.records == 3 == len(expected) and not out.exact
    assert counters.by_class[RouteClass.ABORTED].records == 1
    assert counters.by_class[RouteClass.DROPPED].batches == 2
