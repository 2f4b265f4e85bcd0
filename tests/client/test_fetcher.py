"""How the multi-partition fetcher shares a response among its partitions, against the
embedded broker (which fills a response in request order, each partition up to
``partition_max_bytes``, all up to ``max_bytes``, a whole batch promised only to the first
partition: KIP-74, as Kafka's ``ReplicaManager`` does).

- Every partition asked for gets its share of ``max_bytes``: one partition with a backlog
  does not take the whole response.
- A partition whose next batch is larger than its share, passed over in one response, is
  first in the next one and gets that batch.
- A fetch unanswered past the request timeout is lost with its connection, and fetched again.
- A connection that fails takes every fetch in flight on it along, not only the one that
  failed: their partitions are fetched again, none is left waiting for an answer that cannot
  come (the soak test's lost records: such a partition stalled its copier until the lease ended).
"""

from __future__ import annotations

import itertools
import random
import time

import pytest

import kcodecs
from kcodecs import Record
from mirror.broker import EmbeddedBroker
from mirror.kafka import ConnectionFailedError, Fetcher, KafkaClient, NewTopic, TopicPartition, wait_readable

MAX_BYTES = 64 * 1024
SMALL, LARGE = TopicPartition("t", 0), TopicPartition("t", 1)


@pytest.fixture
def source(tmp_path):
    with EmbeddedBroker(tmp_path / "src") as broker, KafkaClient(broker.bootstrap) as client:
        client.create_topics([NewTopic("t", 2)])
        yield client


def _fill(client: KafkaClient, tp: TopicPartition, batches: int, batch_bytes: int) -> None:
    """Uncompressed batches of incompressible values, about ``batch_bytes`` each."""
    noise = random.Random(str(tp))
    for _ in range(batches):
        records = [Record(value=noise.randbytes(batch_bytes // 4)) for _ in range(4)]
        client.produce([(tp, kcodecs.build_batch(records))])


def _fetch(fetcher: Fetcher, offsets: dict[TopicPartition, int]) -> dict[TopicPartition, list[kcodecs.Batch]]:
    """One fetch of ``offsets`` (in this order): the whole batches each partition got."""
    assert fetcher.send(offsets) == 1
    (conn,) = wait_readable(fetcher.connections(), 5.0)
    return {tp: list(kcodecs.iter_batches(fetched.records)) for tp, fetched in fetcher.on_readable(conn).items()}


def test_every_partition_gets_its_share_of_a_response(source):
    _fill(source, SMALL, batches=40, batch_bytes=4096)
    _fill(source, LARGE, batches=40, batch_bytes=4096)
    fetcher = Fetcher(source, max_bytes=MAX_BYTES)
    try:
        got = _fetch(fetcher, {SMALL: 0, LARGE: 0})
    finally:
        fetcher.close()
    # 160 KiB wait in each: with the whole of max_bytes open to the first partition, it
    # would fill the response and leave the second nothing.
    for tp in (SMALL, LARGE):
        size = sum(batch.size for batch in got[tp])
        assert got[tp] and size <= MAX_BYTES // 2, (tp, size)


def test_a_partition_passed_over_goes_first_next_time(source):
    _fill(source, SMALL, batches=40, batch_bytes=4096)
    _fill(source, LARGE, batches=2, batch_bytes=MAX_BYTES // 2 + 8192)  # each larger than a share
    fetcher = Fetcher(source, max_bytes=MAX_BYTES)
    try:
        first = _fetch(fetcher, {SMALL: 0, LARGE: 0})
        assert first[SMALL] and not first[LARGE]  # second in the request, its batch beyond its share
        small_next = first[SMALL][-1].last_offset + 1
        second = _fetch(fetcher, {SMALL: small_next, LARGE: 0})
    finally:
        fetcher.close()
    assert [batch.base_offset for batch in second[LARGE]] == [0]  # first now: its whole batch (KIP-74)


def test_a_failed_send_gives_back_the_fetches_in_flight_on_its_connection(source):
    """Two fetches in flight to one leader (its window has room for both), the second's send
    fails (the broker went away): the first fetch is lost with the connection, and its
    partition is fetched again like the other one."""
    _fill(source, SMALL, batches=2, batch_bytes=1024)
    _fill(source, LARGE, batches=2, batch_bytes=1024)
    ticks = itertools.count(step=1.0)  # every answer seems to take a second: the widest window
    fetcher = Fetcher(source, max_bytes=MAX_BYTES, clock=lambda: next(ticks))
    try:
        _fetch(fetcher, {SMALL: 0, LARGE: 0})  # the leader's round trip, measured
        assert fetcher.widest_window() > 1
        assert fetcher.send({SMALL: 0}, limit=1) == 1
        (conn,) = fetcher.connections()

        def broken(buffers):
            raise ConnectionFailedError(conn.address, "send failed: [Errno 32] Broken pipe")

        conn.broker.conn.send_buffers = broken
        assert fetcher.send({LARGE: 0}, limit=1) == 0
        assert not fetcher.connections()
        assert not fetcher.fetching(SMALL)  # its answer cannot come on the closed connection
        got: dict[TopicPartition, int] = {}
        for _ in range(20):  # both again, on a new connection, once their backoff has passed
            fetcher.send({tp: 0 for tp in (SMALL, LARGE) if tp not in got and not fetcher.fetching(tp)})
            for ready in wait_readable(fetcher.connections(), 5.0):
                for tp, fetched in fetcher.on_readable(ready).items():
                    got[tp] = len(list(kcodecs.iter_batches(fetched.records)))
            if len(got) == 2:
                break
    finally:
        fetcher.close()
    assert got == {SMALL: 2, LARGE: 2}


def test_a_fetch_unanswered_past_the_request_timeout_is_lost_and_fetched_again(source):
    """The leader's answer is never read here, as if the leader had stopped answering: once the
    request timeout (plus the fetch's own wait) has passed, the connection is given up and the
    partition is fetched again on a new one."""
    _fill(source, SMALL, batches=2, batch_bytes=1024)
    now = [0.0]
    fetcher = Fetcher(source, max_bytes=MAX_BYTES, max_wait_ms=100, clock=lambda: now[0])
    try:
        assert fetcher.send({SMALL: 0}) == 1
        (first,) = fetcher.connections()
        now[0] += source.request_timeout_s  # not yet: the fetch may wait max_wait_ms at the broker too
        fetcher.send({})
        assert fetcher.fetching(SMALL) and fetcher.connections() == [first]
        now[0] += 0.2
        fetcher.send({})
        assert not fetcher.fetching(SMALL) and not fetcher.connections() and first.closed
        now[0] += 60  # past the partition's backoff
        got = _fetch(fetcher, {SMALL: 0})
    finally:
        fetcher.close()
    assert len(got[SMALL]) == 2


def test_a_topic_deleted_under_the_fetcher_is_settled_gone_and_the_others_are_fetched_meanwhile(tmp_path):
    """Issue 70: a topic fetched by id that metadata stops listing (deleted, not made again) is
    retried as long as the retries last (metadata may lag), then settled as gone; a partition
    of another topic is fetched all the while (before, every partition of the request backed
    off with the missing topic's, and the copy became an outage)."""
    from mirror.kafka import RetryPolicy, TopicIdGoneError

    gone, stays = TopicPartition("gone", 0), TopicPartition("stays", 0)
    retry = RetryPolicy(attempts=4, initial_backoff_s=0.05, max_backoff_s=0.1)
    with EmbeddedBroker(tmp_path / "src") as broker, KafkaClient(broker.bootstrap, retry=retry) as client:
        client.create_topics([NewTopic("gone", 1), NewTopic("stays", 1)])
        _fill(client, gone, batches=1, batch_bytes=100)
        fetcher = Fetcher(client, max_bytes=MAX_BYTES, max_wait_ms=10)
        try:
            assert len(_fetch(fetcher, {gone: 0, stays: 0})[gone]) == 1  # fetched by id from now on
            broker.state.topics.delete("gone")
            client.forget_leaders([gone])
            settled, found = [], {}
            deadline = time.monotonic() + 20
            while time.monotonic() < deadline:
                time.sleep(0.02)
                _fill(client, stays, batches=1, batch_bytes=100)
                fetcher.send({gone: 1, stays: 0})
                for conn in wait_readable(fetcher.connections(), 0.2):
                    if stays in (answer := fetcher.on_readable(conn)):
                        settled.append(answer[stays])
                found.update(fetcher.take_gone())
                if found:
                    break
        finally:
            fetcher.close()
    assert isinstance(found.get(gone), TopicIdGoneError) and found[gone].tp == gone
    assert len(settled) >= 2, "the other topic waited on the deleted one"
