"""Fetch sessions (KIP-227) as the embedded broker serves them (issue 69).

The rules are Kafka's ``FetchSession.scala`` (mirror/broker/fetch_sessions.py says which):
held to them here case by case, and to real clients below: kafka-python's consumer keeps
incremental sessions (its ``FetchSessionHandler``, on by default) and must read every record
of a topic of many partitions while it grows, as librdkafka, which sends full fetches, reads it.
"""

from __future__ import annotations

import time

import pytest
from kafka import KafkaConsumer
from kafka import TopicPartition as KTopicPartition

import kcodecs
from kcodecs import Record
from librdkafka_reader import read_values
from mirror.broker import EmbeddedBroker
from mirror.broker.fetch_sessions import (EVICTION_MS, FetchSessionCache, Full, Incremental, SessionError, Sessionless,
                                          Wanted, next_epoch)
from mirror.broker.handlers import fetch as fetch_handler
from mirror.kafka import KafkaClient, NewTopic, TopicPartition
from mirror.protocol import FetchedPartition

NOT_FOUND, BAD_EPOCH = 70, 71  # FETCH_SESSION_ID_NOT_FOUND, INVALID_FETCH_SESSION_EPOCH


def _answer(want: Wanted, *, records: bytes = b"", high_watermark: int = 10, log_start: int = 0,
            error: int = 0) -> FetchedPartition:
    return FetchedPartition(want.topic, want.partition, error, high_watermark, high_watermark, log_start, None,
                            memoryview(records))


def _opened(cache: FetchSessionCache, wanted, now_ms: int = 0) -> int:
    """A session made by a full fetch of ``wanted`` answered with nothing new; its id."""
    context = cache.context(0, 0, wanted, (), now_ms)
    assert isinstance(context, Full)
    session_id, answered = context.respond([_answer(w) for w in context.wanted], now_ms)
    assert session_id > 0 and len(answered) == len(wanted)
    return session_id


WANTED = [Wanted("t", p, 5, 1024) for p in range(4)]


def test_the_epochs_of_a_session_and_the_errors_of_a_wrong_one():
    cache = FetchSessionCache()
    assert isinstance(cache.context(0, -1, WANTED, (), 0), Sessionless)
    session_id = _opened(cache, WANTED)
    assert isinstance(cache.context(session_id + 1, 1, (), (), 0), SessionError)
    assert cache.context(session_id + 1, 1, (), (), 0).error_code == NOT_FOUND
    assert cache.context(session_id, 2, (), (), 0).error_code == BAD_EPOCH
    assert isinstance(cache.context(session_id, 1, (), (), 0), Incremental)
    assert cache.context(session_id, 1, (), (), 0).error_code == BAD_EPOCH  # 1 was used
    assert isinstance(cache.context(session_id, 2, (), (), 0), Incremental)
    assert next_epoch(2**31 - 1) == 1 and next_epoch(-1) == -1


def test_a_full_fetch_naming_a_session_closes_it():
    cache = FetchSessionCache()
    first = _opened(cache, WANTED)
    assert isinstance(cache.context(first, 0, WANTED, (), 0), Full)
    assert cache.context(first, 1, (), (), 0).error_code == NOT_FOUND
    second = _opened(cache, WANTED)
    assert isinstance(cache.context(second, -1, WANTED, (), 0), Sessionless)
    assert len(cache) == 0


def test_an_incremental_answer_keeps_only_what_changed_and_moves_served_partitions_to_the_end():
    cache = FetchSessionCache()
    session_id = _opened(cache, WANTED)
    context = cache.context(session_id, 1, [Wanted("t", 1, 9, 1024)], [("t", 3)], 0)
    assert [(w.partition, w.fetch_offset) for w in context.wanted] == [(0, 5), (1, 9), (2, 5)]
    answers = {0: _answer(context.wanted[0], records=b"x" * 10),     # records: kept, to the end
               1: _answer(context.wanted[1]),                        # nothing new: left out
               2: _answer(context.wanted[2], high_watermark=11)}     # a new high watermark: kept
    _, kept = context.respond([answers[w.partition] for w in context.wanted], 0)
    assert [p.partition for p in kept] == [0, 2]
    context = cache.context(session_id, 2, (), (), 0)
    assert [w.partition for w in context.wanted] == [1, 2, 0]
    errors = [_answer(w, error=6) if w.partition == 1 else _answer(w, high_watermark=11 if w.partition == 2 else 10)
              for w in context.wanted]
    _, kept = context.respond(errors, 0)
    assert [p.partition for p in kept] == [1]  # an error always answers; the rest have nothing new
    context = cache.context(session_id, 3, (), (), 0)
    _, kept = context.respond([_answer(w, high_watermark=11 if w.partition == 2 else 10) for w in context.wanted], 0)
    assert [p.partition for p in kept] == [1]  # answered again once the error is gone


def test_a_session_left_without_partitions_is_closed():
    cache = FetchSessionCache()
    session_id = _opened(cache, WANTED)
    context = cache.context(session_id, 1, (), [("t", p) for p in range(4)], 0)
    assert isinstance(context, Sessionless) and context.respond([], 0) == (0, [])
    assert len(cache) == 0


def _full(cache: FetchSessionCache, wanted, now_ms: int) -> int:
    """The session id a full fetch of ``wanted`` gets at ``now_ms`` (0: none)."""
    return cache.context(0, 0, wanted, (), now_ms).respond([_answer(w) for w in wanted], now_ms)[0]


def test_a_full_cache_evicts_a_stale_session():
    cache = FetchSessionCache(max_entries=1)
    first = _opened(cache, WANTED, now_ms=0)
    assert _full(cache, WANTED, 1_000) == 0  # used a second ago: no room, and nothing to evict
    assert _full(cache, WANTED, EVICTION_MS + 1) > 0  # unused for longer than the eviction time
    assert cache.context(first, 1, (), (), EVICTION_MS + 1).error_code == NOT_FOUND


def test_a_full_cache_evicts_an_old_smaller_session_for_a_larger_one_only():
    cache = FetchSessionCache(max_entries=1)
    small = _opened(cache, WANTED[:2], now_ms=0)
    assert isinstance(cache.context(small, 1, (), (), EVICTION_MS + 1), Incremental)  # in use: not stale
    assert _full(cache, WANTED[:2], EVICTION_MS + 2) == 0  # as large: it stays
    assert _full(cache, WANTED, EVICTION_MS + 2) > 0  # larger, and the other is old enough
    assert cache.context(small, 2, (), (), EVICTION_MS + 2).error_code == NOT_FOUND


# --- with real clients ----------------------------------------------------------------------------------


@pytest.fixture
def broker(tmp_path):
    with EmbeddedBroker(tmp_path / "data") as running:
        yield running


def _write(bootstrap: str, topic: str, partitions: int, rounds: int) -> dict[int, list[bytes]]:
    written: dict[int, list[bytes]] = {p: [] for p in range(partitions)}
    with KafkaClient(bootstrap) as client:
        now = int(time.time() * 1000)
        for r in range(rounds):
            batches = []
            for p in range(0, partitions, 7):  # some partitions only, as a real topic moves
                values = [b"%d-%d-%d" % (p, r, i) for i in range(3)]
                written[p] += values
                batches.append((TopicPartition(topic, p), kcodecs.build_batch([Record(value=v, timestamp=now)
                                                                              for v in values])))
            client.produce(batches)
    return written


def test_kafka_pythons_incremental_sessions_read_every_record_of_a_growing_topic(broker, monkeypatch):
    """kafka-python's consumer over 100 partitions, while some of them grow: it gets a session
    and then sends incremental requests, and reads what librdkafka's full fetches read."""
    topic, partitions = "sessions", 100
    with KafkaClient(broker.bootstrap) as client:
        client.create_topics([NewTopic(topic, partitions)])
    kinds: list[tuple[int, int]] = []
    serve = fetch_handler.handle

    async def counted(request, version, state):
        kinds.append((request.session_id, request.session_epoch))
        return await serve(request, version, state)

    monkeypatch.setattr(fetch_handler, "handle", counted)
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, enable_auto_commit=False, fetch_max_wait_ms=100,
                             auto_offset_reset="earliest")
    consumer.assign([KTopicPartition(topic, p) for p in range(partitions)])
    written = {p: [] for p in range(partitions)}
    seen: dict[int, list[bytes]] = {p: [] for p in range(partitions)}
    try:
        for round_ in range(4):
            for p, values in _write(broker.bootstrap, topic, partitions, 2).items():
                written[p] += values
            deadline = time.monotonic() + 30
            while sum(map(len, seen.values())) < sum(map(len, written.values())):
                assert time.monotonic() < deadline, f"round {round_}: kafka-python fell behind"
                for tp, messages in consumer.poll(timeout_ms=200).items():
                    seen[tp.partition] += [m.value for m in messages]
    finally:
        consumer.close()
    assert seen == written
    assert read_values(broker.bootstrap, topic, partitions) == written  # librdkafka: full fetches
    assert any(session and epoch > 1 for session, epoch in kinds), f"no incremental fetch among {set(kinds)}"
    assert len(broker.state.fetch_sessions) >= 1
