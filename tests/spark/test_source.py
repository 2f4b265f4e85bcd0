"""The streaming source's reader called directly, as Spark's planner process would, against an
embedded broker: offsets, limits, AvailableNow, new partitions, the stop file. No JVM."""

from __future__ import annotations

import pytest
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxBytes, ReadMaxRows

import kcodecs
from kcodecs import Record
from mirror.broker import EmbeddedBroker
from mirror.broker.handlers import list_offsets as list_offsets_handler
from mirror.config import REVEAL_SECRETS, ClusterConfig, SaslConfig, load_config
from mirror.kafka import KafkaClient, NewTopic, TopicPartition
from mirror.engine.topic_identity import TopicRecreatedError
from mirror.spark.offsets import TOPIC_IDS, Bounds
from mirror.spark.source import KafkaRangeReader, KafkaRangeSource


@pytest.fixture
def cluster(tmp_path):
    with EmbeddedBroker(tmp_path / "src") as broker, KafkaClient(broker.bootstrap) as client:
        yield broker, client


def _fill(client: KafkaClient, topic: str, partition: int, batches: int, per_batch: int = 10, size: int = 100) -> None:
    for b in range(batches):
        records = [Record(value=bytes([b % 256]) * size) for _ in range(per_batch)]
        client.produce([(TopicPartition(topic, partition), kcodecs.build_batch(records))])


def _reader(broker, tmp_path=None, **settings) -> KafkaRangeReader:
    config = load_config(None, {"source.bootstrap": broker.bootstrap, "destination.bootstrap": "127.0.0.1:1",
                                "topics": "t.*", **settings})
    return KafkaRangeReader(config, stop_file=str(tmp_path / "stop") if tmp_path else None)


def _planned(offsets: dict) -> dict:
    """The partitions' offsets of a plan, without the topic ids and losses beside them."""
    return {key: value for key, value in offsets.items() if not key.startswith("@")}


@pytest.mark.parametrize("policy", ["follow", "fail"])
def test_the_plan_keeps_each_topics_id_and_follows_a_topic_made_again_from_its_start(cluster, policy, caplog):
    broker, client = cluster
    client.create_topics([NewTopic("t1", 2), NewTopic("t2", 1)])
    _fill(client, "t2", 0, 3)  # the old topic's 30 records
    reader = _reader(broker, on_topic_recreated=policy)
    start = reader.initialOffset()
    ids = {name: str(listing.topic_id) for name, listing in client.listings().items()}
    assert start[TOPIC_IDS] == {"t1": ids["t1"], "t2": ids["t2"]}
    _fill(client, "t1", 0, 2)
    end = reader.latestOffset(start, ReadAllAvailable())
    assert end[TOPIC_IDS] == start[TOPIC_IDS] and _planned(end) == {"t1/0": 20, "t1/1": 0, "t2/0": 30}
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    for future in admin.delete_topics(["t2"]).values():  # gone: its id kept
        future.result(30)
    assert reader.latestOffset(end, ReadAllAvailable())[TOPIC_IDS] == start[TOPIC_IDS]
    assert _planned(reader.latestOffset(end, ReadAllAvailable()))["t2/0"] == 30  # kept, and said once
    client.create_topics([NewTopic("t2", 2)])  # made again, with more partitions: another id
    new_id = str(broker.state.topics.topics["t2"].topic_id)
    _fill(client, "t2", 0, 1)
    if policy == "fail":
        with pytest.raises(TopicRecreatedError, match=f"source topic t2 was deleted and made again "
                                                      f"\\(topic id {ids['t2']} is now {new_id}\\)"):
            reader.latestOffset(end, ReadAllAvailable())
        return
    with caplog.at_level("WARNING", logger="mirror.spark.source"):
        followed = reader.latestOffset(end, ReadAllAvailable())
    # The new topic starts as a new one: at its earliest offsets, nothing of it in this
    # micro-batch, and nothing spanning the old topic's offset 30 and the new one's 0.
    assert followed[TOPIC_IDS]["t2"] == new_id and _planned(followed)["t2/0"] == 0 and _planned(followed)["t2/1"] == 0
    assert [r.topic for group in reader.partitions(end, followed) for r in group.ranges] == []
    assert [f"source topic t2 was deleted and made again (topic id {ids['t2']} is now {new_id}): following the new "
            f"topic from its log start (partition 0 from 0, 1 from 0); what was copied of the old topic stays at "
            f"the destination"] == [r.getMessage() for r in caplog.records if "t2 was deleted and made again" in r.getMessage()]
    said = [r.getMessage() for r in caplog.records if "not listed" in r.getMessage()]  # once, for two triggers
    assert len(said) == 1 and said[0].startswith(f"source topic t2 (topic id {ids['t2']}) is not listed by the "
                                                 f"source any more (deleted): the job stops copying it")
    after = reader.latestOffset(followed, ReadAllAvailable())
    (group,) = reader.partitions(followed, after)
    assert [(r.tp, r.start, r.end, r.topic_id) for r in group.ranges] == [(TopicPartition("t2", 0), 0, 10, new_id)]
    # A plan from before topic ids gets them.
    assert reader.latestOffset({"t1/0": 20, "t1/1": 0}, ReadAllAvailable())[TOPIC_IDS]["t1"] == ids["t1"]


def test_a_topic_whose_destination_was_lost_is_planned_again_from_its_log_start_once(cluster, tmp_path):
    """The driver's file names a lost destination topic (mirror.spark.rewinds): the next plan
    starts its source topic again at its earliest offsets, with nothing of it in that
    micro-batch and nothing planned from before the loss; later plans, a restart's included,
    go on from there, and a new plan does not start anywhere it was not told to."""
    import json

    broker, client = cluster
    client.create_topics([NewTopic("t1", 1), NewTopic("t2", 2)])
    _fill(client, "t1", 0, 3)
    _fill(client, "t2", 1, 2)
    rewinds = tmp_path / "rewinds.json"
    config = load_config(None, {"source.bootstrap": broker.bootstrap, "destination.bootstrap": "127.0.0.1:1",
                                "topics": "t.*", "starting_offsets": "latest"})
    reader = KafkaRangeReader(config, rewinds_file=rewinds)
    start = reader.initialOffset()
    assert _planned(start) == {"t1/0": 30, "t2/0": 0, "t2/1": 20}  # latest: nothing of what is there
    _fill(client, "t1", 0, 1)
    _fill(client, "t2", 1, 1)
    end = reader.latestOffset(start, ReadAllAvailable())
    rewinds.write_text(json.dumps({"t1": "lost-id"}))  # the driver found t1's destination lost meanwhile
    # This micro-batch was planned before the loss: t1's range is of the lost topic, not copied.
    assert [(r.topic, r.start, r.end) for g in reader.partitions(start, end) for r in g.ranges] == [("t2", 20, 30)]
    again = reader.latestOffset(end, ReadAllAvailable())
    assert again["@rewound"] == {"t1": "lost-id"} and _planned(again) == {"t1/0": 0, "t2/0": 0, "t2/1": 30}
    assert reader.partitions(end, again) == []
    _fill(client, "t2", 0, 1)
    after = reader.latestOffset(again, ReadAllAvailable())
    assert sorted((r.topic, r.partition, r.start, r.end) for g in reader.partitions(again, after) for r in g.ranges) \
        == [("t1", 0, 0, 40), ("t2", 0, 0, 10)]
    restarted = KafkaRangeReader(config, rewinds_file=rewinds)  # a restart reads the plan back: copied once
    assert _planned(restarted.latestOffset(after, ReadAllAvailable())) == _planned(after)
    assert KafkaRangeReader(config, rewinds_file=rewinds).initialOffset()["@rewound"] == {"t1": "lost-id"}


def test_offsets_cover_every_selected_partition_and_ranges_become_rows(cluster):
    broker, client = cluster
    client.create_topics([NewTopic("t1", 2), NewTopic("other", 1)])
    _fill(client, "t1", 0, 3)
    reader = _reader(broker)
    start = reader.initialOffset()
    assert _planned(start) == {"t1/0": 0, "t1/1": 0}
    end = reader.latestOffset(start, ReadAllAvailable())
    assert _planned(end) == {"t1/0": 30, "t1/1": 0}
    (only,) = reader.partitions(start, end)
    t1_id = str(broker.state.topics.topics["t1"].topic_id)  # the broker's own, not read back by the client
    assert list(reader.read(only)) == [("t1", 0, 0, 30, 0, 0, t1_id)]
    assert reader.partitions(end, end) == []


def test_latest_starting_offsets_skip_what_is_there(cluster):
    broker, client = cluster
    client.create_topics([NewTopic("t1", 1)])
    _fill(client, "t1", 0, 2)
    assert _planned(_reader(broker, starting_offsets="latest").initialOffset()) == {"t1/0": 20}


def test_a_record_limit_from_spark_caps_the_micro_batch(cluster):
    broker, client = cluster
    client.create_topics([NewTopic("t1", 2)])
    _fill(client, "t1", 0, 5)
    _fill(client, "t1", 1, 5)
    reader = _reader(broker, max_records_per_trigger=30)
    assert reader.getDefaultReadLimit() == ReadMaxRows(30)
    assert _planned(reader.latestOffset({"t1/0": 0, "t1/1": 0}, ReadMaxRows(30))) == {"t1/0": 15, "t1/1": 15}
    # Spark may ask for everything (e.g. to honour a trigger); the limit must then be ignored.
    assert _planned(reader.latestOffset({"t1/0": 0, "t1/1": 0}, ReadAllAvailable())) == {"t1/0": 50, "t1/1": 50}


def test_a_byte_limit_is_turned_into_offsets_by_probing_batch_sizes(cluster):
    broker, client = cluster
    client.create_topics([NewTopic("t1", 1)])
    _fill(client, "t1", 0, 20, per_batch=10, size=1000)
    batch_size = len(kcodecs.build_batch([Record(value=b"x" * 1000)] * 10))
    reader = _reader(broker, max_bytes_per_trigger=5 * batch_size)
    assert reader.getDefaultReadLimit() == ReadMaxBytes(5 * batch_size)
    end = reader.latestOffset({"t1/0": 0}, ReadMaxBytes(5 * batch_size))
    assert _planned(end) == {"t1/0": 50}  # five batches of ten records


def test_available_now_pins_the_end_and_ignores_later_data_and_partitions(cluster):
    broker, client = cluster
    client.create_topics([NewTopic("t1", 1)])
    _fill(client, "t1", 0, 2)
    reader = _reader(broker)
    start = reader.initialOffset()
    reader.prepareForTriggerAvailableNow()
    _fill(client, "t1", 0, 2)
    client.create_topics([NewTopic("t2", 1)])
    assert _planned(reader.latestOffset(start, ReadAllAvailable())) == {"t1/0": 20}


@pytest.fixture
def open_transaction(monkeypatch):
    """The source's last 5 offsets of t1/0 in a transaction still open: a read_committed
    ListOffsets answers 5 below the high watermark, a read_uncommitted one the high watermark."""
    original = list_offsets_handler.handle

    async def handle(request, version, state):
        response = await original(request, version, state)
        for topic in response.topics:
            for part in topic.partitions:
                if request.isolation_level == 1 and (topic.name, part.partition_index) == ("t1", 0) and part.offset > 0:
                    part.offset -= 5
        return response

    monkeypatch.setattr(list_offsets_handler, "handle", handle)


def test_micro_batches_end_at_the_last_stable_offset(cluster, open_transaction):
    # Read committed, the copy cannot read past the open transaction: the plan stops before it.
    broker, client = cluster
    client.create_topics([NewTopic("t1", 2)])
    _fill(client, "t1", 0, 3)
    _fill(client, "t1", 1, 1)
    reader = _reader(broker)
    start = reader.initialOffset()
    assert _planned(reader.latestOffset(start, ReadAllAvailable())) == {"t1/0": 25, "t1/1": 10}
    assert client.list_offsets([TopicPartition("t1", 0)], "latest") == {TopicPartition("t1", 0): 30}
    reader.prepareForTriggerAvailableNow()
    _fill(client, "t1", 0, 1)
    assert _planned(reader.latestOffset(start, ReadAllAvailable())) == {"t1/0": 25, "t1/1": 10}
    assert _planned(_reader(broker, starting_offsets="latest").initialOffset()) == {"t1/0": 35, "t1/1": 10}


def test_new_partitions_first_appear_at_their_earliest_offset_with_nothing_to_copy(cluster):
    broker, client = cluster
    client.create_topics([NewTopic("t1", 1)])
    reader = _reader(broker)
    start = reader.initialOffset()
    client.create_topics([NewTopic("t2", 1)])
    _fill(client, "t2", 0, 1)
    found = reader.latestOffset(start, ReadAllAvailable())
    assert _planned(found) == {"t1/0": 0, "t2/0": 0}
    assert reader.partitions(start, found) == []
    assert _planned(reader.latestOffset(found, ReadAllAvailable())) == {"t1/0": 0, "t2/0": 10}


def test_bounds_hold_a_checkpointed_plan_above_its_start_and_out_of_skipped_spans(cluster):
    """A job with a checkpoint from before a failback jumps to the promotion point, and a
    failback never copies the spans a reconcile wrote (:mod:`mirror.engine.failback`)."""
    broker, client = cluster
    client.create_topics([NewTopic("t1", 1)])
    _fill(client, "t1", 0, 8)  # offsets 0..79, batches of ten
    tp = TopicPartition("t1", 0)
    config = load_config(None, {"source.bootstrap": broker.bootstrap, "destination.bootstrap": "127.0.0.1:1",
                                "topics": "t.*"})
    reader = KafkaRangeReader(config, bounds=Bounds({tp: 20}, {tp: ((40, 50), (50, 60))}))
    checkpointed = {"t1/0": 0}  # where a checkpoint from before left the partition
    first = reader.latestOffset(checkpointed, ReadAllAvailable())
    assert _planned(first) == {"t1/0": 40}  # to the skipped span, not into it
    assert [(r[2], r[3], r[5]) for g in reader.partitions(checkpointed, first) for r in reader.read(g)] == [(20, 40, 20)]
    second = reader.latestOffset(first, ReadAllAvailable())
    assert _planned(second) == {"t1/0": 80}
    assert [(r[2], r[3], r[5]) for g in reader.partitions(first, second) for r in reader.read(g)] == [(60, 80, 60)]


def test_bounds_cross_to_the_planner_in_their_file():
    tp, other = TopicPartition("t", 0), TopicPartition("u.v", 3)
    bounds = Bounds({tp: 7, other: 0}, {tp: ((10, 12), (20, 30))})
    assert Bounds.decode(bounds.encode()) == bounds
    assert bounds.without(["t"]) == Bounds({other: 0}, {})


def test_the_stop_file_ends_planning(cluster, tmp_path):
    broker, client = cluster
    client.create_topics([NewTopic("t1", 1)])
    _fill(client, "t1", 0, 1)
    reader = _reader(broker, tmp_path)
    start = reader.initialOffset()
    (tmp_path / "stop").touch()
    assert reader.latestOffset(start, ReadAllAvailable()) == start


def test_the_data_source_builds_its_reader_from_options(cluster, tmp_path):
    broker, _ = cluster
    config = _reader(broker).config.replaced("clusters", source=ClusterConfig(
        bootstrap=(broker.bootstrap,), security_protocol="SASL_PLAINTEXT",
        sasl=SaslConfig(mechanism="PLAIN", username="u", password="secret")))
    (tmp_path / "config.json").write_text(config.model_dump_json(context=REVEAL_SECRETS))
    source = KafkaRangeSource({"configFile": str(tmp_path / "config.json"), "stopFile": str(tmp_path / "s")})
    reader = source.streamReader(source.schema())
    assert reader.config == config and reader.stop_file == str(tmp_path / "s")
    assert KafkaRangeSource.name() == "kmirror-kafka"


def test_a_starting_time_starts_each_partition_at_its_first_record_that_recent(cluster):
    """Written by librdkafka with its own timestamps, found through the broker's time index."""
    import time

    from confluent_kafka import Producer

    broker, client = cluster
    client.create_topics([NewTopic("t1", 2)])
    hour = 3_600_000
    now = int(time.time() * 1000)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
    for hours_ago in (5, 4, 3, 2, 1):
        for i in range(10):
            producer.produce("t1", value=b"%d-%d" % (hours_ago, i), partition=0, timestamp=now - hours_ago * hour + i)
        producer.flush(30)
    producer.produce("t1", value=b"old", partition=1, timestamp=now - 10 * hour)
    producer.flush(30)
    three_hours_ago = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime((now - 3 * hour) / 1000))  # naive: UTC
    # The records stamped 3 h ago start at offset 20; partition 1 has nothing that recent: its end.
    assert _planned(_reader(broker, starting_offsets=three_hours_ago).initialOffset()) == {"t1/0": 20, "t1/1": 1}
    assert _planned(_reader(broker, starting_offsets=str(now - 2 * hour)).initialOffset()) == {"t1/0": 30, "t1/1": 1}
    assert _planned(_reader(broker, starting_offsets=now + hour).initialOffset()) == {"t1/0": 50, "t1/1": 1}


def _failing_first(monkeypatch, client, method: str, error: Exception, times: int) -> None:
    original, calls = getattr(client, method), []

    def flaky(*args, **kwargs):
        calls.append(None)
        if len(calls) <= times:
            raise error
        return original(*args, **kwargs)

    monkeypatch.setattr(client, method, flaky)


def test_planning_waits_out_a_source_outage(cluster, monkeypatch):
    from mirror.kafka import ClusterUnreachableError
    from mirror.spark import outage

    broker, client = cluster
    client.create_topics([NewTopic("t1", 1)])
    _fill(client, "t1", 0, 2)
    monkeypatch.setattr(outage, "INITIAL_BACKOFF_S", 0.01)
    reader = _reader(broker)
    start = reader.initialOffset()
    _failing_first(monkeypatch, reader.client, "list_offsets", ClusterUnreachableError(broker.bootstrap, "down"), 2)
    assert _planned(reader.latestOffset(start, ReadAllAvailable())) == {"t1/0": 20}


def test_a_stop_ends_the_wait_for_a_source_outage_with_no_new_micro_batch(cluster, monkeypatch, tmp_path):
    from mirror.kafka import ClusterUnreachableError

    broker, client = cluster
    client.create_topics([NewTopic("t1", 1)])
    reader = _reader(broker, tmp_path)
    start = reader.initialOffset()
    _failing_first(monkeypatch, reader.client, "list_offsets", ClusterUnreachableError(broker.bootstrap, "down"), 1)
    monkeypatch.setattr(reader, "_sleep", lambda seconds: (tmp_path / "stop").touch() or not reader._stopping())
    assert reader.latestOffset(start, ReadAllAvailable()) == start


def test_a_planner_whose_job_died_stops_waiting_out_a_source_outage(cluster, monkeypatch):
    """``kmirror run`` SIGKILLed while the source is down: the planner, a process of Spark's, is
    re-parented; it must stop waiting rather than outlive the job, retrying for ever."""
    from mirror.kafka import ClusterUnreachableError
    from mirror.spark import outage
    from mirror.spark import source as source_module

    monkeypatch.setattr(outage, "INITIAL_BACKOFF_S", 0.01)
    broker, client = cluster
    client.create_topics([NewTopic("t1", 1)])
    reader = _reader(broker, max_outage_s=10)  # without the check, the wait would fail the job in 10 s
    start = reader.initialOffset()
    asked = []

    def down(*args, **kwargs):  # the source never comes back
        asked.append(None)
        if len(asked) == 3:  # the job dies while the planner waits
            monkeypatch.setattr(source_module.os, "getppid", lambda: reader._parent + 1)
        raise ClusterUnreachableError(broker.bootstrap, "down")

    monkeypatch.setattr(reader.client, "list_offsets", down)
    assert reader.latestOffset(start, ReadAllAvailable()) == start
    assert len(asked) == 3


def test_ranges_without_a_known_leader_are_grouped_without_one(cluster, monkeypatch):
    from mirror.kafka import BrokerApiError

    broker, client = cluster
    client.create_topics([NewTopic("t1", 2)])
    _fill(client, "t1", 0, 2)
    _fill(client, "t1", 1, 2)
    reader = _reader(broker, copy_tasks=2)
    start = reader.initialOffset()
    end = reader.latestOffset(start, ReadAllAvailable())
    leaderless = BrokerApiError.from_code("Metadata", 5, TopicPartition("t1", 0))  # LEADER_NOT_AVAILABLE
    _failing_first(monkeypatch, reader.client, "leaders", leaderless, 1)
    groups = reader.partitions(start, end)
    assert sorted(r.partition for g in groups for r in g.ranges) == [0, 1]
