"""KafkaClient against the embedded broker, with kafka-python as the independent reader and
writer: what the client produces kafka-python's consumer reads back, what it fetches
kafka-python's MemoryRecords decodes, and what it creates kafka-python's admin client sees.
Failures: an unreachable cluster, a broker that comes up late or restarts, a corrupt batch,
unknown topics, error codes injected into the broker's produce and fetch handlers, and a
broker that closes the connection on a new ApiVersions version.
"""

from __future__ import annotations

import dataclasses

import logging
import socket
import struct
import threading

import pytest
from kafka import KafkaConsumer
from kafka import TopicPartition as KTopicPartition
from kafka.admin import ConfigResource, ConfigResourceType, KafkaAdminClient
from kafka.record.memory_records import MemoryRecords

import kcodecs
from kcodecs import Compression, Record
from mirror.broker import EmbeddedBroker
from mirror.kafka.admin import describe_topic_configs
from mirror.broker.handlers import fetch as fetch_handler
from mirror.broker.handlers import produce as produce_handler
from mirror.kafka import (
    BrokerApiError,
    ClusterUnreachableError,
    KafkaClient,
    NewTopic,
    OffsetOutOfRangeError,
    RetryPolicy,
    TopicCreationError,
    TopicPartition,
    UnknownTopicError,
)
from mirror.kafka.client import READ_COMMITTED
from mirror.protocol import ProducedPartition

FAST = RetryPolicy(attempts=4, initial_backoff_s=0.01, max_backoff_s=0.05)
BASE_TS = 1_700_000_000_000


@pytest.fixture
def broker(tmp_path):
    with EmbeddedBroker(tmp_path / "data") as running:
        yield running


@pytest.fixture
def client(broker):
    with KafkaClient(broker.bootstrap, retry=FAST, request_timeout_s=10) as running:
        yield running


def records(prefix: str, n: int, *, keyed: bool = True) -> list[Record]:
    return [Record(key=f"{prefix}-k{i % 3}".encode() if keyed else None, value=f"{prefix}-v{i}".encode(),
                   timestamp=BASE_TS + i, headers=[("i", str(i).encode())]) for i in range(n)]


@pytest.fixture(autouse=True)
def _retry_lines_captured(caplog):
    caplog.set_level(logging.DEBUG, logger="mirror.kafka.client")


def retry_lines(caplog) -> list[str]:
    """The client's line per retried attempt (DEBUG: the job reports outages itself)."""
    return [r.getMessage() for r in caplog.records if r.name == "mirror.kafka.client" and "attempt" in r.getMessage()]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def consume(bootstrap: str, tp: TopicPartition, n: int) -> list[tuple[int, bytes | None, bytes | None, list]]:
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, group_id=None,
                             consumer_timeout_ms=10_000)
    ktp = KTopicPartition(tp.topic, tp.partition)
    consumer.assign([ktp])
    consumer.seek_to_beginning(ktp)
    out = []
    for message in consumer:
        out.append((message.offset, message.key, message.value, list(message.headers)))
        if len(out) == n:
            break
    consumer.close()
    return out


def unassigned(raw: memoryview) -> bytes:
    """A stored batch with the header fields the broker assigns put back as a producer sends them."""
    batch = bytearray(raw)
    kcodecs.set_base_offset(batch, 0)
    kcodecs.set_partition_leader_epoch(batch, -1)
    return bytes(batch)


def decode(data) -> list[tuple[int, bytes | None, bytes | None]]:
    out = []
    memory = MemoryRecords(bytes(data))
    while (batch := memory.next_batch()) is not None:
        out.extend((record.offset, record.key, record.value) for record in batch)
    return out


@pytest.mark.interop
def test_created_topics_are_listed_and_described_and_seen_by_kafka_python(broker, client):
    client.create_topics([NewTopic("lat", 3, {"message.timestamp.type": "LogAppendTime", "cleanup.policy": "compact"}),
                          NewTopic("plain", 1)])
    client.create_topics([NewTopic("plain", 1)])  # TOPIC_ALREADY_EXISTS is fine
    assert client.topics() == {"lat": 3, "plain": 1}
    configs = describe_topic_configs(client, ["lat", "plain"])
    assert configs["lat"]["message.timestamp.type"] == "LogAppendTime" and configs["lat"]["cleanup.policy"] == "compact"
    assert configs["plain"]["message.timestamp.type"] == "CreateTime"

    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        assert sorted(admin.list_topics()) == ["lat", "plain"]
        described = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, "lat")], config_filter="all")
        (theirs,) = [entries for by_name in described.values() for entries in by_name.values()]
        assert {name: data["value"] for name, data in theirs.items()} == configs["lat"]
    finally:
        admin.close()


def test_create_topics_rejects_a_bad_config_at_once_and_makes_the_others(client, caplog):
    with pytest.raises(TopicCreationError) as info:
        client.create_topics([NewTopic("bad", 1, {"no.such.config": "1"}), NewTopic("good", 2)])
    (refusal,) = info.value.refused.values()
    assert list(info.value.refused) == ["bad"]
    assert (refusal.api, refusal.error_name, refusal.topic) == ("CreateTopics", "INVALID_CONFIG", "bad")
    assert "could not create 1 topic: bad (INVALID_CONFIG" in str(info.value) and "no.such.config" in str(info.value)
    assert retry_lines(caplog) == []
    assert client.topics().get("good") == 2


@pytest.mark.interop
def test_produce_to_several_partitions_in_one_call_keeps_order(broker, client):
    client.create_topics([NewTopic("t", 3)])
    p0, p1, p2 = (TopicPartition("t", i) for i in range(3))
    first, second, third = records("a", 4), records("b", 3), records("c", 5)
    unkeyed = records("d", 2, keyed=False)
    batches = [
        (p0, kcodecs.build_batch(first, compression=Compression.LZ4)),
        (p1, bytearray(kcodecs.build_batch(unkeyed))),
        (p0, memoryview(kcodecs.build_batch(second, compression=Compression.GZIP))),
        (p2, kcodecs.build_batch(third, compression=Compression.ZSTD)),
        (p0, kcodecs.build_batch(third)),
    ]
    assert client.produce(batches) == [0, 0, 4, 0, 7]
    expected = [(i, r.key, r.value, r.headers) for i, r in enumerate(first + second + third)]
    assert consume(broker.bootstrap, p0, len(expected)) == expected
    assert [(o, k, v) for o, k, v, _ in consume(broker.bootstrap, p1, 2)] == [(0, None, b"d-v0"), (1, None, b"d-v1")]
    assert client.list_offsets([p0, p1, p2], "latest") == {p0: 12, p1: 2, p2: 5}
    # No transaction open: the last stable offset is the high watermark.
    assert client.list_offsets([p0, p1, p2], "latest", isolation_level=READ_COMMITTED) == {p0: 12, p1: 2, p2: 5}


@pytest.mark.interop
def test_fetch_returns_the_stored_bytes(client):
    client.create_topics([NewTopic("f", 1)])
    tp = TopicPartition("f", 0)
    batches = [kcodecs.build_batch(records(str(n), 3), compression=codec)
               for n, codec in enumerate([Compression.NONE, Compression.SNAPPY, Compression.ZSTD])]
    client.produce([(tp, batch) for batch in batches])

    fetched = client.fetch(tp, 0, max_bytes=1 << 20)
    assert (fetched.high_watermark, fetched.log_start_offset, fetched.last_stable_offset) == (9, 0, 9)
    assert fetched.aborted_transactions == ()
    expected = [(i, r.key, r.value) for i, r in enumerate(r for n in range(3) for r in records(str(n), 3))]
    assert decode(fetched.records) == expected
    # Offsets and leader epoch aside, the broker stored and returned each batch byte for byte.
    assert [unassigned(b.raw) for b in kcodecs.iter_batches(fetched.records)] == batches

    from_middle = client.fetch(tp, 4, max_bytes=1)  # KIP-74: at least the batch holding offset 4
    assert decode(from_middle.records)[0][0] == 3 and len(list(kcodecs.iter_batches(from_middle.records))) == 1


def test_fetch_at_the_end_is_empty_and_past_it_out_of_range(client, caplog):
    client.create_topics([NewTopic("e", 1)])
    tp = TopicPartition("e", 0)
    client.produce([(tp, kcodecs.build_batch(records("x", 2)))])
    assert client.fetch(tp, 2, max_bytes=1 << 20, max_wait_ms=10).records == b""
    with pytest.raises(OffsetOutOfRangeError) as info:
        client.fetch(tp, 3, max_bytes=1 << 20)
    assert (info.value.tp, info.value.offset, info.value.log_start_offset, info.value.high_watermark) == (tp, 3, 0, 2)
    assert retry_lines(caplog) == []


@pytest.mark.interop
def test_fetch_below_the_log_start_is_out_of_range_and_list_offsets_agree(broker, client):
    # One batch per segment and old timestamps: retention deletes every segment but the active one.
    client.create_topics([NewTopic("r", 1, {"segment.bytes": "150", "retention.ms": "3600000"})])
    tp = TopicPartition("r", 0)
    client.produce([(tp, kcodecs.build_batch(records(str(n), 2))) for n in range(4)])
    assert client.list_offsets([tp], "earliest") == {tp: 6}
    assert client.list_offsets([tp], "latest") == {tp: 8}
    with pytest.raises(OffsetOutOfRangeError) as info:
        client.fetch(tp, 0, max_bytes=1 << 20)
    assert (info.value.log_start_offset, info.value.high_watermark) == (6, 8)
    assert client.fetch(tp, 6, max_bytes=1 << 20).log_start_offset == 6

    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, group_id=None)
    ktp = KTopicPartition("r", 0)
    assert (consumer.beginning_offsets([ktp])[ktp], consumer.end_offsets([ktp])[ktp]) == (6, 8)
    consumer.close()


def test_list_offsets_of_empty_partitions_and_no_partitions(client):
    client.create_topics([NewTopic("o", 2)])
    tps = [TopicPartition("o", 0), TopicPartition("o", 1)]
    assert client.list_offsets(tps, "earliest") == client.list_offsets(tps, "latest") == {tps[0]: 0, tps[1]: 0}
    assert client.list_offsets([], "latest") == {}


def test_corrupt_batch_fails_at_once_naming_the_partition(client, caplog):
    client.create_topics([NewTopic("c", 2)])
    good, bad = TopicPartition("c", 0), TopicPartition("c", 1)
    corrupt = bytearray(kcodecs.build_batch(records("x", 3)))
    corrupt[-1] ^= 0xFF  # payload byte: the CRC no longer matches
    with pytest.raises(BrokerApiError) as info:
        client.produce([(good, kcodecs.build_batch(records("y", 2))), (bad, corrupt)])
    error = info.value
    assert (error.api, error.error_name, error.tp, error.retriable) == ("Produce", "CORRUPT_MESSAGE", bad, False)
    assert "c/1" in str(error)
    assert retry_lines(caplog) == []
    assert client.list_offsets([good, bad], "latest") == {good: 2, bad: 0}


def fail_produce(monkeypatch, failures: dict[TopicPartition, list[int]]) -> None:
    """Make the broker answer the next produces to some partitions with the given error codes,
    without appending them (as a broker that is no longer the leader would)."""
    original = produce_handler.handle

    async def handle(request, version, state):
        failed: dict[str, list[tuple[int, int]]] = {}
        keep = []
        for part in request.partitions:
            codes = failures.get(TopicPartition(part.topic, part.partition))
            if codes:
                failed.setdefault(part.topic, []).append((part.partition, codes.pop(0)))
            else:
                keep.append(part)
        request.partitions[:] = keep
        response = await original(request, version, state)
        for topic, failures_of_topic in failed.items():
            for index, code in failures_of_topic:
                response.partitions.append(ProducedPartition(topic, index, code, error_message="injected"))
        return response

    monkeypatch.setattr(produce_handler, "handle", handle)


def test_retriable_produce_errors_are_retried_without_reordering(client, monkeypatch, caplog):
    client.create_topics([NewTopic("retry", 2)])
    p0, p1 = TopicPartition("retry", 0), TopicPartition("retry", 1)
    fail_produce(monkeypatch, {p1: [6, 7]})  # NOT_LEADER_OR_FOLLOWER, then REQUEST_TIMED_OUT
    a, b, c, d = (kcodecs.build_batch(records(name, 2)) for name in "abcd")
    assert client.produce([(p1, a), (p0, b), (p1, c), (p0, d)]) == [0, 0, 2, 2]
    fetched = client.fetch(p1, 0, max_bytes=1 << 20)
    assert [value for _, _, value in decode(fetched.records)] == [b"a-v0", b"a-v1", b"c-v0", b"c-v1"]
    warnings = retry_lines(caplog)
    assert len(warnings) == 2 and "NOT_LEADER" in warnings[0] and "REQUEST_TIMED_OUT" in warnings[1]


def test_non_retriable_produce_error_is_not_retried(client, monkeypatch, caplog):
    client.create_topics([NewTopic("fatal", 1)])
    tp = TopicPartition("fatal", 0)
    fail_produce(monkeypatch, {tp: [10]})  # MESSAGE_SIZE_TOO_LARGE
    with pytest.raises(BrokerApiError) as info:
        client.produce([(tp, kcodecs.build_batch(records("x", 1)))])
    assert (info.value.error_name, info.value.tp, info.value.detail) == ("MESSAGE_SIZE_TOO_LARGE", tp, "injected")
    assert retry_lines(caplog) == []


def test_a_leader_error_on_fetch_is_retried(client, monkeypatch, caplog):
    client.create_topics([NewTopic("fl", 1)])
    tp = TopicPartition("fl", 0)
    client.produce([(tp, kcodecs.build_batch(records("x", 3)))])
    original, calls = fetch_handler.handle, []

    async def handle(request, version, state):
        response = await original(request, version, state)
        calls.append(version)
        if len(calls) == 1:
            response = dataclasses.replace(response, partitions=[dataclasses.replace(response.partitions[0], error_code=6)])
        return response

    monkeypatch.setattr(fetch_handler, "handle", handle)
    assert len(decode(client.fetch(tp, 0, max_bytes=1 << 20).records)) == 3
    assert len(calls) == 2 and len(retry_lines(caplog)) == 1


def test_produce_with_acks_one_and_zero(client):
    client.create_topics([NewTopic("acks", 1)])
    tp = TopicPartition("acks", 0)
    assert client.produce([(tp, kcodecs.build_batch(records("x", 2)))], acks=1) == [0]
    assert client.produce([(tp, kcodecs.build_batch(records("y", 3)))], acks=0) == [-1]  # no response to read
    assert client.list_offsets([tp], "latest") == {tp: 5}


def test_unknown_topic_and_partition_are_retried_then_reported(client, caplog):
    with pytest.raises(UnknownTopicError) as info:
        client.fetch(TopicPartition("missing", 0), 0, max_bytes=1024)
    assert info.value.topic == "missing"
    assert len(retry_lines(caplog)) == FAST.attempts - 1
    assert "fetch missing/0" in retry_lines(caplog)[0]

    client.create_topics([NewTopic("one", 1)])
    with pytest.raises(BrokerApiError) as info:
        client.produce([(TopicPartition("one", 5), kcodecs.build_batch(records("x", 1)))])
    assert (info.value.error_name, info.value.tp) == ("UNKNOWN_TOPIC_OR_PARTITION", TopicPartition("one", 5))
    assert info.value.cluster == client.bootstrap  # retried to the end: the outage line names the cluster
    with pytest.raises(UnknownTopicError):
        describe_topic_configs(client, ["missing"])


def test_unreachable_cluster_raises_after_the_retries(caplog):
    address = f"127.0.0.1:{free_port()}"
    with KafkaClient([address, address], retry=FAST) as client, pytest.raises(ClusterUnreachableError) as info:
        client.topics()
    assert info.value.bootstrap == f"{address},{address}"
    assert address in info.value.reason and "refused" in info.value.reason
    assert len(retry_lines(caplog)) == FAST.attempts - 1


def test_a_broker_that_starts_late_is_reached_by_the_retries(tmp_path, caplog):
    port = free_port()
    broker = EmbeddedBroker(tmp_path / "late", port=port)
    starter = threading.Timer(0.3, broker.start)
    starter.start()
    try:
        patient = RetryPolicy(attempts=30, initial_backoff_s=0.02, max_backoff_s=0.1)
        with KafkaClient(f"127.0.0.1:{port}", retry=patient) as client:
            client.create_topics([NewTopic("late", 2)])
            assert client.topics() == {"late": 2}
        assert retry_lines(caplog)  # it did have to wait
    finally:
        starter.join()
        broker.stop()


def test_the_client_reconnects_after_a_broker_restart(tmp_path, caplog):
    port = free_port()
    tp = TopicPartition("k", 0)
    with KafkaClient(f"127.0.0.1:{port}", retry=FAST) as client:
        with EmbeddedBroker(tmp_path / "data", port=port):
            client.create_topics([NewTopic("k", 1)])
            client.produce([(tp, kcodecs.build_batch(records("x", 2)))])
        with EmbeddedBroker(tmp_path / "data", port=port):
            assert client.produce([(tp, kcodecs.build_batch(records("y", 2)))]) == [2]
            assert len(decode(client.fetch(tp, 0, max_bytes=1 << 20).records)) == 4
    assert any("produce" in message for message in retry_lines(caplog))


class OldBrokerProxy:
    """Forwards to a broker, but closes a connection whose first request is ApiVersions v1+,
    as brokers before KIP-511 (Kafka 2.4) do with versions they do not know."""

    def __init__(self, target: int):
        self.target = target
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = self.server.getsockname()[1]
        self.refused = 0
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                downstream, _ = self.server.accept()
            except OSError:
                return
            head = downstream.recv(8, socket.MSG_WAITALL)
            _size, api_key, version = struct.unpack(">ihh", head)
            if api_key == 18 and version > 0:
                self.refused += 1
                downstream.close()
                continue
            upstream = socket.create_connection(("127.0.0.1", self.target))
            upstream.sendall(head)
            for source, sink in ((downstream, upstream), (upstream, downstream)):
                threading.Thread(target=self._pump, args=(source, sink), daemon=True).start()

    @staticmethod
    def _pump(source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                sink.sendall(data)
        except OSError:
            pass
        finally:
            sink.close()

    def close(self) -> None:
        self.server.close()


def test_api_versions_falls_back_to_v0_when_the_broker_hangs_up(broker):
    proxy = OldBrokerProxy(broker.port)
    try:
        with KafkaClient(f"127.0.0.1:{proxy.port}", retry=FAST) as client:
            client.create_topics([NewTopic("old", 1)])  # through the proxy: Metadata, then CreateTopics
            assert client.topics() == {"old": 1}
        assert proxy.refused >= 1
    finally:
        proxy.close()


def test_many_partitions_and_batches_round_trip(client):
    client.create_topics([NewTopic("many", 16)])
    tps = [TopicPartition("many", p) for p in range(16)]
    batches = [(tp, kcodecs.build_batch(records(f"{tp.partition}-{n}", 50), compression=Compression.LZ4))
               for n in range(5) for tp in tps]
    offsets = client.produce(batches)
    assert offsets == [50 * n for n in range(5) for _ in tps]
    assert client.list_offsets(tps, "latest") == {tp: 250 for tp in tps}
    assert all(len(decode(client.fetch(tp, 0, max_bytes=1 << 20).records)) == 250 for tp in tps)
