"""Topic administration as two independent admin clients see it (issue 37): CreatePartitions,
IncrementalAlterConfigs and AlterConfigs, DeleteTopics, DeleteRecords and the ACL APIs.

Each change is made with one client (librdkafka through confluent-kafka, or kafka-python) and
checked with the other, and again after the broker restarts on the same data directory.
"""

from __future__ import annotations

import time
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException
from confluent_kafka import TopicPartition as CTopicPartition
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewPartitions,
    ResourcePatternType,
    ResourceType,
)
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka import errors as kerr
from kafka.admin import ACLFilter, ACLOperation, ACLPermissionType, ACLResourcePatternType, KafkaAdminClient
from kafka.admin import ConfigResource as KConfigResource
from kafka.admin import ConfigResourceType, NewTopic, ResourcePatternFilter
from kafka.admin import ResourceType as KResourceType

from kafka.protocol.admin import (
    CreatePartitionsRequest,
    DeleteTopicsRequest,
    IncrementalAlterConfigsRequest,
)

from mirror.broker import EmbeddedBroker
from mirror.kafka import KafkaConnection

pytestmark = pytest.mark.interop

TIMEOUT_S = 30
DAY_MS = 24 * 3600 * 1000


@pytest.fixture
def data_dir(tmp_path) -> Path:
    return tmp_path / "data"


@pytest.fixture
def broker(data_dir):
    with EmbeddedBroker(data_dir) as running:
        yield running


def confluent_admin(bootstrap: str) -> AdminClient:
    return AdminClient({"bootstrap.servers": bootstrap})


def kafka_python_admin(bootstrap: str) -> KafkaAdminClient:
    return KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=10_000)


def create(bootstrap: str, name: str, partitions: int = 1, **configs: str) -> None:
    """Create a topic with kafka-python; configs by their Python names (``segment_bytes=...``)."""
    admin = kafka_python_admin(bootstrap)
    try:
        admin.create_topics([NewTopic(name, partitions, 1,
                                      topic_configs={key.replace("_", "."): value for key, value in configs.items()})])
    finally:
        admin.close()


def failure(future) -> KafkaError:
    """The error a confluent-kafka admin future fails with (its AdminClient must still be referenced:
    a client collected meanwhile fails its futures with _DESTROY)."""
    with pytest.raises(KafkaException) as raised:
        future.result(TIMEOUT_S)
    return raised.value.args[0]


def outcome(future) -> KafkaError | None:
    try:
        future.result(TIMEOUT_S)
        return None
    except KafkaException as exc:
        return exc.args[0]


def partitions_per_confluent(bootstrap: str, topic: str) -> int:
    return len(confluent_admin(bootstrap).list_topics(topic, timeout=TIMEOUT_S).topics[topic].partitions)


def partitions_per_kafka_python(bootstrap: str, topic: str) -> int:
    admin = kafka_python_admin(bootstrap)
    try:
        (described,) = admin.describe_topics([topic])
        return len(described["partitions"])
    finally:
        admin.close()


def configs_per_kafka_python(bootstrap: str, topic: str) -> dict[str, tuple[str, str]]:
    """Every config of ``topic``: (value, source) as kafka-python's DescribeConfigs reads them."""
    admin = kafka_python_admin(bootstrap)
    try:
        described = admin.describe_configs([KConfigResource(ConfigResourceType.TOPIC, topic)], config_filter="all")
    finally:
        admin.close()
    (configs,) = [entries for by_name in described.values() for entries in by_name.values()]
    return {name: (data["value"], data["config_source"]) for name, data in configs.items()}


def configs_per_confluent(bootstrap: str, topic: str) -> dict[str, tuple[str, str]]:
    """Every config of ``topic``: (value, source) as librdkafka's DescribeConfigs reads them."""
    admin = confluent_admin(bootstrap)
    (future,) = admin.describe_configs([ConfigResource(ResourceType.TOPIC, topic)]).values()
    return {name: (entry.value, ConfigSource(entry.source).name) for name, entry in future.result(TIMEOUT_S).items()}


def incremental(topic: str, *changes: tuple[str, str | None, AlterConfigOpType]) -> ConfigResource:
    entries = [ConfigEntry(name, value, incremental_operation=op) for name, value, op in changes]
    return ConfigResource(ResourceType.TOPIC, topic, incremental_configs=entries)


def alter_incrementally(bootstrap: str, *resources: ConfigResource,
                        validate_only: bool = False) -> dict[str, KafkaError | None]:
    """What librdkafka's IncrementalAlterConfigs answers for each resource, by name: None or the error."""
    admin = confluent_admin(bootstrap)
    futures = admin.incremental_alter_configs(list(resources), validate_only=validate_only)
    return {resource.name: outcome(future) for resource, future in futures.items()}


def watermarks(bootstrap: str, topic: str, partition: int = 0) -> tuple[int, int]:
    """(earliest, latest) as librdkafka's consumer asks them (ListOffsets)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "watermarks"})
    try:
        return consumer.get_watermark_offsets(CTopicPartition(topic, partition), timeout=TIMEOUT_S, cached=False)
    finally:
        consumer.close()


def earliest_per_kafka_python(bootstrap: str, topic: str, partition: int = 0) -> int:
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None)
    try:
        tp = TopicPartition(topic, partition)
        return consumer.beginning_offsets([tp])[tp]
    finally:
        consumer.close()


def produce_batches(bootstrap: str, topic: str, count: int, *, partition: int = 0, timestamp_ms: int | None = None,
                    size: int = 200) -> None:
    """``count`` records, one batch each (flushed one by one), valued ``b"<i>:..."``."""
    producer = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=0)
    for i in range(count):
        producer.send(topic, value=b"%d:" % i + b"x" * size, partition=partition, timestamp_ms=timestamp_ms)
        producer.flush()
    producer.close()


def segment_bases(data_dir: Path, topic: str, partition: int = 0) -> list[int]:
    return sorted(int(path.stem) for path in (data_dir / f"{topic}-{partition}").glob("*.log"))


def read_from_earliest(bootstrap: str, topic: str, partition: int = 0) -> list[int]:
    """The record numbers a kafka-python consumer reads from the earliest offset to the end."""
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, auto_offset_reset="earliest",
                             consumer_timeout_ms=3000)
    tp = TopicPartition(topic, partition)
    consumer.assign([tp])
    end = consumer.end_offsets([tp])[tp]
    numbers = []
    deadline = time.monotonic() + TIMEOUT_S
    while consumer.position(tp) < end:
        assert time.monotonic() < deadline, f"kafka-python consumer of {topic} stalled"
        for records in consumer.poll(timeout_ms=200).values():
            numbers += [int(record.value.split(b":")[0]) for record in records]
    consumer.close()
    return numbers


# --- CreatePartitions ---------------------------------------------------------------------------


def test_partitions_added_by_librdkafka_are_seen_by_both_clients_and_survive_a_restart(broker, data_dir):
    create(broker.bootstrap, "grow", 2)
    admin = confluent_admin(broker.bootstrap)
    (future,) = admin.create_partitions([NewPartitions("grow", 5)]).values()
    future.result(TIMEOUT_S)
    assert partitions_per_confluent(broker.bootstrap, "grow") == 5
    assert partitions_per_kafka_python(broker.bootstrap, "grow") == 5
    produce_batches(broker.bootstrap, "grow", 3, partition=4)  # a new partition takes records at once
    broker.stop()
    with EmbeddedBroker(data_dir) as restarted:
        assert partitions_per_confluent(restarted.bootstrap, "grow") == 5
        assert read_from_earliest(restarted.bootstrap, "grow", partition=4) == [0, 1, 2]


def test_create_partitions_refuses_what_kafka_refuses(broker):
    create(broker.bootstrap, "fixed", 2)
    admin = confluent_admin(broker.bootstrap)
    same = failure(admin.create_partitions([NewPartitions("fixed", 2)])["fixed"])
    assert (same.code(), same.str()) == (KafkaError.INVALID_PARTITIONS, "Topic already has 2 partition(s).")
    fewer = failure(admin.create_partitions([NewPartitions("fixed", 1)])["fixed"])
    assert fewer.code() == KafkaError.INVALID_PARTITIONS
    assert failure(admin.create_partitions([NewPartitions("nowhere", 3)])["nowhere"]).code() == \
        KafkaError.UNKNOWN_TOPIC_OR_PART
    admin.create_partitions([NewPartitions("fixed", 4)], validate_only=True)["fixed"].result(TIMEOUT_S)
    assert partitions_per_kafka_python(broker.bootstrap, "fixed") == 2  # only validated

    kp = kafka_python_admin(broker.bootstrap)
    try:
        with pytest.raises(kerr.InvalidReplicationAssignmentError):
            kp.create_partitions({"fixed": {"count": 3, "assignments": [[7]]}})  # no broker 7
        with pytest.raises(kerr.InvalidReplicationAssignmentError):
            kp.create_partitions({"fixed": {"count": 4, "assignments": [[0]]}})  # one list for two partitions
        kp.create_partitions({"fixed": {"count": 3, "assignments": [[0]]}})  # replication factor 1, this broker
    finally:
        kp.close()
    assert partitions_per_confluent(broker.bootstrap, "fixed") == 3


# --- IncrementalAlterConfigs and AlterConfigs ------------------------------------------------


def test_incremental_changes_by_librdkafka_are_dynamic_configs_to_kafka_python_and_persist(broker, data_dir):
    create(broker.bootstrap, "tuned", segment_bytes="1048576")
    assert alter_incrementally(broker.bootstrap, incremental(
        "tuned",
        ("retention.ms", "3600000", AlterConfigOpType.SET),
        ("cleanup.policy", "compact", AlterConfigOpType.APPEND),
        ("segment.bytes", None, AlterConfigOpType.DELETE),
    )) == {"tuned": None}
    seen = configs_per_kafka_python(broker.bootstrap, "tuned")
    assert seen["retention.ms"] == ("3600000", "DYNAMIC_TOPIC_CONFIG")
    assert seen["cleanup.policy"] == ("delete,compact", "DYNAMIC_TOPIC_CONFIG")
    assert seen["segment.bytes"] == (str(1024 ** 3), "DEFAULT_CONFIG")
    broker.stop()
    with EmbeddedBroker(data_dir) as restarted:
        assert configs_per_kafka_python(restarted.bootstrap, "tuned") == seen
        assert alter_incrementally(restarted.bootstrap, incremental(
            "tuned", ("cleanup.policy", "delete", AlterConfigOpType.SUBTRACT))) == {"tuned": None}
        seen = configs_per_confluent(restarted.bootstrap, "tuned")
        assert seen["cleanup.policy"] == ("compact", "DYNAMIC_TOPIC_CONFIG")


def test_incremental_changes_kafka_refuses_change_nothing(broker):
    create(broker.bootstrap, "strict", retention_ms="3600000")
    before = configs_per_kafka_python(broker.bootstrap, "strict")
    refused = {
        "not a list": (incremental("strict", ("retention.ms", "1", AlterConfigOpType.APPEND)),
                       KafkaError.INVALID_CONFIG),
        "unknown name": (incremental("strict", ("retention.bytes.typo", "1", AlterConfigOpType.SET)),
                         KafkaError.INVALID_CONFIG),
        "bad value": (incremental("strict", ("segment.bytes", "lots", AlterConfigOpType.SET)),
                      KafkaError.INVALID_CONFIG),
        "bad policy": (incremental("strict", ("cleanup.policy", "delete", AlterConfigOpType.SUBTRACT)),
                       KafkaError.INVALID_CONFIG),  # leaves it empty
        "unknown topic": (incremental("absent", ("retention.ms", "1", AlterConfigOpType.SET)),
                          KafkaError.UNKNOWN_TOPIC_OR_PART),
    }
    for what, (resource, code) in refused.items():
        (error,) = alter_incrementally(broker.bootstrap, resource).values()
        assert error is not None and error.code() == code, (what, error)
    shorter = incremental("strict", ("retention.ms", "60000", AlterConfigOpType.SET))
    assert alter_incrementally(broker.bootstrap, shorter, validate_only=True) == {"strict": None}
    assert configs_per_kafka_python(broker.bootstrap, "strict") == before


def test_a_broker_resource_is_refused_and_the_topic_beside_it_changed(broker):
    create(broker.bootstrap, "beside")
    answers = alter_incrementally(
        broker.bootstrap,
        ConfigResource(ResourceType.BROKER, "0", incremental_configs=[
            ConfigEntry("log.cleaner.backoff.ms", "100", incremental_operation=AlterConfigOpType.SET)]),
        incremental("beside", ("max.message.bytes", "2048", AlterConfigOpType.SET)),
    )
    assert answers["0"].code() == KafkaError.INVALID_REQUEST and "log.cleaner.backoff.ms" in answers["0"].str()
    assert answers["beside"] is None
    assert configs_per_kafka_python(broker.bootstrap, "beside")["max.message.bytes"] == ("2048", "DYNAMIC_TOPIC_CONFIG")


def test_alter_configs_replaces_every_dynamic_config(broker):
    create(broker.bootstrap, "replaced", retention_ms="3600000", segment_bytes="1048576")
    # librdkafka's AlterConfigs sends the set as given: what it leaves out goes back to the default.
    admin = confluent_admin(broker.bootstrap)
    with pytest.warns(DeprecationWarning):
        (future,) = admin.alter_configs(
            [ConfigResource(ResourceType.TOPIC, "replaced", set_config={"max.message.bytes": "4096"})]).values()
    future.result(TIMEOUT_S)
    seen = configs_per_kafka_python(broker.bootstrap, "replaced")
    assert seen["max.message.bytes"] == ("4096", "DYNAMIC_TOPIC_CONFIG")
    assert seen["retention.ms"] == (str(7 * DAY_MS), "DEFAULT_CONFIG")
    assert seen["segment.bytes"] == (str(1024 ** 3), "DEFAULT_CONFIG")

    # kafka-python's AlterConfigs (incremental=False) first reads the dynamic configs and sends them too.
    admin = kafka_python_admin(broker.bootstrap)
    try:
        changed = admin.alter_configs(
            [KConfigResource(ConfigResourceType.TOPIC, "replaced", {"retention.ms": "60000"})], incremental=False)
        refused = admin.alter_configs(
            [KConfigResource(ConfigResourceType.TOPIC, "replaced", {"segment.bytes": "-5"})], incremental=False)
    finally:
        admin.close()
    assert changed == {"topic": {"replaced": "OK"}}
    assert "InvalidConfigurationError" in refused["topic"]["replaced"]
    seen = configs_per_confluent(broker.bootstrap, "replaced")
    assert seen["retention.ms"] == ("60000", "DYNAMIC_TOPIC_CONFIG")
    assert seen["max.message.bytes"] == ("4096", "DYNAMIC_TOPIC_CONFIG")
    assert seen["segment.bytes"] == (str(1024 ** 3), "DEFAULT_CONFIG")


def test_retention_changes_delete_segments_before_the_answer(broker, data_dir):
    # Hours-long retention checks: only the change itself can have deleted anything.
    create(broker.bootstrap, "shrink", segment_bytes="1024")
    produce_batches(broker.bootstrap, "shrink", 24)
    bases = segment_bases(data_dir, "shrink")
    assert len(bases) > 4 and watermarks(broker.bootstrap, "shrink") == (0, 24)
    assert alter_incrementally(broker.bootstrap, incremental(
        "shrink", ("retention.bytes", "1500", AlterConfigOpType.SET))) == {"shrink": None}
    earliest, latest = watermarks(broker.bootstrap, "shrink")
    assert earliest in bases[1:] and latest == 24
    assert earliest_per_kafka_python(broker.bootstrap, "shrink") == earliest
    assert segment_bases(data_dir, "shrink")[0] == earliest


def test_retention_ms_and_segment_bytes_apply_to_existing_logs_at_once(broker, data_dir):
    create(broker.bootstrap, "aged")
    two_days_ago = int(time.time() * 1000) - 2 * DAY_MS
    produce_batches(broker.bootstrap, "aged", 6, timestamp_ms=two_days_ago)
    assert segment_bases(data_dir, "aged") == [0]  # segment.bytes 1 GiB: one segment
    admin = kafka_python_admin(broker.bootstrap)
    try:
        admin.alter_configs([KConfigResource(ConfigResourceType.TOPIC, "aged", {"segment.bytes": "1024"})])
    finally:
        admin.close()
    produce_batches(broker.bootstrap, "aged", 12, timestamp_ms=two_days_ago)  # the active segment rolls now
    assert len(segment_bases(data_dir, "aged")) > 3
    assert alter_incrementally(broker.bootstrap, incremental(
        "aged", ("retention.ms", str(DAY_MS), AlterConfigOpType.SET))) == {"aged": None}
    (active,) = segment_bases(data_dir, "aged")  # every sealed segment was a day past retention
    assert watermarks(broker.bootstrap, "aged") == (active, 18) and active > 0


def test_malformed_admin_requests_are_answered_per_resource_as_kafka_answers_them(broker):
    """What the admin clients never send, in kafka-python's schemas: Kafka's broker answers each
    resource or topic (``ConfigAdminManager.preprocess``, ``ControllerApis``), the rest goes on."""
    create(broker.bootstrap, "shape")
    create(broker.bootstrap, "shape.op")
    resource, config = IncrementalAlterConfigsRequest.AlterConfigsResource, \
        IncrementalAlterConfigsRequest.AlterConfigsResource.AlterableConfig
    set_ms = config(name="retention.ms", config_operation=0, value="60000")
    request = IncrementalAlterConfigsRequest(validate_only=False, resources=[
        resource(resource_type=2, resource_name="twice", configs=[set_ms]),
        resource(resource_type=2, resource_name="twice", configs=[set_ms]),
        resource(resource_type=2, resource_name="shape", configs=[set_ms, set_ms]),
        resource(resource_type=2, resource_name="shape.null", configs=[config(name="retention.ms", config_operation=0,
                                                                               value=None)]),
        resource(resource_type=2, resource_name="shape.op", configs=[config(name="retention.ms", config_operation=9,
                                                                             value="1")]),
        resource(resource_type=4, resource_name="5", configs=[set_ms]),
        resource(resource_type=4, resource_name="0", configs=[]),
        resource(resource_type=32, resource_name="group", configs=[set_ms]),
    ])
    partitions = CreatePartitionsRequest(timeout_ms=1000, validate_only=False, topics=[
        CreatePartitionsRequest.CreatePartitionsTopic(name="shape", count=2, assignments=None),
        CreatePartitionsRequest.CreatePartitionsTopic(name="shape", count=3, assignments=None),
    ])
    deletions = DeleteTopicsRequest(timeout_ms=1000, topic_names=["shape", "shape"])
    with KafkaConnection(broker.bootstrap) as wire:
        answers = [(r.resource_name, r.error_code, r.error_message) for r in wire.call(request, version=1).responses]
        (grown,) = wire.call(partitions, version=3).results
        (deleted,) = wire.call(deletions, version=5).responses
    invalid = kerr.InvalidRequestError.errno
    assert answers == [
        ("twice", invalid, "Each resource must appear at most once."),
        ("twice", invalid, "Each resource must appear at most once."),
        ("shape", invalid, "Error due to duplicate config keys"),
        ("shape.null", invalid, "Null value not supported for : retention.ms"),
        ("shape.op", invalid, "Unknown operations type 9"),
        ("5", invalid, "Unexpected broker id, expected 0, but received 5"),
        ("0", 0, None),  # nothing to change
        ("group", invalid, "Unknown resource type 32"),
    ]
    assert (grown.name, grown.error_code, grown.error_message) == ("shape", invalid, "Duplicate topic name.")
    assert (deleted.name, deleted.error_code, deleted.error_message) == ("shape", invalid, "Duplicate topic name.")
    assert partitions_per_confluent(broker.bootstrap, "shape") == 1
    assert configs_per_kafka_python(broker.bootstrap, "shape")["retention.ms"] == (str(7 * DAY_MS), "DEFAULT_CONFIG")


# --- DeleteTopics ---------------------------------------------------------------------------------


def test_deleted_topics_go_with_their_data_and_the_name_can_be_used_again(broker, data_dir):
    create(broker.bootstrap, "gone", 3)
    produce_batches(broker.bootstrap, "gone", 5, partition=1)
    admin = confluent_admin(broker.bootstrap)
    (future,) = admin.delete_topics(["gone"]).values()
    future.result(TIMEOUT_S)
    assert "gone" not in confluent_admin(broker.bootstrap).list_topics(timeout=TIMEOUT_S).topics
    assert sorted(path.name for path in data_dir.iterdir() if path.name.startswith("gone")) == []
    assert not (data_dir / ".topics" / "gone.json").exists()

    kp = kafka_python_admin(broker.bootstrap)
    try:
        with pytest.raises(kerr.UnknownTopicOrPartitionError):
            kp.delete_topics(["gone"])
        with pytest.raises(kerr.UnknownTopicIdError):  # v6 by an id no topic has
            kp.delete_topics([uuid.uuid4()])
        kp.create_topics([NewTopic("gone", 1, 1, topic_configs={"retention.ms": "60000"})])
    finally:
        kp.close()
    assert watermarks(broker.bootstrap, "gone") == (0, 0)
    assert configs_per_confluent(broker.bootstrap, "gone")["retention.ms"] == ("60000", "DYNAMIC_TOPIC_CONFIG")
    produce_batches(broker.bootstrap, "gone", 2)
    broker.stop()
    with EmbeddedBroker(data_dir) as restarted:
        assert partitions_per_confluent(restarted.bootstrap, "gone") == 1
        assert read_from_earliest(restarted.bootstrap, "gone") == [0, 1]


def test_a_deleted_partition_a_crash_left_behind_is_removed_at_start(data_dir):
    trash = data_dir / f"left-0.{uuid.uuid4().hex}-delete"
    trash.mkdir(parents=True)
    (trash / "00000000000000000000.log").write_bytes(b"old")
    with EmbeddedBroker(data_dir):
        assert not trash.exists()


# --- DeleteRecords --------------------------------------------------------------------------------


def test_delete_records_by_librdkafka_moves_the_log_start_for_every_reader(broker, data_dir):
    create(broker.bootstrap, "trim", segment_bytes="1024")
    produce_batches(broker.bootstrap, "trim", 30)
    admin = confluent_admin(broker.bootstrap)
    (future,) = admin.delete_records([CTopicPartition("trim", 0, 17)]).values()
    assert future.result(TIMEOUT_S).low_watermark == 17
    assert watermarks(broker.bootstrap, "trim") == (17, 30)
    assert earliest_per_kafka_python(broker.bootstrap, "trim") == 17
    assert read_from_earliest(broker.bootstrap, "trim") == list(range(17, 30))  # not the batch's first records
    bases = segment_bases(data_dir, "trim")
    assert bases[0] <= 17 < bases[1]  # the segments wholly below went

    broker.stop()
    with EmbeddedBroker(data_dir) as restarted:
        assert watermarks(restarted.bootstrap, "trim") == (17, 30)
        admin = confluent_admin(restarted.bootstrap)
        past = failure(admin.delete_records([CTopicPartition("trim", 0, 31)])[CTopicPartition("trim", 0, 31)])
        assert past.code() == KafkaError.OFFSET_OUT_OF_RANGE
        (future,) = admin.delete_records([CTopicPartition("trim", 0, -1)]).values()  # -1: the high watermark
        assert future.result(TIMEOUT_S).low_watermark == 30
        assert watermarks(restarted.bootstrap, "trim") == (30, 30)


def test_delete_records_refuses_what_kafka_refuses(broker):
    create(broker.bootstrap, "kept", cleanup_policy="compact")
    create(broker.bootstrap, "short")
    produce_batches(broker.bootstrap, "short", 3)
    admin = kafka_python_admin(broker.bootstrap)
    try:
        with pytest.raises(kerr.PolicyViolationError):
            admin.delete_records({TopicPartition("kept", 0): 0})
        with pytest.raises(kerr.OffsetOutOfRangeError):
            admin.delete_records({TopicPartition("short", 0): 4})
        assert admin.delete_records({TopicPartition("short", 0): 2})[TopicPartition("short", 0)]["low_watermark"] == 2
        assert admin.delete_records({TopicPartition("short", 0): 1})[TopicPartition("short", 0)]["low_watermark"] == 2
    finally:
        admin.close()
    assert watermarks(broker.bootstrap, "short") == (2, 3)


# --- ACLs -----------------------------------------------------------------------------------------


def test_acl_apis_answer_security_disabled_as_kafka_without_an_authorizer(broker):
    admin = confluent_admin(broker.bootstrap)
    everything = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, None, None, AclOperation.ANY,
                                  AclPermissionType.ANY)
    binding = AclBinding(ResourceType.TOPIC, "t", ResourcePatternType.LITERAL, "User:alice", "*", AclOperation.READ,
                         AclPermissionType.ALLOW)
    # librdkafka drops DescribeAcls' top-level error (rd_kafka_DescribeAclsResponse_parse reads it and
    # returns the empty list), so it sees no ACLs, as from Kafka; kafka-python raises it, below.
    assert admin.describe_acls(everything).result(TIMEOUT_S) == []
    (created,) = admin.create_acls([binding]).values()
    assert failure(created).code() == KafkaError.SECURITY_DISABLED
    (deleted,) = admin.delete_acls([everything]).values()
    assert failure(deleted).code() == KafkaError.SECURITY_DISABLED

    kp = kafka_python_admin(broker.bootstrap)
    try:
        with pytest.raises(kerr.SecurityDisabledError, match="No Authorizer is configured on the broker"):
            kp.describe_acls(ACLFilter(principal=None, host="*", operation=ACLOperation.ANY,
                                       permission_type=ACLPermissionType.ANY,
                                       resource_pattern=ResourcePatternFilter(KResourceType.TOPIC, None,
                                                                              ACLResourcePatternType.ANY)))
    finally:
        kp.close()


def test_a_topic_made_again_has_another_id_by_librdkafka_which_a_restart_keeps(broker, data_dir):
    """Topic ids (KIP-516, Metadata v10+) as librdkafka's DescribeTopics reads them: one per
    topic, another for a topic deleted and made again under its name, the same after a restart;
    and DeleteTopics v6 by id (kafka-python's) deletes the topic that has it."""
    from confluent_kafka import TopicCollection

    def described(bootstrap: str, name: str) -> uuid.UUID:
        admin = confluent_admin(bootstrap)  # kept until the answer: a handle destroyed first fails its futures
        (future,) = admin.describe_topics(TopicCollection([name])).values()
        topic_id = future.result(TIMEOUT_S).topic_id  # librdkafka's Uuid: its str is Kafka's base64
        high, low = topic_id.get_most_significant_bits(), topic_id.get_least_significant_bits()
        return uuid.UUID(int=((high % 2**64) << 64) | (low % 2**64))

    create(broker.bootstrap, "again", 2)
    create(broker.bootstrap, "other", 1)
    first, other = described(broker.bootstrap, "again"), described(broker.bootstrap, "other")
    assert first != other and first.int and other.int
    admin = confluent_admin(broker.bootstrap)
    (future,) = admin.delete_topics(["again"]).values()
    future.result(TIMEOUT_S)
    create(broker.bootstrap, "again", 2)
    second = described(broker.bootstrap, "again")
    assert second not in (first, other)
    broker.stop()
    with EmbeddedBroker(data_dir) as restarted:
        assert described(restarted.bootstrap, "again") == second
        kp = kafka_python_admin(restarted.bootstrap)
        try:
            kp.delete_topics([second])
        finally:
            kp.close()
        assert sorted(confluent_admin(restarted.bootstrap).list_topics(timeout=TIMEOUT_S).topics) == ["other"]
