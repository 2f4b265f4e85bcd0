"""Topic ids (KIP-516) as kmirror's client lists them (``KafkaClient.listings``, Metadata v10+),
held to librdkafka's DescribeTopics on real Kafka 4.4 and on the embedded broker: the same id
for a topic, another one once it is deleted and made again under its name (issue 70: how a
mirror tells a topic made again from the one it copied)."""

from __future__ import annotations

import time

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from live_source import wait_until
from mirror.kafka import KafkaClient
from topic_lifecycle import cluster, topic_id

pytestmark = [pytest.mark.slow, pytest.mark.interop]


@pytest.mark.parametrize("kind", ["kafka", "embedded"])
def test_the_clients_topic_ids_are_librdkafkas_and_change_when_a_topic_is_made_again(kind, request, tmp_path):
    name = f"ids.{kind}.{time.time_ns()}"
    with cluster(kind, request, tmp_path) as bootstrap, KafkaClient(bootstrap) as client:
        admin = AdminClient({"bootstrap.servers": bootstrap})
        for future in admin.create_topics([NewTopic(name, 2, 1)]).values():
            future.result(30)
        wait_until(lambda: name in client.topics(), f"{name} to be listed", 30)
        first = client.listings()[name]
        assert (first.partitions, first.topic_id) == (2, topic_id(admin, name))
        for future in admin.delete_topics([name]).values():
            future.result(30)
        wait_until(lambda: name not in client.topics(), f"{name} to be gone", 60)
        for future in admin.create_topics([NewTopic(name, 3, 1)]).values():
            future.result(30)
        wait_until(lambda: name in client.topics(), f"{name} to be listed again", 30)
        second = client.listings()[name]
        assert second.topic_id == topic_id(admin, name) and second.topic_id not in (None, first.topic_id)
        assert second.partitions == 3
