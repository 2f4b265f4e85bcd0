"""Destination topics: what kmirror creates, and what it leaves alone (issue 47).

A topic kmirror created is shaped like its source; a topic it found is the user's: never given
partitions, its configs synced only with ``sync_existing_topics``. ``auto`` decides each pair
once, from the counts when it first sees the pair, and keeps the decision in the destination's
``kmirror-provenance`` topic, so a restart (fresh clients, here) never decides it again.

Between two embedded brokers. Topics are made, grown and configured by the user's tool
(kafka-python's admin client) and checked with it; the provenance record is read with
kafka-python's consumer. Placement of the copied keys is judged by librdkafka and Java's
murmur2 in tests/spark/test_found_topics.py.
"""

from __future__ import annotations

import json
import logging

import pytest
from kafka import KafkaAdminClient, KafkaConsumer
from kafka import TopicPartition as KTP
from kafka.admin import ConfigResource, ConfigResourceType, NewPartitions
from kafka.admin import NewTopic as KNewTopic

from mirror.broker import EmbeddedBroker
from mirror.config import load_config
from mirror.engine import TopicMismatchError, sync_destination_topics
from mirror.engine.shape_sync import ShapeSync
from mirror.kafka import KafkaClient
from mirror.routing import Partitioning


@pytest.fixture
def brokers(tmp_path):
    with EmbeddedBroker(tmp_path / "src") as src, EmbeddedBroker(tmp_path / "dst") as dst:
        yield src, dst


def _config(src, dst, **extra):
    return load_config(None, {"source.bootstrap": src.bootstrap, "destination.bootstrap": dst.bootstrap,
                              "topics": ".*", **extra})


def _sync(src, dst, **extra):
    """One start of the job: fresh clients, so nothing is remembered but what the clusters keep."""
    with KafkaClient(src.bootstrap) as source, KafkaClient(dst.bootstrap) as destination:
        return sync_destination_topics(_config(src, dst, **extra), source, destination)


def _create(bootstrap: str, topic: str, partitions: int, **configs: str) -> None:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    admin.create_topics([KNewTopic(topic, partitions, 1, topic_configs=configs)])
    admin.close()


def _add_partitions(bootstrap: str, topic: str, total: int) -> None:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    admin.create_partitions({topic: NewPartitions(total)})
    admin.close()


def _partitions(bootstrap: str, topic: str) -> int:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        return len(admin.describe_topics([topic])[0]["partitions"])
    finally:
        admin.close()


def _config_value(bootstrap: str, topic: str, name: str) -> str | None:
    """The topic's value of ``name`` where it is set (None at the broker's default)."""
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        configs = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, topic)])["topic"][topic]
        return configs.get(name, {}).get("value")
    finally:
        admin.close()


def _provenance(bootstrap: str) -> dict[str, dict]:
    """The destination's provenance, each topic's latest record as JSON."""
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, consumer_timeout_ms=1500,
                             auto_offset_reset="earliest")
    consumer.assign([KTP("kmirror-provenance", 0)])
    records = {m.key.decode(): json.loads(m.value) for m in consumer}
    consumer.close()
    return records


def test_created_topics_take_the_source_configs_and_are_recorded_as_created(brokers):
    src, dst = brokers
    _create(src.bootstrap, "lat", 3, **{"message.timestamp.type": "LogAppendTime", "segment.bytes": "100000"})
    routes = _sync(src, dst, rename="copy.{topic}")
    assert routes["lat"].topic == "copy.lat" and routes["lat"].created
    assert _partitions(dst.bootstrap, "copy.lat") == 3
    # Every config the source sets, as MirrorMaker 2 creates remote topics (issue 37).
    assert _config_value(dst.bootstrap, "copy.lat", "message.timestamp.type") == "LogAppendTime"
    assert _config_value(dst.bootstrap, "copy.lat", "segment.bytes") == "100000"
    record = _provenance(dst.bootstrap)["copy.lat"]
    assert (record["created"], record["partitioning"], record["source_topic"]) == (True, "preserve", "lat")


@pytest.mark.parametrize("destination_partitions", [4, 8])
def test_auto_routes_by_key_into_a_found_topic_of_another_count_and_never_grows_it(brokers, caplog,
                                                                                  destination_partitions):
    """The issue's case (4 < 6), and a larger destination."""
    src, dst = brokers
    _create(src.bootstrap, "orders", 6)
    _create(dst.bootstrap, "orders", destination_partitions)
    with caplog.at_level(logging.INFO, logger="mirror.engine.topics"):
        route = _sync(src, dst)["orders"]
    assert route.policy.partitioning is Partitioning.BY_KEY and not route.created
    assert route.policy.destination_partitions == destination_partitions
    assert _partitions(dst.bootstrap, "orders") == destination_partitions
    record = _provenance(dst.bootstrap)["orders"]
    assert (record["created"], record["partitioning"]) == (False, "by-key")
    (told,) = [r.getMessage() for r in caplog.records if "was there before kmirror" in r.getMessage()]
    assert f"its {destination_partitions} partitions kept" in told and "--sync-existing-topics" in told


class _UserCreatesAfterTheLook(KafkaClient):
    """A destination where the user makes ``orders`` just after kmirror has read the topic
    list: the race of a job starting while an operator (or another job) creates the topic."""

    def listings(self):
        listed = super().listings()
        if "orders" not in listed:
            _create(self.bootstrap, "orders", 8)
        return listed


def test_a_topic_made_between_the_look_and_the_create_stays_the_users(brokers, caplog):
    """kmirror's CreateTopics finds it there: recorded as found, routed by key into its 8
    partitions, never grown, never laid out as kmirror's own (CI saw this on real Kafka)."""
    src, dst = brokers
    _create(src.bootstrap, "orders", 6)
    with KafkaClient(src.bootstrap) as source, _UserCreatesAfterTheLook(dst.bootstrap) as destination, \
            caplog.at_level(logging.INFO, logger="mirror.engine.topics"):
        route = sync_destination_topics(_config(src, dst), source, destination)["orders"]
    assert route.policy.partitioning is Partitioning.BY_KEY and not route.created
    assert route.policy.destination_partitions == 8 and _partitions(dst.bootstrap, "orders") == 8
    record = _provenance(dst.bootstrap)["orders"]
    assert (record["created"], record["partitioning"]) == (False, "by-key")
    assert any("appeared before kmirror created them" in r.getMessage() for r in caplog.records)
    assert not any(r.getMessage().startswith("created ") and "orders" in r.getMessage() for r in caplog.records)
    # The next start, too, knows it for the user's: the source grows, the destination does not.
    _add_partitions(src.bootstrap, "orders", 10)
    assert _sync(src, dst)["orders"].policy.partitioning is Partitioning.BY_KEY
    assert _partitions(dst.bootstrap, "orders") == 8


def test_a_found_topic_of_equal_count_is_preserved_and_never_grown_when_its_source_grows(brokers):
    src, dst = brokers
    _create(src.bootstrap, "orders", 4)
    _create(dst.bootstrap, "orders", 4)
    assert _sync(src, dst)["orders"].policy.partitioning is Partitioning.PRESERVE
    _add_partitions(src.bootstrap, "orders", 6)
    with pytest.raises(TopicMismatchError, match="add 2 partitions to orders") as refused:
        _sync(src, dst)
    assert "kafka-topics.sh --alter --topic orders --partitions 6" in str(refused.value)
    assert _partitions(dst.bootstrap, "orders") == 4
    # Once the user has added them, the pair is preserved again.
    _add_partitions(dst.bootstrap, "orders", 6)
    assert _sync(src, dst)["orders"].policy.partitioning is Partitioning.PRESERVE


def test_a_created_topic_follows_a_source_that_grew_while_the_job_was_stopped(brokers):
    """Not re-decided as by-key because the counts now differ: preserve was remembered."""
    src, dst = brokers
    _create(src.bootstrap, "events", 4)
    assert _sync(src, dst)["events"].policy.partitioning is Partitioning.PRESERVE
    _add_partitions(src.bootstrap, "events", 6)
    route = _sync(src, dst)["events"]
    assert route.policy.partitioning is Partitioning.PRESERVE and route.policy.destination_partitions == 6
    assert _partitions(dst.bootstrap, "events") == 6


def test_a_pair_decided_by_key_stays_by_key_when_the_counts_later_match(brokers):
    src, dst = brokers
    _create(src.bootstrap, "orders", 6)
    _create(dst.bootstrap, "orders", 4)
    assert _sync(src, dst)["orders"].policy.partitioning is Partitioning.BY_KEY
    _add_partitions(dst.bootstrap, "orders", 6)  # the user's choice; the keys copied so far stay where they are
    assert _sync(src, dst)["orders"].policy.partitioning is Partitioning.BY_KEY


def test_a_created_topic_with_its_own_count_is_by_key_and_not_grown_with_its_source(brokers):
    src, dst = brokers
    _create(src.bootstrap, "orders", 4)
    assert _sync(src, dst, destination_partitions=2)["orders"].policy.partitioning is Partitioning.BY_KEY
    _add_partitions(src.bootstrap, "orders", 6)
    assert _sync(src, dst, destination_partitions=2)["orders"].policy.partitioning is Partitioning.BY_KEY
    assert _partitions(dst.bootstrap, "orders") == 2


def test_explicit_preserve_into_a_smaller_found_topic_is_refused_with_what_to_do(brokers):
    src, dst = brokers
    _create(src.bootstrap, "orders", 6)
    _create(dst.bootstrap, "orders", 4)
    with pytest.raises(TopicMismatchError, match="add partitions or use --partitioning by-key"):
        _sync(src, dst, partitioning="preserve")
    assert _partitions(dst.bootstrap, "orders") == 4


def test_explicit_by_key_never_grows_a_destination(brokers):
    src, dst = brokers
    _create(src.bootstrap, "orders", 4)
    assert _sync(src, dst, partitioning="by-key")["orders"].policy.partitioning is Partitioning.BY_KEY
    _add_partitions(src.bootstrap, "orders", 6)
    assert _sync(src, dst, partitioning="by-key")["orders"].policy.destination_partitions == 4
    assert _partitions(dst.bootstrap, "orders") == 4


def test_an_explicit_choice_overrides_the_remembered_one_and_is_remembered(brokers, caplog):
    src, dst = brokers
    _create(src.bootstrap, "same", 3)
    assert _sync(src, dst)["same"].policy.partitioning is Partitioning.PRESERVE
    with caplog.at_level(logging.WARNING, logger="mirror.engine.topics"):
        assert _sync(src, dst, partitioning="by-key")["same"].policy.partitioning is Partitioning.BY_KEY
    assert any("where earlier records were copied preserve" in r.getMessage() for r in caplog.records)
    assert _provenance(dst.bootstrap)["same"]["partitioning"] == "by-key"
    assert _sync(src, dst)["same"].policy.partitioning is Partitioning.BY_KEY


def test_a_record_from_before_the_decision_was_kept_reads_as_created_and_preserved(brokers):
    """A topic kmirror created from a 4-partition source before issue 47, whose source has 6
    partitions now: it grew while no job ran, so the copy preserved, and goes on doing so."""
    src, dst = brokers
    _create(src.bootstrap, "events", 6)
    _create(dst.bootstrap, "events", 4)
    admin = KafkaAdminClient(bootstrap_servers=dst.bootstrap)
    admin.create_topics([KNewTopic("kmirror-provenance", 1, 1, topic_configs={"cleanup.policy": "compact"})])
    admin.close()
    with KafkaClient(src.bootstrap) as source:
        source_cluster = source.cluster_id()
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=dst.bootstrap)
    producer.send("kmirror-provenance", key=b"events",
                  value=json.dumps({"path": [source_cluster], "source_topic": "events"}).encode()).get(10)
    producer.close()
    route = _sync(src, dst)["events"]
    assert route.created and route.policy.partitioning is Partitioning.PRESERVE
    assert _partitions(dst.bootstrap, "events") == 6
    assert _provenance(dst.bootstrap)["events"]["partitioning"] == "preserve"


@pytest.mark.parametrize("sync_existing", [False, True])
def test_a_found_topics_configs_are_synced_only_when_asked(brokers, sync_existing):
    src, dst = brokers
    _create(src.bootstrap, "orders", 4, **{"retention.ms": "86400000"})
    _create(dst.bootstrap, "orders", 4, **{"retention.ms": "3600000"})
    config = _config(src, dst, sync_existing_topics=sync_existing)
    with KafkaClient(src.bootstrap) as source, KafkaClient(dst.bootstrap) as destination:
        routes = sync_destination_topics(config, source, destination)
        ShapeSync(config, lambda: routes).sync(source, destination)
    assert _config_value(dst.bootstrap, "orders", "retention.ms") == ("86400000" if sync_existing else "3600000")


def test_kmirror_run_refuses_preserve_into_a_smaller_found_topic_with_exit_2(brokers, caplog):
    """Before Spark starts: the operator's mistake costs seconds, and the line says what to do."""
    from mirror.cli import main

    src, dst = brokers
    _create(src.bootstrap, "orders", 6)
    _create(dst.bootstrap, "orders", 4)
    with caplog.at_level(logging.ERROR):
        assert main(["run", "--source", src.bootstrap, "--destination", dst.bootstrap, "--topics", "orders",
                     "--partitioning", "preserve", "--once"]) == 2
    assert any("use --partitioning by-key" in r.getMessage() for r in caplog.records)
    assert _partitions(dst.bootstrap, "orders") == 4


def test_kmirrors_own_topics_are_never_mirrored_whatever_the_pattern(brokers):
    from mirror.engine.own_topics import mirrored

    src, dst = brokers
    config = _config(src, dst)  # topics = ".*"
    for own in ("kmirror-offsets.job", "kmirror-offset-syncs.job", "kmirror-flow.job", "kmirror-provenance",
                "__consumer_offsets"):
        assert not mirrored(config, own), own
    assert mirrored(config, "kmirror-provenance-archive") and mirrored(config, "orders")
