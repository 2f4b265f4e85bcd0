"""A source leader far away gets more than one fetch in flight (issue 35, WAN).

One fetch in flight per leader caps a copy at ``max_bytes`` a round trip: 4 MiB per 100 ms,
40 MiB/s, whatever the link. The fetcher measures how long a leader's answers take and
keeps ``max_bytes`` in flight per 25 ms of that: fetches of partitions no other one is
fetching, each asking for a multiple of ``max_bytes`` when the partitions are fewer than that.
Checked on an embedded broker behind a proxy that adds 100 ms (it advertises the proxy, so
the fetcher's connection crosses it), against the same broker near: every record is read,
once, in order, either way."""

from __future__ import annotations

import contextlib
from typing import Iterator

from fault_proxy import FaultProxy

import kcodecs
from kcodecs import Record

from mirror.broker import EmbeddedBroker
from mirror.kafka import Fetcher, KafkaClient, NewTopic, TopicPartition

PARTITIONS = 4
BATCHES = 12
MAX_BYTES = 256 * 1024


def _fill(client: KafkaClient) -> dict[TopicPartition, list[bytes]]:
    client.create_topics([NewTopic("far", PARTITIONS)])
    written: dict[TopicPartition, list[bytes]] = {}
    for p in range(PARTITIONS):
        tp = TopicPartition("far", p)
        for b in range(BATCHES):
            values = [b"%d-%d-%d-" % (p, b, i) + bytes(300) for i in range(200)]
            client.produce([(tp, kcodecs.build_batch([Record(key=None, value=v, timestamp=0) for v in values]))])
            written.setdefault(tp, []).extend(values)
    return written


def _read(bootstrap: str, ends: dict[TopicPartition, int]) -> tuple[dict[TopicPartition, list[bytes]], int, int]:
    """Everything up to ``ends``, small fetches (so that many are needed); the most units and
    the largest answer (bytes of records) that were in flight at once."""
    read: dict[TopicPartition, list[bytes]] = {tp: [] for tp in ends}
    offsets = {tp: 0 for tp in ends}
    most = largest = 0
    with KafkaClient(bootstrap) as client:
        fetcher = Fetcher(client, max_bytes=MAX_BYTES)
        while any(offsets[tp] < end for tp, end in ends.items()):
            fetcher.send({tp: offset for tp, offset in offsets.items() if offset < ends[tp] and not fetcher.fetching(tp)})
            most = max(most, fetcher.in_flight())
            conn = fetcher.connections()[0]
            answered = fetcher.on_readable(conn)
            largest = max(largest, sum(len(fetched.records) for fetched in answered.values()))
            for tp, fetched in answered.items():
                for batch in kcodecs.iter_batches(fetched.records):
                    for record in batch.records():
                        if record.offset >= offsets[tp]:
                            read[tp].append(record.value)
                    offsets[tp] = max(offsets[tp], batch.last_offset + 1)
        fetcher.close()
    return read, most, largest


@contextlib.contextmanager
def _wan() -> Iterator[FaultProxy]:
    """A proxy with a 100 ms round trip, for a broker to advertise (set its ``target`` once started)."""
    proxy = FaultProxy()
    proxy.rtt_s = 0.100
    try:
        yield proxy
    finally:
        proxy.close()


def test_a_leader_across_a_wan_gets_a_fetch_in_flight_per_25_ms_of_its_round_trip(tmp_path):
    with _wan() as proxy, EmbeddedBroker(tmp_path / "far", advertised_port=proxy.port) as far_broker, \
            EmbeddedBroker(tmp_path / "near") as near_broker:
        proxy.target = ("127.0.0.1", far_broker.port)
        far_address = f"127.0.0.1:{proxy.port}"
        with KafkaClient(far_address) as client:
            written = _fill(client)
            ends = client.list_offsets(list(written), "latest")
        far, far_most, _ = _read(far_address, ends)
        with KafkaClient(near_broker.bootstrap) as client:
            assert _fill(client) == written
        near, near_most, _ = _read(near_broker.bootstrap, ends)
    assert far == written and near == written
    assert far_most >= 3  # up to 1 + 100 // 25, as partitions come free
    assert near_most == 1


def test_one_partition_far_away_asks_for_more_than_max_bytes_a_fetch(tmp_path):
    """With one partition, one fetch is all there can be in flight: the window is filled by
    asking for more bytes in it. Near, the same partition never gets more than ``max_bytes``."""
    with _wan() as proxy, EmbeddedBroker(tmp_path / "far", advertised_port=proxy.port) as far_broker, \
            EmbeddedBroker(tmp_path / "near") as near_broker:
        proxy.target = ("127.0.0.1", far_broker.port)
        far_address = f"127.0.0.1:{proxy.port}"
        with KafkaClient(far_address) as client:
            written = {tp: values for tp, values in _fill(client).items() if tp.partition == 0}
            ends = client.list_offsets(list(written), "latest")
        far, far_most, far_largest = _read(far_address, ends)
        with KafkaClient(near_broker.bootstrap) as client:
            _fill(client)
        near, near_most, near_largest = _read(near_broker.bootstrap, ends)
    assert far == written and near == written
    assert far_most >= 3 and near_most == 1
    assert far_largest > MAX_BYTES >= near_largest
