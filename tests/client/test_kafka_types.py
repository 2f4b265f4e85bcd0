"""Pure parts of the Kafka client: partition keys, error values, and every request the client
builds encoded at every version it may negotiate (real Kafka speaks versions the embedded
broker does not, so kafka-python's decoder checks those)."""

from __future__ import annotations

import pytest
from kafka.protocol.admin import CreateTopicsRequest
from kafka.protocol.consumer import FetchRequest, ListOffsetsRequest
from kafka.protocol.producer import ProduceRequest

import kcodecs
from kcodecs import KMirrorError
from mirror.kafka import (
    BrokerApiError,
    InvalidTopicPartitionError,
    NewTopic,
    OffsetOutOfRangeError,
    TopicPartition,
    UnknownTopicError,
)
from mirror.kafka import broker_connection
from mirror.kafka import client as client_module
from mirror.kafka import topic_creation


@pytest.mark.parametrize("name", ["t", "a.b", "under_score", "da-sh", "mixed.a_b-c.9"])
def test_topic_partition_text_round_trips(name):
    tp = TopicPartition(name, 17)
    assert str(tp) == f"{name}/17"
    assert TopicPartition.parse(str(tp)) == tp


@pytest.mark.parametrize("text", ["", "topic", "/3", "topic/", "topic/-1", "topic/x", "topic/1.5"])
def test_topic_partition_parse_rejects_malformed_text(text):
    with pytest.raises(InvalidTopicPartitionError) as info:
        TopicPartition.parse(text)
    assert isinstance(info.value, (KMirrorError, ValueError))


def test_topic_partitions_sort_by_topic_then_partition():
    tps = [TopicPartition("b", 0), TopicPartition("a", 10), TopicPartition("a", 2)]
    assert sorted(tps) == [TopicPartition("a", 2), TopicPartition("a", 10), TopicPartition("b", 0)]


def test_new_topic_defaults_are_empty_configs_and_broker_replication():
    topic = NewTopic("t", 3)
    assert dict(topic.configs) == {} and topic.replication_factor == -1


def test_broker_errors_carry_names_and_kafka_retriability():
    tp = TopicPartition("t", 1)
    not_leader = BrokerApiError.from_code("Produce", 6, tp)
    assert (not_leader.error_name, not_leader.code, not_leader.retriable, not_leader.topic) == (
        "NOT_LEADER_FOR_PARTITION", 6, True, "t")
    corrupt = BrokerApiError.from_code("Produce", 2, tp, detail="bad crc")
    assert not corrupt.retriable and "t/1" in str(corrupt) and "CORRUPT_MESSAGE" in str(corrupt) and "bad crc" in str(corrupt)
    out_of_range = OffsetOutOfRangeError(tp, 99, log_start_offset=5, high_watermark=10)
    assert not out_of_range.retriable and out_of_range.offset == 99 and "[5, 10]" in str(out_of_range)
    unknown = UnknownTopicError("gone")
    assert isinstance(unknown, BrokerApiError) and unknown.topic == "gone" and unknown.retriable


def _versions(request_class) -> range:
    low, high = broker_connection.SPOKEN[request_class]
    return range(low, high + 1)


def _round_trip(request, version: int):
    request.API_VERSION = version
    return type(request).decode(request.encode(), version=version)


@pytest.mark.parametrize("version", _versions(ProduceRequest))
def test_produce_request_encodes_at_every_spoken_version(version):
    batch = kcodecs.build_batch([kcodecs.Record(key=b"k", value=b"v", timestamp=1)])
    request = client_module._produce_request({TopicPartition("t", 0): memoryview(batch), TopicPartition("t", 3): batch},
                                             -1, 5000)
    decoded = _round_trip(request, version)
    (topic,) = decoded.topic_data
    assert topic.name == "t" and [(p.index, bytes(p.records)) for p in topic.partition_data] == [(0, batch), (3, batch)]


@pytest.mark.parametrize("version", _versions(ListOffsetsRequest))
def test_list_offsets_request_encodes_at_every_spoken_version(version):
    request = client_module._list_offsets_request([TopicPartition("t", 0), TopicPartition("u", 2)], -2,
                                                  client_module.READ_COMMITTED, 5000)
    decoded = _round_trip(request, version)
    assert [(t.name, [(p.partition_index, p.timestamp) for p in t.partitions]) for t in decoded.topics] == [
        ("t", [(0, -2)]), ("u", [(2, -2)])]
    if version >= 2:  # KIP-98: the isolation level, hence the last stable offset, from v2 on
        assert decoded.isolation_level == client_module.READ_COMMITTED



@pytest.mark.parametrize("version", _versions(FetchRequest))
def test_fetch_request_encodes_at_every_spoken_version(version):
    decoded = _round_trip(client_module._fetch_request(TopicPartition("t", 4), 123, 1 << 20, 250,
                                                       client_module.READ_COMMITTED), version)
    (topic,) = decoded.topics
    (part,) = topic.partitions
    assert (decoded.replica_id, decoded.max_wait_ms, decoded.min_bytes, decoded.max_bytes) == (-1, 250, 1, 1 << 20)
    assert decoded.isolation_level == client_module.READ_COMMITTED
    assert (topic.topic, part.partition, part.fetch_offset, part.partition_max_bytes) == ("t", 4, 123, 1 << 20)


@pytest.mark.parametrize("version", _versions(CreateTopicsRequest))
def test_create_topics_request_encodes_at_every_spoken_version(version):
    topics = [NewTopic("a", 3, {"cleanup.policy": "compact"}), NewTopic("b", 1, replication_factor=1)]
    decoded = _round_trip(topic_creation._request(topics, 5000), version)
    assert [(t.name, t.num_partitions, t.replication_factor, {c.name: c.value for c in t.configs})
            for t in decoded.topics] == [("a", 3, -1, {"cleanup.policy": "compact"}), ("b", 1, 1, {})]
