"""Grouping a micro-batch's ranges into Spark tasks: by source leader, about one per slot, balanced."""

from __future__ import annotations

import pytest

from mirror.spark.grouping import group_ranges

# (name, leader, offsets to copy)
RANGES = [("a0", "A", 100), ("a1", "A", 100), ("a2", "A", 100), ("a3", "A", 100),
          ("b0", "B", 400), ("b1", "B", 10), ("b2", "B", 10), ("b3", "B", 10)]


def _group(ranges, tasks):
    return [[name for name, _, _ in group] for group in group_ranges(ranges, lambda r: r[1], lambda r: r[2], tasks)]


def test_a_task_never_mixes_leaders_and_every_range_is_in_exactly_one_task():
    groups = _group(RANGES, 4)
    assert sorted(name for group in groups for name in group) == sorted(name for name, _, _ in RANGES)
    for group in groups:
        assert len({name[0] for name in group}) == 1


def test_each_leader_gets_a_share_of_the_slots_in_proportion_to_its_partitions():
    groups = _group(RANGES, 4)
    assert sorted(len(group) for group in groups if group[0][0] == "a") == [2, 2]
    assert len([group for group in groups if group[0][0] == "b"]) == 2


def test_large_ranges_are_spread_so_tasks_finish_together():
    groups = _group(RANGES, 4)
    (big,) = [group for group in groups if "b0" in group]
    assert big == ["b0"]  # the 400-offset range alone; the three small ones share the other task


def test_more_leaders_than_slots_means_one_task_per_leader():
    ranges = [(f"p{i}", f"L{i}", 5) for i in range(6)]
    assert len(_group(ranges, 2)) == 6


def test_one_slot_copies_each_leader_in_one_task():
    assert sorted(map(sorted, _group(RANGES, 1))) == [["a0", "a1", "a2", "a3"], ["b0", "b1", "b2", "b3"]]


def test_tasks_must_be_positive():
    with pytest.raises(ValueError):
        group_ranges(RANGES, lambda r: r[1], lambda r: r[2], 0)
