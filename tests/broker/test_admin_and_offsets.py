"""Admin and offset APIs through kafka-python's own client code: DescribeConfigs, ListOffsets by
timestamp (time index), long-polling Fetch, and topic auto-creation."""

from __future__ import annotations

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import ConfigResource, ConfigResourceType, KafkaAdminClient, NewTopic

from kafka.protocol.consumer import FetchRequest, ListOffsetsRequest

from mirror.broker import EmbeddedBroker
from mirror.kafka import KafkaClient, KafkaConnection
from mirror.kafka import TopicPartition as MTopicPartition

pytestmark = pytest.mark.interop


@pytest.fixture
def broker(tmp_path):
    with EmbeddedBroker(tmp_path / "data", auto_create_topics=True, default_partitions=3) as running:
        yield running


def test_describe_configs_reports_explicit_and_default_values(broker):
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    admin.create_topics([NewTopic("cfg", 2, 1, topic_configs={"message.timestamp.type": "LogAppendTime",
                                                                 "segment.bytes": "1048576"})])
    described = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, "cfg")], config_filter="all")
    (configs,) = [entries for by_name in described.values() for entries in by_name.values()]
    values = {name: (data["value"], data.get("config_source")) for name, data in configs.items()}
    admin.close()
    assert values["message.timestamp.type"] == ("LogAppendTime", "DYNAMIC_TOPIC_CONFIG")
    assert values["segment.bytes"] == ("1048576", "DYNAMIC_TOPIC_CONFIG")
    assert values["compression.type"] == ("producer", "DEFAULT_CONFIG")
    assert values["max.message.bytes"][0] == str(1024 * 1024 + 12)


def test_offsets_for_times_uses_the_time_index(broker):
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, linger_ms=0)
    for i in range(300):
        producer.send("times", value=b"x" * 100, timestamp_ms=1_000_000 + 10 * i, partition=0)
        if i % 10 == 9:
            producer.flush()  # separate batches, so the time index has several entries
    producer.close()
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, group_id=None)
    tp = TopicPartition("times", 0)
    found = consumer.offsets_for_times({tp: 1_000_000 + 10 * 123 - 5})[tp]
    assert (found.offset, found.timestamp) == (123, 1_000_000 + 10 * 123)
    assert consumer.offsets_for_times({tp: 9_999_999})[tp] is None
    assert consumer.beginning_offsets([tp])[tp] == 0 and consumer.end_offsets([tp])[tp] == 300
    consumer.close()


def test_list_offsets_max_timestamp_and_the_epoch_of_what_is_not_found(broker):
    # v7 (KIP-734): -3 is the first record with the largest time; found or not, the leader epoch is Kafka's.
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, linger_ms=0)
    for ts in [1_000, 5_000, 3_000, 5_000]:
        producer.send("latest", value=b"v", timestamp_ms=ts, partition=0)
        producer.flush()
    producer.close()
    topic, part = ListOffsetsRequest.ListOffsetsTopic, ListOffsetsRequest.ListOffsetsTopic.ListOffsetsPartition
    with KafkaConnection(broker.bootstrap) as wire:
        def look_up(timestamp: int) -> tuple[int, int, int]:
            wanted = part(partition_index=0, current_leader_epoch=-1, timestamp=timestamp)
            request = ListOffsetsRequest(replica_id=-1, isolation_level=0, topics=[topic(name="latest", partitions=[wanted])])
            (answer,) = wire.call(request, version=7).topics[0].partitions
            return answer.offset, answer.timestamp, answer.leader_epoch

        assert look_up(-3) == (1, 5_000, 0)
        assert look_up(4_000) == (1, 5_000, 0)
        assert look_up(5_001) == (-1, -1, -1)


def test_fetch_long_polls_until_data_arrives(broker):
    # A fetch held far longer than the test waits: data can only arrive if the append wakes it.
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, group_id=None, fetch_max_wait_ms=30_000,
                             request_timeout_ms=40_000)
    tp = TopicPartition("poll", 0)
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap)
    producer.send("poll", value=b"first", partition=0).get(10)  # auto-creates the topic
    consumer.assign([tp])
    consumer.seek(tp, 1)
    assert consumer.poll(timeout_ms=300) == {}  # nothing yet: the broker holds the fetch
    producer.send("poll", value=b"second", partition=0).get(10)
    records = consumer.poll(timeout_ms=10_000)[tp]
    assert [r.value for r in records] == [b"second"]
    producer.close()
    consumer.close()


def test_auto_created_topics_get_the_default_partition_count(broker):
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap)  # its metadata requests allow auto-creation
    assert producer.partitions_for("auto") == {0, 1, 2}
    producer.close()
    assert "auto" in broker.state.topics.topics


def test_a_fetch_response_keeps_to_max_bytes_past_its_first_partition(broker):
    """KIP-74: only the first non-empty partition gets a whole batch beyond the limit; a later one
    whose next batch does not fit in what is left gets nothing (Kafka's ``ReplicaManager``
    answers v3+ fetches so; kafka-python's consumer refuses a response holding only part of a
    batch). Checked with kafka-python's own Fetch schema and consumer."""
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, linger_ms=0, batch_size=64 * 1024)
    value = bytes(range(256)) * 40  # 10 KiB, one record per batch (flushed)
    for partition in (0, 1):
        producer.send("cap", value=value, partition=partition)
        producer.flush()
    producer.close()
    client = KafkaClient(broker.bootstrap)
    try:
        conn = client.connect(next(iter(client.leaders([MTopicPartition("cap", 0)]))))
        limit = 15_000
        partitions = [FetchRequest.FetchTopic.FetchPartition(partition=p, fetch_offset=0, log_start_offset=-1,
                                                             partition_max_bytes=limit) for p in (0, 1)]
        request = FetchRequest(replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=limit, isolation_level=0,
                               session_id=0, session_epoch=-1, rack_id="", forgotten_topics_data=[],
                               topics=[FetchRequest.FetchTopic(topic="cap", partitions=partitions)])
        sent = conn.send(request)
        response = conn.receive(sent)
        conn.close()
    finally:
        client.close()
    (topic,) = response.responses
    sizes = [len(part.records or b"") for part in sorted(topic.partitions, key=lambda part: part.partition_index)]
    assert sizes[0] > len(value) and sum(sizes) <= limit, sizes
    assert sizes[1] == 0
    consumer = KafkaConsumer("cap", bootstrap_servers=broker.bootstrap, group_id=None, auto_offset_reset="earliest",
                             fetch_max_bytes=limit, consumer_timeout_ms=5000)
    assert [m.value for m in consumer] == [value, value]
    consumer.close()
