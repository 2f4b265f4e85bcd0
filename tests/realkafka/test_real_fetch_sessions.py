"""The fetcher's sessions (KIP-227) against Apache Kafka 4.4 (issue 69): Kafka itself is the
verdict on the session's requests. It must keep answering incremental requests that name only
the partitions that moved, with answers that carry only those, and answer the two session
errors a client meets (an unknown session id, as after an eviction, and a wrong epoch) so that
the fetcher starts a new session; every record it read is what librdkafka reads.
"""

from __future__ import annotations

import pytest

from fetch_follower import Follower, count_fetches, write
from librdkafka_reader import read_values
from mirror.kafka import KafkaClient, NewTopic, TopicPartition

PARTITIONS = 300


def _topic(client: KafkaClient, name: str) -> list[TopicPartition]:
    client.create_topics([NewTopic(name, PARTITIONS, replication_factor=1)])
    return [TopicPartition(name, p) for p in range(PARTITIONS)]


def test_kafka_answers_the_sessions_requests_with_only_what_moved(kafka_source, monkeypatch):
    fetches = count_fetches(monkeypatch)
    with KafkaClient(kafka_source.bootstrap) as client:
        every = _topic(client, "sessions.idle")
        hot = [every[3], every[150]]
        write(client, every, "all", 1)
        follower = Follower(client, "sessions.idle", PARTITIONS)
        try:
            follower.until(lambda: all(offset == 1 for offset in follower.offsets.values()))
            follower.until(lambda: any(s.session_id and s.epoch > 1 for s in fetches.sent))
            sent, answered = fetches.mark()
            for round_ in range(5):
                write(client, hot, f"hot{round_}")
                follower.until(lambda: all(follower.offsets[tp] == 1 + 5 * (round_ + 1) for tp in hot))
        finally:
            follower.close()
    later, answers = fetches.sent[sent:], fetches.answered[answered:]
    assert any(s.session_id and s.epoch > 1 for s in later)
    assert max(s.named + s.forgotten for s in later) <= 2 * len(hot)
    assert answers and max(a.partitions for a in answers) <= len(hot) and not any(a.error_code for a in answers)
    assert follower.values == read_values(kafka_source.bootstrap, "sessions.idle", PARTITIONS)


@pytest.mark.parametrize("fault", ["unknown id", "wrong epoch"])
def test_kafkas_session_errors_start_a_new_session_and_lose_nothing(kafka_source, monkeypatch, fault):
    fetches = count_fetches(monkeypatch)
    name = f"sessions.{fault.replace(' ', '-')}"
    with KafkaClient(kafka_source.bootstrap) as client:
        every = _topic(client, name)
        write(client, every, "all", 1)
        follower = Follower(client, name, PARTITIONS)
        try:
            follower.until(lambda: any(s.session_id and s.epoch > 1 for s in fetches.sent))
            follower.until(lambda: not any(s.in_flight for s in follower.fetcher._sessions.values()))
            (session,) = follower.fetcher._sessions.values()
            old = session.session_id
            if fault == "unknown id":
                session.session_id = old ^ 0x5A5A5A5
            else:
                session.epoch += 5
            write(client, every[:2], "after")
            follower.until(lambda: all(follower.offsets[tp] == 6 for tp in every[:2]))
            follower.until(lambda: any(s.session_id not in (0, old) and s.epoch > 1 for s in fetches.sent))
        finally:
            follower.close()
    refused = [a.error_code for a in fetches.answered if a.error_code]
    assert refused == [70 if fault == "unknown id" else 71]  # FETCH_SESSION_ID_NOT_FOUND, INVALID_FETCH_SESSION_EPOCH
    assert len([s for s in fetches.sent if s.epoch == 0]) == 2
    assert follower.values == read_values(kafka_source.bootstrap, name, PARTITIONS)
