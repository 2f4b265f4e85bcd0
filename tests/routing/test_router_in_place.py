"""``route_batch(..., in_place=True)``: forwarded batches rewritten inside the caller's buffer give
the same bytes as the copying path; rebuilt ones are untouched by the choice. Read back with
kafka-python as the independent decoder."""

from __future__ import annotations

import pytest
from kafka.record.default_records import DefaultRecordBatch

import kcodecs
from kcodecs import InvalidRecordError, Record, TimestampType
from mirror.kafka import TopicPartition
from mirror.routing import RouteClass, RoutingPolicy, route_batch

from conftest import unconnected_producer

T0 = 1_700_000_000_000
CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]


def _fetch_buffer(batches: list[bytes]) -> bytearray:
    """Several batches back to back, with real offsets and producer state, as a fetch returns them."""
    return bytearray(b"".join(batches))


def _batch(records: list[Record], codec: str, base_offset: int, mark_no_keys: bool = True) -> bytes:
    return kcodecs.build_batch(records, compression=codec, base_offset=base_offset, partition_leader_epoch=3,
                               producer_id=77, producer_epoch=2, base_sequence=base_offset,
                               mark_no_keys=mark_no_keys)


@pytest.mark.interop
@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("partitioning, mark_no_keys, expected", [
    ("preserve", True, RouteClass.PASSED_THROUGH),
    ("by-key", False, RouteClass.INSPECTED),  # unkeyed without the flag: decoded, then forwarded
])
def test_in_place_forwarding_equals_the_copy_and_rewrites_the_callers_buffer(codec, partitioning, mark_no_keys, expected):
    records = [Record(key=None, value=b"v%d" % i * 20, timestamp=T0 + i) for i in range(30)]
    buffer = _fetch_buffer([_batch(records[:10], codec, 500, mark_no_keys), _batch(records[10:], codec, 510, mark_no_keys)])
    pristine = bytes(buffer)
    policy = RoutingPolicy(partitioning=partitioning, destination_partitions=4)
    copied = [route_batch(b, 1, policy) for b in kcodecs.iter_batches(pristine)]
    in_place = [route_batch(b, 1, policy, in_place=True) for b in kcodecs.iter_batches(buffer)]
    assert [r.route for r in in_place] == [expected, expected]
    for theirs, ours in zip(copied, in_place):
        (out,) = ours.outgoing
        assert isinstance(out.data, memoryview) and out.data.obj is buffer  # a view, no copy
        assert bytes(out.data) == bytes(theirs.outgoing[0].data) and out.partition == 1
        batch = DefaultRecordBatch(bytes(out.data))
        assert batch.validate_crc() and batch.base_offset == 0 and batch.producer_id == -1
    assert bytes(buffer) != pristine  # the rewrites happened in the caller's buffer
    decoded = [r.value for ours in in_place for r in DefaultRecordBatch(bytes(ours.outgoing[0].data))]
    assert decoded == [r.value for r in records]


def test_rebuilt_batches_are_new_whatever_in_place_says():
    records = [Record(key=b"k%d" % i, value=b"v", timestamp=T0 + i) for i in range(20)]
    buffer = bytearray(_batch(records, "zstd", 0))
    pristine = bytes(buffer)
    routed = route_batch(kcodecs.read_batch(buffer), 0, RoutingPolicy(destination_partitions=5), in_place=True)
    assert routed.route is RouteClass.REBUILT
    assert all(isinstance(out.data, bytearray) for out in routed.outgoing)
    assert bytes(buffer) == pristine


def test_in_place_needs_a_writable_buffer():
    data = _batch([Record(key=None, value=b"v", timestamp=T0)], "lz4", 0)
    with pytest.raises(InvalidRecordError, match="writable"):
        route_batch(kcodecs.read_batch(data), 0, RoutingPolicy(partitioning="preserve", destination_partitions=1),
                    in_place=True)


@pytest.mark.interop
@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("transactional", [False, True])
def test_a_producer_that_restamps_gets_the_same_bytes_without_the_clearing(codec, transactional):
    """``producer_restamps``: routing leaves a forwarded batch as the source wrote it, and the
    copy's producer makes every destination rewrite along with its own producer state. The
    bytes are those of routing's own rewrites followed by the producer state alone, and
    kafka-python reads them back intact."""
    records = [Record(key=None, value=b"v%d" % i * 20, timestamp=T0 + i) for i in range(10)]
    source = kcodecs.build_batch(records, compression=codec, base_offset=500, partition_leader_epoch=3, producer_id=77,
                                 producer_epoch=2, base_sequence=500, transactional=transactional, mark_no_keys=True,
                                 timestamp_type=TimestampType.LOG_APPEND_TIME, max_timestamp=T0 + 100)
    policy = RoutingPolicy(partitioning="preserve", destination_partitions=4)
    cleared = route_batch(kcodecs.read_batch(bytearray(source)), 1, policy, in_place=True)
    kept = route_batch(kcodecs.read_batch(bytearray(source)), 1, policy, in_place=True, producer_restamps=True)
    (cleared_out,), (kept_out,) = cleared.outgoing, kept.outgoing
    assert bytes(kept_out.data) == source  # left for the producer
    kcodecs.set_producer_state(cleared_out.data, 1000, 0, 0)
    unconnected_producer(1000).enqueue(TopicPartition("d", 1), kept_out.data, 10)
    assert bytes(kept_out.data) == bytes(cleared_out.data)
    batch = DefaultRecordBatch(bytes(kept_out.data))
    assert batch.validate_crc() and (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (1000, 0, 0)
    assert not batch.is_transactional and batch.base_offset == 0 and batch.timestamp_type == 0
    assert [(r.value, r.timestamp) for r in batch] == [(r.value, r.timestamp) for r in records]
