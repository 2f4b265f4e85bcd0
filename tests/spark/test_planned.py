"""The micro-batch's copy groups read from Spark's plan (:func:`mirror.spark.pyspark_internals.planned_groups`) instead of
its rows: on this Spark they must be exactly what reading the rows gives, and where they are
not in the plan the job reads the rows and copies the same."""

from __future__ import annotations

import logging

import pytest
from librdkafka_reader import read_values

import kcodecs
from kcodecs import Record
from mirror.broker import EmbeddedBroker
from mirror.config import load_config
from mirror.kafka import KafkaClient, NewTopic, TopicPartition
from mirror.spark.runner import _routed
from mirror.spark.source import CopyGroup, CopyRange
from mirror.engine.topics import TopicRoute

PARTITIONS = 4


def _fill(bootstrap: str, topic: str, batches: int) -> dict[int, list[bytes]]:
    written: dict[int, list[bytes]] = {p: [] for p in range(PARTITIONS)}
    with KafkaClient(bootstrap) as client:
        client.create_topics([NewTopic(topic, PARTITIONS)])
        for b in range(batches):
            for p in range(PARTITIONS):
                records = [Record(key=None, value=b"%d-%d-%d" % (p, b, i)) for i in range(5 + p)]
                client.produce([(TopicPartition(topic, p), kcodecs.build_batch(records, compression="lz4"))])
                written[p] += [r.value for r in records]
    return written


@pytest.mark.slow
def test_the_groups_in_the_plan_are_the_rows_the_source_reads(tmp_path):
    """Each micro-batch's rows, as Spark computes them by running the source's ``read`` on
    executors, against the groups unpickled from the plan without running it."""
    from mirror.spark.pyspark_internals import planned_groups
    from mirror.spark.session import spark_session
    from mirror.spark.source import CONFIG_FILE_OPTION, KafkaRangeSource

    with EmbeddedBroker(tmp_path / "src") as src:
        _fill(src.bootstrap, "events", batches=3)
        with KafkaClient(src.bootstrap) as client:
            topic_id = str(client.listings()["events"].topic_id)
        config = load_config(None, {"source.bootstrap": src.bootstrap, "destination.bootstrap": "127.0.0.1:9",
                                    "topics": "events", "checkpoint": str(tmp_path / "ck"), "copy_tasks": 2,
                                    "max_records_per_trigger": 50})
        spark = spark_session(config)
        spark.dataSource.register(KafkaRangeSource)
        config_file = tmp_path / "config.json"
        config_file.write_text(config.model_dump_json())
        seen: list[tuple[list[CopyGroup] | None, list[tuple]]] = []

        def compare(rows, batch_id):
            seen.append((planned_groups(rows), sorted(tuple(row) for row in rows.collect())))

        query = (spark.readStream.format(KafkaRangeSource.name()).option(CONFIG_FILE_OPTION, str(config_file)).load()
                 .writeStream.foreachBatch(compare).option("checkpointLocation", str(tmp_path / "ck"))
                 .trigger(availableNow=True).start())
        query.awaitTermination(120)
    assert len(seen) >= 2  # the record limit cuts the backlog into several micro-batches
    copied = 0
    for groups, rows in seen:
        assert groups is not None, "the copy groups were not found in this Spark's plan"
        assert [group.index for group in groups] == list(range(len(groups)))
        assert sorted((r.topic, r.partition, r.start, r.end, group.index, r.floor, r.topic_id)
                      for group in groups for r in group.ranges) == rows
        assert {row[-1] for row in rows} == {topic_id}, "each range names the topic by its id"
        copied += sum(end - start for _, _, start, end, _, _, _ in rows)
    assert copied == sum(3 * (5 + p) for p in range(PARTITIONS))


@pytest.mark.slow
def test_without_groups_in_the_plan_the_rows_are_read_and_the_copy_is_the_same(tmp_path, monkeypatch, caplog):
    import mirror.spark.runner as runner
    from mirror.spark.job import run_mirror

    monkeypatch.setattr(runner, "planned_groups", lambda rows: None)
    with EmbeddedBroker(tmp_path / "src") as src, EmbeddedBroker(tmp_path / "dst") as dst:
        written = _fill(src.bootstrap, "events", batches=4)
        config = load_config(None, {"source.bootstrap": src.bootstrap, "destination.bootstrap": dst.bootstrap,
                                    "topics": "events", "once": True, "checkpoint": str(tmp_path / "ck"),
                                    "max_records_per_trigger": 40})
        with caplog.at_level(logging.WARNING, logger="mirror.spark.runner"):
            totals = run_mirror(config)
        copied = read_values(dst.bootstrap, "events", PARTITIONS)
    assert copied == written
    assert totals.micro_batches >= 2
    warnings = [r.getMessage() for r in caplog.records if "not in this Spark's plan" in r.getMessage()]
    assert len(warnings) == 1  # once per run, not per micro-batch


def _groups(*ranges: tuple[str, int]) -> list[CopyGroup]:
    return [CopyGroup(0, tuple(CopyRange(topic, partition, 0, 10) for topic, partition in ranges))]


def test_the_destination_topics_are_checked_only_for_ranges_the_routes_do_not_know():
    routes = {"a": TopicRoute("a", "a", 2, None), "b": TopicRoute("b", "b", 1, None)}
    assert _routed(_groups(("a", 0), ("a", 1), ("b", 0)), routes)
    assert not _routed(_groups(("a", 2)), routes)  # a partition added at the source
    assert not _routed(_groups(("a", 0), ("c", 0)), routes)  # a new topic
    assert _routed([], routes)
