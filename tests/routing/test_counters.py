"""RouteCounters: per-class sums, merging task counters, and the JSON shape the driver logs."""

from __future__ import annotations

import json
import pickle

import kcodecs
from kcodecs import ControlType, Record, control_record
from mirror.routing import RouteClass, RouteCounters, RoutingPolicy, coalesce, route_batch


def routed_examples():
    """One source batch of each class, routed to a 3-partition destination from partition 1."""
    policy = RoutingPolicy(destination_partitions=3)
    unkeyed = [Record(value=b"v%d" % i, timestamp=1000 + i) for i in range(4)]
    keyed = [Record(key=b"key-%d" % i, value=b"v", timestamp=1000) for i in range(9)]
    sources = [
        kcodecs.build_batch(unkeyed, compression="lz4"),  # flagged: passed through
        kcodecs.build_batch(unkeyed, compression="gzip", mark_no_keys=False),  # inspected
        kcodecs.build_batch(keyed, compression="zstd"),  # rebuilt
        kcodecs.build_batch([control_record(ControlType.COMMIT)], control=True, transactional=True, producer_id=1),
    ]
    routed = [route_batch(kcodecs.read_batch(data), 1, policy) for data in sources]
    small = [kcodecs.read_batch(bytearray(kcodecs.build_batch(unkeyed[i:i + 2], compression="lz4"))) for i in (0, 2)]
    routed.insert(2, coalesce(small, 1, policy))  # two small batches merged
    aborted = kcodecs.build_batch(unkeyed[:2], transactional=True, producer_id=1, producer_epoch=0, base_sequence=0)
    return routed + [route_batch(kcodecs.read_batch(aborted), 1, policy, aborted=True)]


def test_counts_each_class():
    routed = routed_examples()
    assert [r.route for r in routed] == list(RouteClass)
    counters = RouteCounters()
    for r in routed:
        counters.add(r)
    counts = counters.as_dict()
    assert list(counts) == ["passed-through", "inspected", "coalesced", "rebuilt", "dropped", "aborted"]
    for r in routed:
        assert counts[r.route.value] == {"batches": 1, "records": r.records, "bytes": r.source_bytes}
    assert counts["rebuilt"]["records"] == 9
    assert counters.total_records == 4 + 4 + 4 + 9 + 1 + 2
    assert counters.total_bytes == sum(r.source_bytes for r in routed)


def test_merge_adds_task_counters():
    routed = routed_examples()
    task_a, task_b, expected = RouteCounters(), RouteCounters(), RouteCounters()
    for i, r in enumerate(routed + routed[:2]):
        (task_a if i % 2 else task_b).add(r)
        expected.add(r)
    task_a.merge(task_b)
    assert task_a == expected
    assert task_a.as_dict()["passed-through"]["batches"] == 2


def test_starts_at_zero_for_every_class():
    counters = RouteCounters()
    assert counters.as_dict() == {c.value: {"batches": 0, "records": 0, "bytes": 0} for c in RouteClass}
    assert counters.total_records == counters.total_bytes == 0


def test_json_and_pickle_round_trips():
    counters = RouteCounters()
    for r in routed_examples():
        counters.add(r)
    assert json.loads(json.dumps(counters.as_dict())) == counters.as_dict()
    assert pickle.loads(pickle.dumps(counters)) == counters  # what Spark's collect() does
