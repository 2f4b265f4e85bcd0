"""The demo's verifier must be able to fail: each kind of wrong destination it checks beyond the
records (``kmirror verify``'s, tests/verify/test_verify_compare.py) is reported, all at once,
and a right one passes. Mostly pure (hand-made records and batches); one test reads
hand-produced clusters through the verifier's reader (records and raw batches)."""

from __future__ import annotations

from dataclasses import replace

import pytest
from kafka.partitioner.default import murmur2

import kcodecs
from kcodecs import Record
from mirror.broker import EmbeddedBroker
from mirror.verify.demo_checks import (
    LOG_APPEND_TIME,
    Rec,
    RouteExpectation,
    TopicData,
    Verification,
    read_batches,
    read_records,
    record_checks,
    verify_routes,
    verify_topic,
)
from mirror.kafka import KafkaClient, NewTopic, TopicPartition
from mirror.routing import ClassCounts, RouteClass, RouteCounters
from mirror.verify.report import Finding, PairReport

TS = 1_700_000_000_000
STARTED = TS + 10_000


def kafka_partition(key: bytes, n: int) -> int:
    return (murmur2(key) & 0x7FFFFFFF) % n


def source_topic() -> TopicData:
    """Two source partitions: keyed records (three per key) and unkeyed ones."""
    records = []
    for p in range(2):
        for i in range(12):
            key = None if i % 4 == 3 else b"k%d" % (i % 3 + 3 * p)
            records.append(Rec(p, i, key, b"p%d-v%d" % (p, i), (("h", b"%d" % i),), TS + i))
    return TopicData(2, tuple(records))


def mirror_of(source: TopicData, n: int) -> TopicData:
    """What a correct mirror to ``n`` partitions holds, offsets assigned per partition."""
    out: dict[int, list[Rec]] = {p: [] for p in range(n)}
    for r in source.records:
        p = kafka_partition(r.key, n) if r.key is not None else r.partition % n
        out[p].append(replace(r, partition=p, offset=len(out[p])))
    return TopicData(n, tuple(r for p in range(n) for r in out[p]))


def failed(checks) -> dict[str, str]:
    return {c.name: " | ".join(c.problems) for c in checks if not c.passed}


def test_a_correct_mirror_passes_and_createtime_topics_need_no_check_beyond_kmirror_verify():
    source = source_topic()
    assert verify_topic("t", source, mirror_of(source, 3), mirror_started_ms=STARTED) == []


def test_kmirror_verify_findings_are_the_records_checks_problems():
    reports = [PairReport("a", "a", 10, 10, (), destination_total=10),
               PairReport("b", "b", 10, 11, (Finding("duplicated", "b", 2, 1, 7), Finding("missing", "b", 0, 3, 4)),
                          destination_total=14)]
    clean, broken = record_checks(reports)
    assert clean.passed and clean.summary.startswith("10 of 10 source records")
    assert broken.problems == (
        "1 duplicated (at the destination more often than at the source), the first at b-2 offset 7",
        "3 missing (at the source, not at the destination), the first at b-0 offset 4",
        "3 of the destination's 14 records not covered by the copy verified")


def test_log_append_time_must_be_stamped_by_the_destination_after_the_mirror_started():
    source = TopicData(2, tuple(replace(r, timestamp_type=LOG_APPEND_TIME) for r in source_topic().records))
    stamped = [replace(r, timestamp=STARTED + 5, timestamp_type=LOG_APPEND_TIME) for r in mirror_of(source, 3).records]
    assert failed(verify_topic("t", source, TopicData(3, tuple(stamped)), mirror_started_ms=STARTED)) == {}
    stamped[0] = replace(stamped[0], timestamp=STARTED - 1)  # the source broker's time, copied
    stamped[1] = replace(stamped[1], timestamp_type=0)  # destination topic is CreateTime
    problems = failed(verify_topic("t", source, TopicData(3, tuple(stamped)), mirror_started_ms=STARTED))
    assert list(problems) == ["timestamps"]
    assert "2 records not stamped" in problems["timestamps"] and "expected LogAppendTime" in problems["timestamps"]


# ---- passed-through batches ----------------------------------------------------------------


def source_batches() -> dict[int, list[bytes]]:
    """Two partitions of no-keys batches, the way the source log holds them (offsets, epoch)."""
    out = {}
    for p in range(2):
        out[p] = []
        for b in range(3):
            data = bytearray(kcodecs.build_batch(
                [Record(value=b"p%d b%d r%d" % (p, b, i), timestamp=TS + i) for i in range(5)], compression="zstd"))
            kcodecs.set_base_offset(data, b * 5)
            kcodecs.set_partition_leader_epoch(data, 7)
            out[p].append(bytes(data))
    return out


def as_destination(batches: list[bytes]) -> list[bytes]:
    """The rewrites a pass-through and the destination broker may make: new offsets and epoch."""
    out = []
    for i, batch in enumerate(batches):
        data = bytearray(batch)
        kcodecs.set_base_offset(data, 100 + i * 5)
        kcodecs.set_partition_leader_epoch(data, 0)
        out.append(bytes(data))
    return out


def batch_check(source, destination, partitions=2):
    topic = mirror_of(source_topic(), partitions)  # record checks are not under test here
    checks = verify_topic("t", topic, topic, mirror_started_ms=STARTED, source_batches=source, destination_batches=destination)
    return next(c for c in checks if c.name == "batches")


def test_passed_through_batches_may_have_new_offsets_epochs_and_crcs():
    source = source_batches()
    check = batch_check(source, {p: as_destination(b) for p, b in source.items()})
    assert check.passed, check.problems


def test_a_changed_payload_byte_in_a_passed_through_batch_is_reported():
    source = source_batches()
    destination = {p: as_destination(b) for p, b in source.items()}
    changed = bytearray(destination[1][2])
    changed[-3] ^= 0x01  # inside the compressed records section
    destination[1][2] = bytes(changed)
    check = batch_check(source, destination)
    assert not check.passed
    text = " | ".join(check.problems)
    assert "1 destination batches match no source batch" in text and "destination partition 1 batch #2 at offset 110" in text
    assert "1 source batches have no byte-identical copy" in text and "source partition 1 batch #2 at offset 10" in text


def test_a_changed_header_field_of_a_passed_through_batch_is_reported():
    source = source_batches()
    destination = {p: as_destination(b) for p, b in source.items()}
    changed = bytearray(destination[0][0])
    changed[42] ^= 0x01  # max timestamp, which a pass-through to a CreateTime topic keeps
    destination[0][0] = bytes(changed)
    assert not batch_check(source, destination).passed


def test_passed_through_batches_out_of_order_are_reported():
    source = source_batches()
    destination = {p: as_destination(b) for p, b in source.items()}
    destination[0][0], destination[0][1] = destination[0][1], destination[0][0]
    check = batch_check(source, destination)
    assert check.problems == ("destination partition 0: the batches of source partition 0 are out of order",)


def test_batches_of_two_source_partitions_may_interleave_on_one_destination_partition():
    source = source_batches()
    merged = [source[0][0], source[1][0], source[1][1], source[0][1], source[0][2], source[1][2]]
    assert batch_check(source, {0: as_destination(merged)}, partitions=1).passed


# ---- routes and the whole report -------------------------------------------------------------


def counters(**records: int) -> RouteCounters:
    out = RouteCounters()
    for name, n in records.items():
        out.by_class[RouteClass(name.replace("_", "-"))] = ClassCounts(batches=1, records=n, bytes=10 * n)
    return out


REBUILD = RouteExpectation(frozenset({RouteClass.INSPECTED, RouteClass.REBUILT}), frozenset({RouteClass.REBUILT}))


def test_routes_must_be_the_expected_classes_and_cover_every_source_record():
    assert verify_routes("t", counters(inspected=2, rebuilt=8), REBUILD, 10).passed
    check = verify_routes("t", counters(passed_through=3, inspected=5), REBUILD, 10)
    assert check.problems == ("passed-through: 3 records, expected none", "rebuilt: no batches, expected some",
                              "the run routed 8 records, the source has 10")


def test_every_failure_is_listed_not_just_the_first():
    source = TopicData(2, tuple(replace(r, timestamp_type=LOG_APPEND_TIME) for r in source_topic().records))
    stamped = [replace(r, timestamp=STARTED - 1, timestamp_type=LOG_APPEND_TIME) for r in mirror_of(source, 3).records]
    checks = record_checks([PairReport("t", "t", 24, 23, (Finding("missing", "t", 0, 1, 0),))])
    checks += verify_topic("t", source, TopicData(3, tuple(stamped)), mirror_started_ms=STARTED)
    checks.append(verify_routes("t", counters(inspected=24), REBUILD, 24))
    checks.append(verify_routes("t", counters(inspected=2, rebuilt=22), REBUILD, 24))
    verification = Verification(tuple(checks))
    assert not verification.ok
    assert [c.name for c in verification.failures] == ["records", "timestamps", "routes"]
    report = verification.report()
    assert report.startswith("verification: 1 of 4 checks passed")
    assert report.count("FAIL") == 3 and "1 missing" in report and "24 records not stamped" in report


def test_no_checks_is_not_a_pass():
    assert not Verification(()).ok


# ---- reading real clusters -------------------------------------------------------------------


@pytest.mark.interop
def test_reads_clusters_with_the_verifiers_reader_and_catches_a_wrong_destination(tmp_path):
    """Hand-produce a source and a wrong "mirror" (one record dropped, one keyed record on the
    wrong partition, one passed-through batch with a changed value): the readers see what was
    written, and the batch check the changed batch (the records are kmirror verify's to check:
    tests/verify/test_verify_compare.py)."""
    with EmbeddedBroker(tmp_path / "src") as src, EmbeddedBroker(tmp_path / "dst") as dst, \
            KafkaClient(src.bootstrap) as source, KafkaClient(dst.bootstrap) as destination:
        source.create_topics([NewTopic("keyed", 2), NewTopic("plain", 1)])
        destination.create_topics([NewTopic("keyed", 3), NewTopic("plain", 1)])
        keyed = [Record(key=b"key-%d" % (i % 5), value=b"v%d" % i, timestamp=TS + i) for i in range(20)]
        source.produce([(TopicPartition("keyed", i % 2), kcodecs.build_batch(keyed[i::2], compression="lz4")) for i in range(2)])
        plain = [kcodecs.build_batch([Record(value=b"b%d r%d" % (b, i), timestamp=TS) for i in range(4)]) for b in range(3)]
        source.produce([(TopicPartition("plain", 0), batch) for batch in plain])

        placed: dict[int, list[Record]] = {p: [] for p in range(3)}
        for record in keyed[1:]:  # record 0 dropped
            placed[kafka_partition(record.key, 3)].append(record)
        wrong = placed[kafka_partition(b"key-3", 3)].pop()  # the last key-3 record, moved one partition on
        placed[(kafka_partition(b"key-3", 3) + 1) % 3].append(wrong)
        destination.produce([(TopicPartition("keyed", p), kcodecs.build_batch(rs)) for p, rs in placed.items() if rs])
        changed = kcodecs.build_batch([Record(value=b"b1 r%d" % i if i != 2 else b"b1 rX", timestamp=TS) for i in range(4)])
        destination.produce([(TopicPartition("plain", 0), batch) for batch in (plain[0], changed, plain[2])])

        src_records = read_records(src.bootstrap, ["keyed", "plain"])
        dst_records = read_records(dst.bootstrap, ["keyed", "plain"])
        assert (src_records["keyed"].partitions, dst_records["keyed"].partitions) == (2, 3)
        assert len(src_records["keyed"].records) == 20 and len(dst_records["keyed"].records) == 19
        assert [r.value for r in dst_records["plain"].records].count(b"b1 rX") == 1
        plain_failed = failed(verify_topic("plain", src_records["plain"], dst_records["plain"], mirror_started_ms=STARTED,
                                           source_batches=read_batches(src.bootstrap, "plain", 1),
                                           destination_batches=read_batches(dst.bootstrap, "plain", 1)))
    assert set(plain_failed) == {"batches"}
    assert "destination partition 0 batch #1 at offset 4" in plain_failed["batches"]


def test_a_group_that_resumes_exactly_passes_and_a_duplicate_or_gap_is_reported():
    from mirror.verify.demo_checks import Rec, verify_group_resume

    source = TopicData(2, tuple(Rec(p, o, None, b"%d-%d" % (p, o)) for p in range(2) for o in range(5)))
    consumed = {0: 2, 1: 0}
    exact = {0: [b"0-2", b"0-3", b"0-4"], 1: [b"1-%d" % o for o in range(5)]}
    assert verify_group_resume("t", "g", source, consumed, exact).passed
    again = verify_group_resume("t", "g", source, consumed, {**exact, 0: [b"0-1", *exact[0]]})
    assert again.problems == ("partition 0: read 4 records, expected 3: 1 already consumed at the source or extra, "
                              "0 missing",)
    gap = verify_group_resume("t", "g", source, consumed, {**exact, 1: exact[1][1:]})
    assert "1 missing" in gap.problems[0]
