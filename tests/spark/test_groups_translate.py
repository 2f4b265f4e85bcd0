"""Failing a consumer group over with ``kmirror groups translate`` (issue 37): the Spark mirror
copies once, without translating any group itself, then the command, run as a user runs it,
prints where each group resumes at the destination and with --apply commits it there.

Every verdict comes from librdkafka (confluent-kafka): the records the groups consumed at the
source, the destination offsets of the records, the offsets committed at the destination, and
what the group reads there after the failover, which must be exactly the records it had not
consumed at the source: no duplicate, no gap. On the embedded broker and on real Kafka 4.x."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from confluent_kafka import OFFSET_INVALID
from confluent_kafka import TopicPartition as CTP
from librdkafka_reader import read_to_end, read_values
from source_groups import active_member, consume_and_commit, fill, group_consumer

from mirror.broker import EmbeddedBroker
from mirror.config import load_config

pytestmark = pytest.mark.slow

REPO = Path(__file__).parent.parent.parent
PARTITIONS = 2
PER_PARTITION = 100
JOB = "failover"


@dataclass(frozen=True)
class Mirrored:
    source: str
    destination: str
    produced: dict[int, list[bytes]]
    consumed: dict[str, dict[int, list[bytes]]]
    """Group -> what it consumed of each partition at the source before committing."""


@pytest.fixture(scope="module", params=[pytest.param("embedded"), pytest.param("kafka", marks=pytest.mark.kafka)])
def mirrored(request, tmp_path_factory, start_kafka):
    """orders written at the source, three groups part-way through it (each through both
    partitions: more records than one holds), and one `--once` copy with no --groups, in
    several transactions, to a topic that already held records: the offset syncs are there,
    destination offsets are not source offsets, and no group has an offset at the destination."""
    from mirror.spark.job import run_mirror

    root = tmp_path_factory.mktemp("failover")
    if request.param == "embedded":
        clusters = [EmbeddedBroker(root / "src").start(), EmbeddedBroker(root / "dst").start()]
    else:
        clusters = [start_kafka(), start_kafka()]
    src, dst = clusters
    try:
        produced = fill(src.bootstrap, "orders", PARTITIONS, PER_PARTITION)
        consumed = {group: consume_and_commit(src.bootstrap, group, "orders", PARTITIONS, count)
                    for group, count in (("audit", 150), ("billing", 137), ("busy", 110))}
        fill(dst.bootstrap, "orders", PARTITIONS, 7, label="before-the-mirror")
        run_mirror(load_config(None, {"source.bootstrap": src.bootstrap, "destination.bootstrap": dst.bootstrap,
                                      "topics": "orders", "once": True, "checkpoint": str(root / "ck"),
                                      "name": JOB, "max_records_per_trigger": 70}))
        yield Mirrored(src.bootstrap, dst.bootstrap, produced, consumed)
    finally:
        for cluster in clusters:
            cluster.stop()


def _translate(mirrored: Mirrored, groups: str, *more: str) -> subprocess.CompletedProcess:
    done = subprocess.run([sys.executable, "-m", "mirror.cli", "groups", "translate", "--source", mirrored.source,
                           "--destination", mirrored.destination, "--topics", "orders", "--name", JOB, "--groups",
                           groups, *more], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return done


def _table(stdout: str) -> list[dict[str, str]]:
    """The printed table's rows as column -> cell (no cell holds a space)."""
    lines = [line for line in stdout.splitlines() if line and not line.startswith("group ")]
    header = lines[0].split()
    return [dict(zip(header, line.split())) for line in lines[1:]]


def _resume_at(mirrored: Mirrored, group: str) -> dict[int, int]:
    """Per partition, where the group should resume at the destination, found by librdkafka in
    the destination's records: the offset of the first record it had not consumed at the source
    (after the last record if it had consumed them all)."""
    at = read_values(mirrored.destination, "orders", PARTITIONS, take=lambda m: (m.offset(), m.value()))
    expected = {}
    for p in range(PARTITIONS):
        offsets = {value: offset for offset, value in at[p]}
        consumed = len(mirrored.consumed[group][p])
        expected[p] = (offsets[mirrored.produced[p][consumed]] if consumed < PER_PARTITION
                       else offsets[mirrored.produced[p][-1]] + 1)
    return expected


def _committed(bootstrap: str, group: str) -> dict[int, int]:
    """The group's committed offsets, asked by a consumer that does not join the group."""
    consumer = group_consumer(bootstrap, group)
    try:
        found = consumer.committed([CTP("orders", p) for p in range(PARTITIONS)], timeout=30)
    finally:
        consumer.close()
    return {tp.partition: tp.offset for tp in found}


def test_translate_prints_where_each_group_resumes_and_changes_nothing(mirrored):
    rows = _table(_translate(mirrored, "audit").stdout)
    resume = _resume_at(mirrored, "audit")
    assert [(r["GROUP"], r["TOPIC"], int(r["PARTITION"])) for r in rows] == [("audit", "orders", p)
                                                                           for p in range(PARTITIONS)]
    for row in rows:
        p = int(row["PARTITION"])
        assert int(row["SOURCE-OFFSET"]) == len(mirrored.consumed["audit"][p])
        assert (row["DESTINATION-TOPIC"], int(row["DESTINATION-PARTITION"])) == ("orders", p)
        assert int(row["DESTINATION-OFFSET"]) == resume[p]
        assert (row["PRECISION"], row["COPIED"]) == ("exact", "yes")
    assert all(resume[p] != len(mirrored.consumed["audit"][p]) for p in range(PARTITIONS))  # no identity
    assert _committed(mirrored.destination, "audit") == {p: OFFSET_INVALID for p in range(PARTITIONS)}


def test_apply_moves_an_idle_group_exactly_and_leaves_an_active_one_alone(mirrored):
    with active_member(mirrored.destination, "busy", "orders"):
        before = _committed(mirrored.destination, "busy")
        applied = _translate(mirrored, "billing|busy", "--apply").stdout
        after = _committed(mirrored.destination, "busy")
    resume = _resume_at(mirrored, "billing")
    assert "group busy: left alone: it is active at the destination" in applied
    assert after == before
    assert (f"group billing: committed at the destination orders/0={resume[0]}, orders/1={resume[1]}"
            in applied.splitlines())
    assert _committed(mirrored.destination, "billing") == resume

    # The group moved over reads exactly what it had not consumed at the source.
    billing = group_consumer(mirrored.destination, "billing")
    billing.subscribe(["orders"])
    try:
        resumed = read_to_end(billing, "orders", PARTITIONS)
    finally:
        billing.close()
    for p in range(PARTITIONS):
        assert resumed[p] == mirrored.produced[p][len(mirrored.consumed["billing"][p]):]

    # Applied again, nothing moves (never backwards, nothing to move forwards).
    again = _translate(mirrored, "billing", "--apply").stdout
    assert (f"group billing: nothing committed: {PARTITIONS} partitions already at or past the translated "
            f"offset, unchanged") in again.splitlines()
