"""What ``kmirror verify`` reads, from a job's syncs and commits (no broker needed): the ranges
each side covers, and the sync entry each offset falls in, worked out by hand here."""

from __future__ import annotations

from mirror.engine.offset_syncs import SyncEntry
from mirror.verify.plan import Range, plan_pair
from mirror.verify.rows import NO_ENTRY, Spans
from mirror.kafka import TopicPartition


def _entry(source: int, first: int, last: int, destination: int, base: int, end: int, topic: str = "t") -> SyncEntry:
    return SyncEntry(TopicPartition(topic, source), first, last, TopicPartition("m." + topic, destination), base, end,
                     False)


def test_a_source_range_ends_at_what_both_the_commits_and_the_syncs_cover():
    entries = [
        _entry(0, 0, 9, 0, 0, 10), _entry(0, 10, 19, 1, 5, 15),  # source 0 split over two partitions
        _entry(1, 4, 7, 0, 10, 14),                              # source 1, from offset 4 (older syncs gone)
        _entry(1, 8, 30, 0, 14, 37),                             # past source 1's commit: left out
        _entry(2, 0, 5, 1, 0, 5, topic="other"),                 # another pair
    ]
    plan = plan_pair("t", "m.t", by_key=True, destination_partitions=2, entries=entries,
                     committed={0: 25, 1: 8}, tails={0: 40, 1: 31})
    # Source 0 committed 25 but its syncs say where only 0..19 went; source 1 committed 8.
    assert plan.sources == (Range(0, 0, 20, 40), Range(1, 4, 8, 31))
    assert plan.destinations == (Range(0, 0, 14), Range(1, 5, 15))
    assert plan.records == 24
    assert [plan.source_spans[0].entry_at(o) for o in (0, 9, 10, 19, 20)] == [0, 0, 1, 1, NO_ENTRY]
    assert [plan.destination_spans[0].entry_at(o) for o in (0, 9, 10, 13, 14)] == [0, 0, 2, 2, NO_ENTRY]
    assert plan.sources[0].read_to == 40 and plan.destinations[0].read_to == 14


def test_overlapping_spans_name_the_latest_start_and_any_they_meet():
    spans = Spans.of([(0, 100, 7), (10, 20, 8), (30, 40, 9)])  # a merged bound entry reaching over two
    assert [spans.entry_at(o) for o in (5, 15, 25, 35, 99, 100)] == [7, 8, 7, 9, 7, NO_ENTRY]
    assert spans.overlapping(20, 30) == {7}
    assert spans.overlapping(15, 35) == {7, 8, 9}
    assert spans.overlapping(100, 200) == set()
    assert Spans().entry_at(3) == NO_ENTRY and Spans().overlapping(0, 10) == set()


def test_every_destination_partition_is_planned_with_its_end_and_the_jobs_producers():
    entries = [_entry(0, 0, 9, 0, 3, 13), _entry(0, 10, 19, 2, 0, 10)]
    plan = plan_pair("t", "m.t", by_key=True, destination_partitions=3, entries=entries, committed={0: 20},
                     destination_tails={0: 15, 1: 7, 2: 12}, producers=frozenset({4000, 4001}), created=False)
    # Partition 1 has no sync: an empty range, its 7 offsets counted as not covered; the others'
    # offsets outside their ranges too (0-2 and 13-14 of partition 0, 10-11 of partition 2).
    assert plan.destinations == (Range(0, 3, 13, 15), Range(1, 0, 0, 7), Range(2, 0, 10, 12))
    assert (plan.producers, plan.created) == ({4000, 4001}, False)


def test_the_syncs_of_a_source_topic_since_deleted_and_made_again_are_not_compared():
    """Issue 70: offset 0 of the new topic is not offset 0 of the old one; the old copies are named."""
    import dataclasses

    old = [dataclasses.replace(_entry(0, 0, 9, 0, 0, 10), topic_id="old")]
    new = [dataclasses.replace(_entry(0, 0, 4, 0, 10, 15), topic_id="new")]
    plan = plan_pair("t", "m.t", by_key=False, destination_partitions=1, entries=old + new, committed={0: 5},
                     tails={0: 5}, topic_id="new")
    assert plan.sources == (Range(0, 0, 5, 5),) and plan.destinations == (Range(0, 10, 15),)
    assert (plan.topic_id, plan.earlier_ids) == ("new", ("old",))
    unknown = plan_pair("t", "m.t", by_key=False, destination_partitions=1, entries=old + new, committed={0: 5})
    assert unknown.earlier_ids == () and unknown.destinations == (Range(0, 0, 15),)  # no id known: as before


def test_the_syncs_into_a_destination_topic_since_lost_are_not_compared():
    """Issue 70: copied again into the destination topic made again, the source's offsets are
    compared with the new topic's records, never placed by the lost topic's syncs."""
    import dataclasses

    lost = [dataclasses.replace(_entry(0, 0, 9, 0, 0, 10), topic_id="s", destination_id="lost")]
    again = [dataclasses.replace(_entry(0, 0, 9, 0, 0, 10), topic_id="s", destination_id="new")]
    plan = plan_pair("t", "m.t", by_key=False, destination_partitions=1, entries=lost + again, committed={0: 10},
                     topic_id="s", destination_id="new")
    assert plan.sources == (Range(0, 0, 10),) and plan.lost_ids == ("lost",) and plan.earlier_ids == ()
    assert [plan.source_spans[0].entry_at(o) for o in (0, 9)] == [1, 1]  # the new topic's entry, not the lost one's
