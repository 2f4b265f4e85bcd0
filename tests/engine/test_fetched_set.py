"""route_one: the copy engine's own forward of a passing batch against route_batch's.

route_one answers the common case (a v2 batch that passes through) from one read of the
header, without route_batch. Whatever it decides must be what route_batch decides: the same
class, destination partition, bytes, record count and source span, and the same counts. A
corrupt batch must be refused on that path too. The batches come from kafka-python's
builder, so the headers read are not ours.
"""

from __future__ import annotations

import crc32c
import pytest
from kafka.record.default_records import DefaultRecordBatchBuilder

import kcodecs
from kcodecs import NO_KEYS_MASK, CorruptBatchError
from mirror.engine.fetched_set import OutgoingBatch, route_one
from mirror.engine.topics import TopicRoute
from mirror.kafka import TopicPartition
from mirror.routing import Partitioning, RouteClass, RouteCounters, RoutingPolicy, route_batch

CODEC_IDS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
SOURCE = TopicPartition("src", 2)


def _their_batch(codec: str, *, keys: bool, no_keys_flag: bool = False, base_offset: int = 500) -> bytearray:
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=CODEC_IDS[codec], is_transactional=False,
                                        producer_id=9, producer_epoch=1, base_sequence=30, batch_size=1 << 20)
    for i in range(6):
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


@pytest.mark.parametrize("codec", ["none", "lz4", "zstd"])
@pytest.mark.parametrize("partitioning, keys, flag, expected", [
    (Partitioning.PRESERVE, True, False, RouteClass.PASSED_THROUGH),
    (Partitioning.BY_KEY, False, True, RouteClass.PASSED_THROUGH),
    (Partitioning.BY_KEY, True, False, RouteClass.REBUILT),  # the general path: no shortcut taken
])
def test_route_one_decides_as_route_batch_does(codec, partitioning, keys, flag, expected):
    route = _route(partitioning)
    data = _their_batch(codec, keys=keys, no_keys_flag=flag)
    last = 500 + 5
    ours, theirs = RouteCounters(), RouteCounters()
    fast = route_one(kcodecs.read_batch(bytearray(data)), last, SOURCE, route, ours, False)
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
def test_route_one_refuses_a_batch_whose_crc_fails_on_the_shortcut(flip):
    route = _route(Partitioning.PRESERVE)
    data = _their_batch("lz4", keys=True)
    data[flip] ^= 0x01
    counters = RouteCounters()
    with pytest.raises(CorruptBatchError, match="CRC"):
        route_one(kcodecs.read_batch(data), 505, SOURCE, route, counters, False)
    assert all(c.batches == 0 for c in counters.by_class.values())
