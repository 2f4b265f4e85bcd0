"""CreateTopics for a whole cluster (issue 69): the requests cut to a KRaft controller's caps,
refusals named, a request the broker still finds too large cut again.

The caps are Kafka's (mirror/protocol/controller_limits.py, read from its jars); that the
embedded broker refuses what Kafka refuses is held to kafka-python's admin client here and to
real Kafka in tests/realkafka/test_real_differential.py. What got created is read back with
kafka-python, not with the client under test.
"""

from __future__ import annotations

import logging

import pytest
from kafka.admin import KafkaAdminClient
from kafka.admin import NewTopic as KNewTopic
from kafka.errors import PolicyViolationError

from mirror.broker import EmbeddedBroker
from mirror.broker.handlers import create_topics as create_topics_handler
from mirror.kafka import KafkaClient, NewTopic, RetryPolicy, TopicCreationError
from mirror.kafka.topic_creation import create_topics, creation_requests

FAST = RetryPolicy(attempts=4, initial_backoff_s=0.01, max_backoff_s=0.05)


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with EmbeddedBroker(tmp_path_factory.mktemp("creation")) as running:
        yield running


@pytest.fixture
def client(broker):
    with KafkaClient(broker.bootstrap, retry=FAST, request_timeout_s=10) as running:
        yield running


def _listed(broker, prefix: str) -> dict[str, int]:
    """Topic -> partitions as kafka-python's admin client sees them."""
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        return {t["name"]: len(t["partitions"]) for t in admin.describe_topics()
                if t["name"].startswith(prefix) and not t["error_code"]}
    finally:
        admin.close()


# --- the cut, pure -----------------------------------------------------------------------------

def _sizes(requests: list[list[NewTopic]]) -> list[tuple[int, int, int]]:
    """Per request: topics, partitions, metadata records (1 + partitions + configs a topic)."""
    return [(len(r), sum(t.partitions for t in r), sum(1 + t.partitions + len(t.configs) for t in r))
            for r in requests]


def test_a_thousand_topics_of_ten_partitions_need_two_requests():
    """10,000 partitions pass the partition cap, but 11,000 records do not: 909 topics
    (9,999 records) then the other 91."""
    topics = [NewTopic(f"t.{i}", 10) for i in range(1000)]
    requests = creation_requests(topics)
    assert _sizes(requests) == [(909, 9090, 9999), (91, 910, 1001)]
    assert [t for r in requests for t in r] == topics


def test_configs_count_as_records_and_partitions_have_their_own_cap():
    configs = {"cleanup.policy": "compact", "retention.ms": "1000", "segment.ms": "5000"}
    assert _sizes(creation_requests([NewTopic(f"c.{i}", 1, configs) for i in range(3000)])) == [
        (2000, 2000, 10000), (1000, 1000, 5000)]
    # One topic of 6,000 and one of 5,000: 11,000 partitions, so two requests.
    assert _sizes(creation_requests([NewTopic("a", 6000), NewTopic("b", 5000)])) == [(1, 6000, 6001), (1, 5000, 5001)]


def test_a_topic_past_a_cap_alone_goes_in_a_request_of_its_own():
    topics = [NewTopic("small", 1), NewTopic("huge", 20_000), NewTopic("after", 1)]
    assert _sizes(creation_requests(topics)) == [(1, 1, 2), (1, 20_000, 20_001), (1, 1, 2)]


# --- against the embedded broker --------------------------------------------------------------

def test_the_broker_refuses_what_kafkas_controller_refuses(broker):
    """Kafka's messages for its two caps (ReplicationControlManager, QuorumController), as
    kafka-python's admin client receives them; nothing of either request is created."""
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        for count, message in ((1001, "Excessively large number of partitions per request."),
                               (1000, "Unable to perform excessively large batch operation.")):
            response = admin.create_topics([KNewTopic(f"refused.{count}.{i}", 10, 1) for i in range(count)],
                                           raise_errors=False)
            errors = {(topic["error_code"], topic["error_message"]) for topic in response["topics"]}
            assert errors == {(PolicyViolationError.errno, message)}
    finally:
        admin.close()
    assert _listed(broker, "refused.") == {}


def test_a_whole_clusters_topics_are_created_in_requests_the_broker_takes(broker, client):
    """1,001 topics of 10 partitions (10,010 partitions, 11,011 records): more than one request
    holds either way. Every one is created, with its partitions."""
    topics = [NewTopic(f"whole.{i:04d}", 10) for i in range(1001)]
    assert client.create_topics(topics) == set()
    assert _listed(broker, "whole.") == {t.name: 10 for t in topics}


def test_a_request_the_broker_still_finds_too_large_is_cut_in_two(broker, client, monkeypatch, caplog):
    """A broker whose cap is lower than Kafka's (here 100 partitions): the client's first cut is
    refused as too large, so it halves the request until the broker takes it."""
    monkeypatch.setattr(create_topics_handler, "MAX_PARTITIONS_PER_REQUEST", 100)
    topics = [NewTopic(f"halved.{i:03d}", 10) for i in range(40)]
    with caplog.at_level(logging.INFO, logger="mirror.kafka.topic_creation"):
        assert client.create_topics(topics) == set()
    assert _listed(broker, "halved.") == {t.name: 10 for t in topics}
    assert any("sending them in two" in r.getMessage() for r in caplog.records)


def test_refused_topics_are_named_together_and_the_others_are_made(broker, client):
    """A bad name and a bad config among good topics: one error names both, with the broker's
    reason for each; the good ones exist."""
    topics = [NewTopic("named.good.0", 2), NewTopic("named.bad name", 1), NewTopic("named.good.1", 3),
              NewTopic("named.bad-config", 1, {"no.such.config": "1"})]
    with pytest.raises(TopicCreationError) as raised:
        client.create_topics(topics)
    assert sorted(raised.value.refused) == ["named.bad name", "named.bad-config"]
    assert {name: error.error_name for name, error in raised.value.refused.items()} == {
        "named.bad name": "INVALID_TOPIC", "named.bad-config": "INVALID_CONFIG"}
    assert str(raised.value).startswith("could not create 2 topics: ")
    assert _listed(broker, "named.") == {"named.good.0": 2, "named.good.1": 3}


def test_a_single_topic_past_the_caps_is_refused_by_name(broker, client):
    with pytest.raises(TopicCreationError) as raised:
        client.create_topics([NewTopic("one.huge", 10_001), NewTopic("one.fine", 1)])
    assert list(raised.value.refused) == ["one.huge"]
    assert "10001 partitions in one topic" in str(raised.value)
    assert _listed(broker, "one.") == {"one.fine": 1}


class _Clock:
    """A monotonic clock the wait's sleeps move on, so a minute of a broker's silence costs none."""

    def __init__(self):
        self.now = 0.0

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def _made_late(broker, client, monkeypatch, late: str, after_s: float):
    """The real broker makes the topics; its metadata hides ``late``'s leaders until the clock
    passed ``after_s``, as Kafka's does while it opens the logs of an earlier request."""
    from mirror.kafka import topic_creation
    clock = _Clock()
    monkeypatch.setattr(topic_creation, "time", clock)
    shown = client.led_topics
    monkeypatch.setattr(client, "led_topics", lambda names: {
        name for name in shown(names) if name != late or clock.now >= after_s})
    return clock


def test_the_wait_for_leaders_outlasts_a_broker_opening_thousands_of_partitions(tmp_path, monkeypatch):
    """CI, 2026-12-03: Kafka showed the second request's 92 topics no leader for over 60 s while
    it opened the first request's 9,090 logs, and the job failed them. 1,200 partitions just made
    and one topic silent for 90 s: the wait goes on, and the topic is made."""
    topics = [NewTopic(f"late.{i}", 600) for i in range(2)]
    with EmbeddedBroker(tmp_path / "late") as broker, \
            KafkaClient(broker.bootstrap, retry=FAST, request_timeout_s=30) as client:
        clock = _made_late(broker, client, monkeypatch, "late.1", after_s=90)
        assert create_topics(client, topics) == set()
        assert clock.now >= 90
        assert _listed(broker, "late.") == {t.name: 600 for t in topics}


def test_a_topic_whose_leaders_never_come_is_named_after_the_wait(broker, client, monkeypatch):
    """One partition made and its leader never shown: after a minute without progress (Kafka's
    default.api.timeout.ms) the topic is named, not waited for forever."""
    clock = _made_late(broker, client, monkeypatch, "never.0", after_s=float("inf"))
    with pytest.raises(TopicCreationError, match=r"could not create 1 topic: never\.0 \(created, but metadata "
                                                 r"showed no leader for all its partitions in 6\d s\)"):
        create_topics(client, [NewTopic("never.0", 1)])
    assert 60 <= clock.now < 70
