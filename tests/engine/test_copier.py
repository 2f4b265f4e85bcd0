"""Resident copiers without Spark: leases handed to them as a Spark task hands them
(:func:`mirror.engine.copier.lease`), between two embedded brokers, read back by librdkafka's
read_committed consumer.

- A copier follows its partitions past the lease's ranges: records produced after the lease
  reach the destination without another one.
- A lease taken elsewhere (another executor: another socket directory) fences the first
  copier: the zombie cannot commit, it exits, and every record is at the destination once.
- A task that waits longer than the lease while its copy moves keeps the copier going; one
  whose copy stands still when the lease runs out is not answered as if its ranges were
  committed: it fails, to be run again.
"""

from __future__ import annotations

import tempfile
import time
import uuid

import pytest
from librdkafka_reader import read_values
from live_source import Writer, wait_until

from mirror.broker import EmbeddedBroker
from mirror.config import load_config
from mirror.engine import CopyJob, CopyRequest, offsets_topic_spec, sync_destination_topics
from mirror.engine.copier import CopierLostError, lease, release, socket_path
from mirror.engine.offset_syncs import OffsetSyncStore, offset_syncs_topic, offset_syncs_topic_spec
from mirror.kafka import KafkaClient, NewTopic, TopicPartition

pytestmark = pytest.mark.slow

PARTITIONS = 2
JOB = "copier-test"


@pytest.fixture(params=["exactly-once", "at-least-once"])
def setup(tmp_path, request):
    """Both delivery modes: at-least-once, a copier answers a waiting task from the produce
    acknowledgements, with no flush, so each test asks the same of it."""
    with EmbeddedBroker(tmp_path / "src") as src, EmbeddedBroker(tmp_path / "dst") as dst:
        with KafkaClient(src.bootstrap) as source, KafkaClient(dst.bootstrap) as destination:
            source.create_topics([NewTopic("live", PARTITIONS)])
            config = load_config(None, {"source.bootstrap": src.bootstrap, "destination.bootstrap": dst.bootstrap,
                                        "topics": "live", "name": JOB})
            routes = sync_destination_topics(config, source, destination)
            destination.create_topics([offsets_topic_spec(JOB), offset_syncs_topic_spec(JOB)])
        clusters = config.clusters
        job = CopyJob(clusters.source, clusters.destination, config.limits.retry, routes, 1024 * 1024,
                      delivery=request.param,
                      job=JOB, transaction_timeout_ms=10_000, run_id=uuid.uuid4().hex, lease_s=30,
                      commit_interval_ms=20)
        try:
            yield src, dst, job
        finally:
            release(job, 0)  # a copier left running would outlive its brokers for a lease


def _ends(bootstrap: str) -> list[CopyRequest]:
    with KafkaClient(bootstrap) as client:
        tps = [TopicPartition("live", p) for p in range(PARTITIONS)]
        latest = client.list_offsets(tps, "latest")
    return [CopyRequest(tp, 0, latest[tp]) for tp in tps]


def _copied(bootstrap: str) -> dict[int, list[bytes]]:
    return read_values(bootstrap, "live", PARTITIONS)


def test_a_copier_follows_its_partitions_past_its_lease(setup):
    src, dst, job = setup
    with Writer(src.bootstrap, "live", PARTITIONS) as writer:
        time.sleep(0.5)
        stats = lease(job, 0, _ends(src.bootstrap), 30)
        assert stats.failure is None
        time.sleep(1.0)
    # Nothing more was leased, yet the records written since are copied (and committed).
    wait_until(lambda: _copied(dst.bootstrap) == writer.written, "the copier to copy what came after its lease", 60)
    final = release(job, 0)
    assert final is not None and final.failure is None
    assert not socket_path(JOB, job.run_id, 0).exists()
    # The offset syncs the copier committed place copied records exactly: a group at source
    # offset n resumes at the destination offset where librdkafka reads record n (commit
    # markers between transactions take offsets there).
    with KafkaClient(dst.bootstrap) as destination:
        syncs = OffsetSyncStore(destination, offset_syncs_topic(JOB))
        syncs.refresh()
    tp = TopicPartition("live", 1)
    landed = {value: offset for offset, value in read_values(dst.bootstrap, "live", PARTITIONS,
                                                             take=lambda m: (m.offset(), m.value()))[1]}
    end = len(writer.written[1])
    for offset in (0, 7, end // 2, end - 1):
        translated = syncs.translate({tp: offset}, {tp: end})[tp]
        assert (translated.offset, translated.precision.value) == (landed[writer.written[1][offset]], "exact")


def test_an_idle_copier_writes_the_syncs_of_its_last_records_without_more_coming(setup):
    """A copier that caught up and then gets nothing more still writes where its last records
    landed, a second or so later (it used to hold them until the next record or its release:
    a failover then could not place them, nor translate a group that read them)."""
    src, dst, job = setup
    with Writer(src.bootstrap, "live", PARTITIONS) as writer:
        time.sleep(0.5)
    ends = _ends(src.bootstrap)
    assert lease(job, 0, ends, 30).failure is None
    wait_until(lambda: _copied(dst.bootstrap) == writer.written, "the copier to copy every record", 60)

    def synced() -> dict[TopicPartition, int]:
        with KafkaClient(dst.bootstrap) as destination:
            entries = OffsetSyncStore(destination, offset_syncs_topic(JOB)).refresh()
        return {tp: max(e.last + 1 for e in entries if e.source == tp) for tp in {e.source for e in entries}}

    wait_until(lambda: synced() == {r.tp: r.end for r in ends}, "the syncs of the last records, with no release", 15)


def test_a_lease_taken_elsewhere_fences_the_first_copier(setup, tmp_path, monkeypatch):
    src, dst, job = setup
    if job.delivery != "exactly-once":
        pytest.skip("fencing is exactly-once's: at-least-once, two copiers may both write")
    with Writer(src.bootstrap, "live", PARTITIONS) as writer:
        time.sleep(0.5)
        assert lease(job, 0, _ends(src.bootstrap), 30).failure is None
        first = socket_path(JOB, job.run_id, 0)
        time.sleep(1.0)
        # Another executor: another machine's temporary directory, so another copier of task 0.
        elsewhere = tmp_path / "elsewhere"
        elsewhere.mkdir()
        monkeypatch.setattr(tempfile, "tempdir", str(elsewhere))
        second = socket_path(JOB, job.run_id, 0)
        assert second != first
        assert lease(job, 0, _ends(src.bootstrap), 30).failure is None
        # The first copier's next commit is refused (its epoch is fenced): it stops.
        wait_until(lambda: not first.exists(), "the fenced copier to exit", 30)
        time.sleep(1.0)
    stats = lease(job, 0, _ends(src.bootstrap), 30)
    assert stats.failure is None
    assert _copied(dst.bootstrap) == writer.written  # every record once, in order


def test_a_task_is_not_told_its_ranges_are_copied_when_they_are_not(setup):
    """The lease runs out while the task waits for ends that never come (here past the
    source's end; in the soak test, a partition the copier had stopped fetching): the task
    fails with CopierLostError, and the driver runs it again. Answered with a report, it would
    count the ranges as copied, and the next micro-batch would start past them."""
    _src, _dst, job = setup
    beyond = [CopyRequest(TopicPartition("live", p), 0, 1_000) for p in range(PARTITIONS)]
    with pytest.raises(CopierLostError, match="before its ranges were committed"):
        lease(job, 0, beyond, 2)
    assert not socket_path(JOB, job.run_id, 0).exists()


def test_a_task_waiting_longer_than_the_lease_while_its_copy_moves_is_copied_whole(setup):
    """A micro-batch that takes longer than the lease (a catch-up, a slow destination): the
    waiting task and the copy's progress keep the copier going, and the task is answered once
    its ends are committed."""
    src, dst, job = setup
    with Writer(src.bootstrap, "live", PARTITIONS) as writer:
        time.sleep(0.2)
        # Ends about three seconds of writing ahead, with a lease of one second.
        ahead = [CopyRequest(r.tp, r.start, r.end + 1500) for r in _ends(src.bootstrap)]
        stats = lease(job, 0, ahead, 1)
    assert stats.failure is None
    copied = _copied(dst.bootstrap)
    for p in range(PARTITIONS):
        assert copied[p][:ahead[p].end] == writer.written[p][:ahead[p].end]
        assert len(copied[p]) >= ahead[p].end


def test_a_traced_copier_writes_each_committed_batch_with_its_stages_in_order(setup, tmp_path, monkeypatch):
    """``KMIRROR_TRACE`` (``kmirror bench latency --trace``): every batch the copier committed is
    a line of the trace, its stages in the order the copy passes them, its records and newest
    CreateTime those librdkafka reads at the destination."""
    import json

    from mirror.engine.trace import TRACE_ENV

    src, dst, job = setup
    monkeypatch.setenv(TRACE_ENV, str(tmp_path / "trace"))  # the copier process inherits it
    with Writer(src.bootstrap, "live", PARTITIONS, pause_s=0.05):
        time.sleep(0.5)
        assert lease(job, 0, _ends(src.bootstrap), 30).failure is None
        time.sleep(1.0)
    final = release(job, 0)
    assert final is not None and final.failure is None
    stamped = read_values(dst.bootstrap, "live", PARTITIONS, take=lambda m: m.timestamp()[1])
    (trace,) = (tmp_path / "trace").glob("trace-*.jsonl")
    batches = [json.loads(line) for line in trace.read_text().splitlines() if '"b"' in line]
    assert sum(b["n"] for b in batches) == sum(map(len, stamped.values()))
    newest = {stamp for stamps in stamped.values() for stamp in stamps}
    for batch in batches:
        created, *stages = batch["b"]
        assert round(created * 1000) in newest, batch
        assert [created, *stages] == sorted([created, *stages]), batch  # created, fetched, ... committed


def test_a_copier_starting_is_not_held_by_a_dead_siblings_open_transaction(setup):
    """Found by the soak test (issue 62's notes): an outage killed both copiers of a job in the
    middle of their transactions, and the copier of task 0 started again alone (task 1's start
    was refused, and the driver runs it again only once task 0's micro-batch is done). A
    starting copier reads where it is from ``kmirror-offsets``, read_committed, to its end,
    and that end was held by task 1's transaction, which nothing ended until the destination's
    transaction timeout: the job stood still for a minute. Here task 1's transactional id has
    a transaction open on the offsets topic, left by a producer that is gone; task 0's copier
    must still copy its ranges within its lease."""
    from mirror.engine.exactly_once import transactional_id
    from mirror.engine.offsets_topic import encode_offsets, offsets_topic
    from mirror.kafka.transactional_producer import TransactionalProducer

    src, dst, job = setup
    if job.delivery != "exactly-once":
        pytest.skip("no transactions at-least-once")
    with Writer(src.bootstrap, "live", PARTITIONS) as writer:
        time.sleep(0.5)
    with KafkaClient(dst.bootstrap) as destination:
        dead = TransactionalProducer(destination, transactional_id(JOB, 1), transaction_timeout_ms=15 * 60 * 1000)
        record = encode_offsets({TopicPartition("live", 1): 0}, int(time.time() * 1000))
        dead.enqueue(TopicPartition(offsets_topic(JOB), 0), record, 1, None)
        dead.flush()  # written, never committed: its producer is gone
        stats = lease(job, 0, [CopyRequest(TopicPartition("live", 0), 0, len(writer.written[0]))], 10)
    assert stats.failure is None
    assert _copied(dst.bootstrap)[0] == writer.written[0]
