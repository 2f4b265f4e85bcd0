"""Spark ``local[2]`` end to end: ``kmirror demo``'s four topics (pass-through, inspect,
rebuild, LogAppendTime) mirrored between two embedded brokers, then checked with kafka-python
by the demo's verifier: content, murmur2 placement, per-key order, byte-identical passed-through
batches, broker-assigned LogAppendTime. Then more data and a restart with the same checkpoint:
only the new records are copied, none lost, none twice.

One module-scoped mirror (the JVM starts once, ~15 s); each test reads the clusters afresh.
"""

from __future__ import annotations

import pytest

from mirror.demo.cli import Demo
from mirror.demo.fill import DEMO_TOPICS
from mirror.routing import RouteClass

pytestmark = [pytest.mark.slow, pytest.mark.interop]

FIRST, SECOND = 600, 250  # records per topic before and after the restart


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    with Demo(tmp_path_factory.mktemp("demo"), say=lambda line: None) as running:
        running.fill(FIRST)
        yield running, running.mirror()


def test_mirror_of_mixed_data_passes_verification(demo):
    running, first = demo
    verification = running.verify(first)
    assert verification.ok, verification.report()
    classes = first.totals.counters.by_class
    assert classes[RouteClass.PASSED_THROUGH].records == FIRST  # nokeys.kmirror
    assert classes[RouteClass.INSPECTED].records > 0  # unkeyed.librdkafka, appendtime.events
    assert classes[RouteClass.REBUILT].records > 0  # keyed.orders
    assert classes[RouteClass.DROPPED].batches == 0
    assert first.totals.counters.total_records == FIRST * len(DEMO_TOPICS)


def test_restart_with_the_same_checkpoint_copies_only_new_records(demo):
    running, _first = demo
    running.fill(SECOND)
    second = running.mirror()
    verification = running.verify(second)
    assert verification.ok, verification.report()
    assert second.totals.counters.total_records == SECOND * len(DEMO_TOPICS)
