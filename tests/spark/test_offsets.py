"""Offset JSON and per-micro-batch limits, pure."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from mirror.kafka import TopicPartition
from mirror.spark.offsets import cap_end_offsets, format_offsets, parse_offsets

A, B, C = TopicPartition("a", 0), TopicPartition("b.x-y_z", 11), TopicPartition("c", 2)


def test_offsets_round_trip_through_the_checkpoint_json():
    offsets = {B: 7, A: 3}
    assert format_offsets(offsets) == {"a/0": 3, "b.x-y_z/11": 7}
    assert parse_offsets(format_offsets(offsets)) == offsets


def test_no_limit_reads_everything():
    assert cap_end_offsets({A: 5, B: 0}, {A: 10, B: 4}) == {A: 10, B: 4}


def test_a_record_limit_is_shared_fairly():
    # c needs 0, b needs 10 (< an equal share of 50/2), a gets the other 40.
    assert cap_end_offsets({A: 0, B: 0, C: 5}, {A: 100, B: 10, C: 5}, max_records=50) == {A: 40, B: 10, C: 5}


def test_a_byte_limit_uses_the_per_partition_size_estimate():
    # b's 10 offsets cost 100 bytes; a gets the remaining 900 bytes = 9 offsets of 100 bytes.
    assert cap_end_offsets({A: 0, B: 0}, {A: 100, B: 10}, max_bytes=1000, bytes_per_offset={A: 100, B: 10}) == {A: 9, B: 10}


def test_a_budget_smaller_than_one_record_still_advances_the_busiest_partition():
    assert cap_end_offsets({A: 0, B: 0}, {A: 100, B: 10}, max_bytes=10, bytes_per_offset={A: 100, B: 100}) == {A: 1, B: 0}


@given(st.dictionaries(st.sampled_from([A, B, C]), st.tuples(st.integers(0, 10**6), st.integers(0, 10**6)), min_size=1),
       st.integers(1, 10**6))
def test_limits_never_exceed_the_budget_or_the_backlog(spans, budget):
    start = {tp: lo for tp, (lo, _) in spans.items()}
    latest = {tp: lo + extra for tp, (lo, extra) in spans.items()}
    ends = cap_end_offsets(start, latest, max_records=budget)
    assert all(start[tp] <= ends[tp] <= latest[tp] for tp in spans)
    assert sum(ends[tp] - start[tp] for tp in spans) <= max(budget, 1)
    backlog = sum(latest[tp] - start[tp] for tp in spans)
    assert sum(ends[tp] - start[tp] for tp in spans) >= min(backlog, budget) - len(spans)  # only rounding is lost
