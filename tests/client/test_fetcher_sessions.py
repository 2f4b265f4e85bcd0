"""The fetcher's sessions (KIP-227, issue 69) against the embedded broker: idle partitions cost
nothing, and a session the broker lost or refused is started again without losing or
repeating a record.

The embedded broker serves sessions as Kafka does (tests/broker/test_fetch_sessions.py holds it
to kafka-python's sessions); real Kafka is the verdict in tests/realkafka/test_real_fetch_sessions.py.
Each test follows 300 partitions of which two move (tests/support/fetch_follower.py counts
what each request named and each answer carried); every record the fetcher returned is
compared with what librdkafka reads from the topic.
"""

from __future__ import annotations

import pytest

from fetch_follower import Follower, count_fetches, write
from librdkafka_reader import read_values
from mirror.broker import EmbeddedBroker
from mirror.kafka import KafkaClient, NewTopic, TopicPartition

TOPIC, PARTITIONS = "idle", 300
HOT = [TopicPartition(TOPIC, p) for p in (3, 150)]
ALL = [TopicPartition(TOPIC, p) for p in range(PARTITIONS)]


@pytest.fixture
def broker(tmp_path):
    with EmbeddedBroker(tmp_path / "data") as running:
        with KafkaClient(running.bootstrap) as client:
            client.create_topics([NewTopic(TOPIC, PARTITIONS)])
        yield running


def test_idle_partitions_are_neither_named_nor_answered(broker, monkeypatch):
    """Once the session is up, its requests name only the partitions that moved, and its
    answers carry only those: 300 partitions cost what two do."""
    fetches = count_fetches(monkeypatch)
    with KafkaClient(broker.bootstrap) as client:
        write(client, ALL, "all", 1)
        follower = Follower(client, TOPIC, PARTITIONS)
        try:
            follower.until(lambda: all(offset == 1 for offset in follower.offsets.values()))
            follower.until(lambda: any(s.session_id and s.epoch > 1 for s in fetches.sent))
            sent, answered = fetches.mark()
            for round_ in range(5):
                write(client, HOT, f"hot{round_}")
                follower.until(lambda: all(follower.offsets[tp] == 1 + 5 * (round_ + 1) for tp in HOT))
        finally:
            follower.close()
    later, answers = fetches.sent[sent:], fetches.answered[answered:]
    assert any(s.session_id and s.epoch > 1 for s in later)
    assert later and max(s.named + s.forgotten for s in later) <= 2 * len(HOT)
    assert answers and max(a.partitions for a in answers) <= len(HOT)
    assert follower.values == read_values(broker.bootstrap, TOPIC, PARTITIONS)


@pytest.mark.parametrize("fault", ["evicted", "wrong epoch"])
def test_a_session_the_broker_lost_or_refuses_is_started_again(broker, monkeypatch, fault):
    """FETCH_SESSION_ID_NOT_FOUND (the broker evicted it) and INVALID_FETCH_SESSION_EPOCH: the
    next fetch is a full one asking for a new session, and no record is lost or read twice."""
    fetches = count_fetches(monkeypatch)
    with KafkaClient(broker.bootstrap) as client:
        write(client, ALL, "all", 1)
        follower = Follower(client, TOPIC, PARTITIONS)
        try:
            follower.until(lambda: any(s.session_id and s.epoch > 1 for s in fetches.sent))
            sessions = broker.state.fetch_sessions._sessions
            (old,) = sessions
            if fault == "evicted":
                sessions.clear()
            else:
                sessions[old].epoch += 5
            write(client, HOT, "after")
            follower.until(lambda: all(follower.offsets[tp] == 6 for tp in HOT))
            follower.until(lambda: any(s.session_id not in (0, old) and s.epoch > 1 for s in fetches.sent))
        finally:
            follower.close()
    fulls = [s for s in fetches.sent if s.epoch == 0]
    assert len(fulls) == 2, [(s.session_id, s.epoch) for s in fetches.sent]
    assert fulls[1].session_id == (0 if fault == "evicted" else old)  # a refused session is closed by name
    refused = [a.error_code for a in fetches.answered if a.error_code]
    assert refused == [70 if fault == "evicted" else 71]
    assert follower.values == read_values(broker.bootstrap, TOPIC, PARTITIONS)
