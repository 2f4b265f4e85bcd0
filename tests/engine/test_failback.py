"""The failback's plan (issue 71), without clusters: the reverse job made from the A -> B job's
options, the A -> B job's syncs turned round, the spans a reconcile wrote, and how the A -> B job
runs after a failback. The whole round trip on real brokers is tests/realkafka/test_real_failback.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from mirror.config import load_config
from mirror.engine.failback import (Failback, FailbackNamingError, failback_job, inverse_syncs, resumed_starts,
                                    skipping)
from mirror.engine.failback import _merged
from mirror.engine.flow import FlowState, FlowStepError, check_step
from mirror.engine.offset_syncs import OffsetSyncStore, Precision, SyncEntry
from mirror.kafka import TopicPartition

A0, B0 = TopicPartition("orders", 0), TopicPartition("orders", 0)
A_ID, B_ID = "aaaaaaaaaaaaaaaaaaaaaa", "bbbbbbbbbbbbbbbbbbbbbb"


def _config(**settings):
    return load_config(None, {"source.bootstrap": "a:9092", "destination.bootstrap": "b:9092", "topics": "orders|pay.*",
                              "name": "dr", "checkpoint": "/var/kmirror/ck", **settings})


def test_the_failback_is_the_flow_turned_round_under_its_own_name_and_checkpoint():
    config = _config(source_alias="east", destination_alias="west")
    failover = FlowState("failed-over", 0, {TopicPartition("orders", 0): 10, TopicPartition("pay.eu", 2): 5})
    reverse = failback_job(config, failover)
    assert (reverse.clusters.source.bootstrap, reverse.clusters.destination.bootstrap) == (("b:9092",), ("a:9092",))
    assert (reverse.clusters.source_alias, reverse.clusters.destination_alias) == ("west", "east")
    assert reverse.job_name == "dr-failback"
    assert reverse.streaming.checkpoint == Path("/var/kmirror/ck-failback")
    assert reverse.streaming.starting_offsets == "earliest"
    assert reverse.clusters.flow_topics == ("orders", "pay.eu")
    assert (reverse.clusters.topics, reverse.delivery.mode) == ("orders|pay.*", "exactly-once")


@pytest.mark.parametrize("naming", [{"replication_policy": "prefix"}, {"rename": "copy.{topic}"}])
def test_a_flow_whose_names_change_has_no_way_home(naming):
    with pytest.raises(FailbackNamingError, match="replication_policy identity only"):
        failback_job(_config(**naming), FlowState("failed-over", 0))


def test_the_forward_syncs_turned_round_place_b_s_records_at_a_s_offsets():
    forward = [SyncEntry(A0, 0, 99, B0, 0, 100, True, A_ID, B_ID),  # before the disaster
               SyncEntry(A0, 100, 149, B0, 101, 151, True, A_ID, B_ID),  # after a marker at B 100
               SyncEntry(A0, 150, 159, B0, 300, 304, False, A_ID, B_ID)]  # rebuilt: a bound
    turned = [e for entries in inverse_syncs(forward).entries.values() for e in entries]
    assert turned == [SyncEntry(B0, 0, 99, A0, 0, 100, True, B_ID, A_ID),
                      SyncEntry(B0, 101, 150, A0, 100, 150, True, B_ID, A_ID),
                      SyncEntry(B0, 300, 303, A0, 150, 160, False, B_ID, A_ID)]
    store = OffsetSyncStore(None, "unused")
    store.add(turned)
    at = lambda offset: store.translate({B0: offset}, {B0: 304})[A0]  # noqa: E731
    assert (at(42).offset, at(42).precision) == (42, Precision.EXACT)
    assert at(101).offset == 100 and at(150).offset == 149
    assert (at(302).offset, at(302).precision) == (150, Precision.CONSERVATIVE)  # re-reads, never skips


def test_reconciled_spans_merge_where_they_touch():
    assert _merged([(50, 60), (10, 20), (20, 30), (55, 70)]) == ((10, 30), (50, 70))


def test_a_failback_that_skips_spans_copies_without_resident_copiers():
    reverse = _config()
    assert reverse.streaming.copy_between_micro_batches
    assert skipping(reverse, {}) is reverse
    assert not skipping(reverse, {B0: ((5, 9),)}).streaming.copy_between_micro_batches


def test_the_job_after_a_failback_goes_on_from_as_promotion_points_but_not_in_a_topic_made_again():
    assert resumed_starts(None, {}) == {}
    assert resumed_starts(FlowState("failed-over", 0, {A0: 5}), {}) == {}
    pay = TopicPartition("pay.eu", 1)
    state = FlowState("failed-back", 0, {A0: 7_000, pay: 3}, topic_ids={"orders": A_ID, "pay.eu": B_ID})
    assert resumed_starts(state, {"orders": A_ID, "pay.eu": B_ID}) == {A0: 7_000, pay: 3}
    assert resumed_starts(state, {"orders": "made-again-since-id-0000", "pay.eu": B_ID}) == {pay: 3}
    assert resumed_starts(FlowState("failed-back", 0, {A0: 7_000}), {"orders": A_ID}) == {A0: 7_000}  # no ids then


def test_a_failback_and_a_reconcile_come_only_after_a_failover():
    for step in ("failback", "reconcile"):
        with pytest.raises(FlowStepError, match="job j never failed over: a failback copies home .* 'kmirror failover'"):
            check_step(None, step, "j")
        with pytest.raises(FlowStepError, match="job j failed back at 1970-01-01 00:00:00 UTC"):
            check_step(FlowState("failed-back", 0), step, "j")
        check_step(FlowState("failed-over", 0), step, "j")



def test_the_finish_puts_back_as_provenance_of_what_came_from_a_or_was_made_at_b(tmp_path):
    """After the failback, A's provenance says the flow's topics came from B (a cycle for the
    A -> B job); the finish puts back what it said before: B's path without its last hop, A."""
    from mirror.broker import EmbeddedBroker
    from mirror.engine.failback import _restore_provenance
    from mirror.engine.provenance import Provenance, ProvenanceLog
    from mirror.kafka import KafkaClient

    with EmbeddedBroker(tmp_path / "a", cluster_id="cluster-a") as a_broker, \
            EmbeddedBroker(tmp_path / "b", cluster_id="cluster-b") as b_broker, \
            KafkaClient(a_broker.bootstrap) as a, KafkaClient(b_broker.bootstrap) as b:
        ProvenanceLog(b).record({"orders": Provenance(("cluster-z", "cluster-a"), "orders", created=False),
                                 "from-c": Provenance(("cluster-c",), "from-c")})
        written = {"orders": Provenance(("cluster-z", "cluster-a", "cluster-b"), "orders", created=False,
                                        partitioning="preserve"),
                   "refunds": Provenance(("cluster-b",), "refunds", partitioning="preserve"),
                   "from-c": Provenance(("cluster-c", "cluster-b"), "from-c")}
        ProvenanceLog(a).record(written)
        failback = Failback("dr", failback_job(_config(), FlowState("failed-over", 0)), FlowState("failed-over", 0), {})
        _restore_provenance(failback, b, a, {"orders", "refunds", "from-c"}, max_wait_s=10)
        after = dict(ProvenanceLog(a).refresh())
    assert after == {"orders": Provenance(("cluster-z",), "orders", created=False, partitioning="preserve"),
                     "refunds": Provenance((), "refunds", partitioning="preserve"),
                     "from-c": written["from-c"]}  # came to B from C: still B's, never mirrored back


def test_reconcile_is_refused_for_topics_whose_copy_rebuilds_batches(tmp_path):
    """The failback skips exactly the spans the reconcile's forwarded batches took at B: a
    by-key pair or a compacted topic (offset holes) rebuilds batches, whose spans may hold B's own."""
    from mirror.broker import EmbeddedBroker
    from mirror.engine.failback import _rebuilt_pairs
    from mirror.engine.provenance import Provenance, ProvenanceLog
    from mirror.kafka import KafkaClient, NewTopic

    with EmbeddedBroker(tmp_path / "a", cluster_id="cluster-a") as a_broker, \
            EmbeddedBroker(tmp_path / "b", cluster_id="cluster-b") as b_broker, \
            KafkaClient(a_broker.bootstrap) as a, KafkaClient(b_broker.bootstrap) as b:
        a.create_topics([NewTopic("orders", 1), NewTopic("keyed", 2), NewTopic("latest", 1,
                                                                             configs={"cleanup.policy": "compact"})])
        ProvenanceLog(b).record({"orders": Provenance(("cluster-a",), "orders", partitioning="preserve"),
                                 "keyed": Provenance(("cluster-a",), "keyed", partitioning="by-key"),
                                 "latest": Provenance(("cluster-a",), "latest", partitioning="preserve")})
        failback = Failback("dr", failback_job(_config(), FlowState("failed-over", 0)), FlowState("failed-over", 0), {})
        assert _rebuilt_pairs(failback, a, b, {"orders", "keyed", "latest"}) == ["keyed", "latest"]
