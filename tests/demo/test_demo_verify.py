"""The demo's verifier must be able to fail: each kind of wrong destination is reported, all
at once, and a right one passes. Mostly pure (hand-made records and batches); one test reads
hand-produced clusters through the verifier's kafka-python and raw-batch readers."""

from __future__ import annotations

from dataclasses import replace

import pytest
from kafka.partitioner.default import murmur2

import kcodecs
from kcodecs import Record
from mirror.broker import EmbeddedBroker
from mirror.demo.verify import (
    LOG_APPEND_TIME,
    Rec,
    RouteExpectation,
    TopicData,
    Verification,
    read_batches,
    read_records,
    verify_routes,
    verify_topic,
)
from mirror.kafka import KafkaClient, NewTopic, TopicPartition
from mirror.routing import ClassCounts, RouteClass, RouteCounters

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


def renumber(records: list[Rec]) -> TopicData:
    partitions = max(r.partition for r in records) + 1
    offsets = {p: 0 for p in range(partitions)}
    out = []
    for r in sorted(records, key=lambda r: r.partition):
        out.append(replace(r, offset=offsets[r.partition]))
        offsets[r.partition] += 1
    return TopicData(3, tuple(out))


def failed(checks) -> dict[str, str]:
    return {c.name: " | ".join(c.problems) for c in checks if not c.passed}


def test_a_correct_mirror_passes_every_check():
    source = source_topic()
    checks = verify_topic("t", source, mirror_of(source, 3), mirror_started_ms=STARTED)
    assert failed(checks) == {}
    assert [c.name for c in checks] == ["records", "placement", "order", "timestamps"]


def test_a_missing_record_is_reported():
    good = list(mirror_of(source_topic(), 3).records)
    lost = good.pop(5)
    problems = failed(verify_topic("t", source_topic(), renumber(good), mirror_started_ms=STARTED))
    assert list(problems) == ["records"]
    assert "1 source records missing" in problems["records"] and repr(lost.value) in problems["records"]


def test_a_duplicated_record_is_reported():
    good = list(mirror_of(source_topic(), 3).records)
    again = good[4]
    problems = failed(verify_topic("t", source_topic(), renumber(good + [again]), mirror_started_ms=STARTED))
    assert list(problems) == ["records"]
    assert "1 extra copies" in problems["records"] and "2 copies" in problems["records"]


def test_a_record_not_in_the_source_is_reported():
    good = list(mirror_of(source_topic(), 3).records)
    made_up = replace(good[0], value=b"never produced")
    problems = failed(verify_topic("t", source_topic(), renumber(good + [made_up]), mirror_started_ms=STARTED))
    assert "1 records not in the source" in problems["records"]


def test_a_reordered_key_is_reported():
    good = list(mirror_of(source_topic(), 3).records)
    key = b"k1"
    first, second = [i for i, r in enumerate(good) if r.key == key][:2]
    good[first], good[second] = replace(good[second], offset=good[first].offset), replace(good[first], offset=good[second].offset)
    problems = failed(verify_topic("t", source_topic(), TopicData(3, tuple(good)), mirror_started_ms=STARTED))
    assert list(problems) == ["order"]
    assert "key b'k1' from source partition 0" in problems["order"]


def test_reordered_unkeyed_records_of_one_source_partition_are_reported():
    good = list(mirror_of(source_topic(), 3).records)
    first, second = [i for i, r in enumerate(good) if r.key is None and r.value.startswith(b"p1-")][:2]
    good[first], good[second] = replace(good[second], offset=good[first].offset), replace(good[first], offset=good[second].offset)
    problems = failed(verify_topic("t", source_topic(), TopicData(3, tuple(good)), mirror_started_ms=STARTED))
    assert list(problems) == ["order"]
    assert "unkeyed records of source partition 1" in problems["order"]


def test_a_keyed_record_on_the_wrong_partition_is_reported():
    good = list(mirror_of(source_topic(), 3).records)
    victim = next(r for r in good if r.key is not None)
    right = kafka_partition(victim.key, 3)
    moved = [replace(r, partition=(right + 1) % 3) if r is victim else r for r in good]
    problems = failed(verify_topic("t", source_topic(), renumber(moved), mirror_started_ms=STARTED))
    assert list(problems) == ["placement"]
    assert f"belongs on partition {right}" in problems["placement"]


def test_an_unkeyed_record_on_the_wrong_partition_is_reported():
    good = list(mirror_of(source_topic(), 3).records)
    victim = next(r for r in good if r.key is None and r.value.startswith(b"p1-"))
    moved = [replace(r, partition=0) if r is victim else r for r in good]
    problems = failed(verify_topic("t", source_topic(), renumber(moved), mirror_started_ms=STARTED))
    assert "belongs on partition 1" in problems["placement"]


def test_a_changed_create_time_is_reported():
    good = list(mirror_of(source_topic(), 3).records)
    good[2] = replace(good[2], timestamp=good[2].timestamp + 1)
    problems = failed(verify_topic("t", source_topic(), TopicData(3, tuple(good)), mirror_started_ms=STARTED))
    assert list(problems) == ["timestamps"]


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
    good = list(mirror_of(source_topic(), 3).records)
    good.pop(0)  # missing
    good[3] = replace(good[3], timestamp=1)  # changed timestamp
    checks = verify_topic("t", source_topic(), renumber(good + [good[6]]), mirror_started_ms=STARTED)
    checks.append(verify_routes("t", counters(inspected=24), REBUILD, 24))
    verification = Verification(tuple(checks))
    assert not verification.ok
    assert {c.name for c in verification.failures} == {"records", "timestamps", "routes"}
    report = verification.report()
    assert report.startswith("verification: 2 of 5 checks passed")
    assert report.count("FAIL") == 3 and "source records missing" in report and "extra copies" in report


def test_no_checks_is_not_a_pass():
    assert not Verification(()).ok


# ---- reading real clusters -------------------------------------------------------------------


@pytest.mark.interop
def test_reads_clusters_with_kafka_python_and_catches_a_wrong_destination(tmp_path):
    """Hand-produce a source and a wrong "mirror" (one record dropped, one keyed record on the
    wrong partition, one passed-through batch with a changed value); the readers and checks
    must see all three."""
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
        keyed_failed = failed(verify_topic("keyed", src_records["keyed"], dst_records["keyed"], mirror_started_ms=STARTED))
        plain_failed = failed(verify_topic("plain", src_records["plain"], dst_records["plain"], mirror_started_ms=STARTED,
                                           source_batches=read_batches(src.bootstrap, "plain", 1),
                                           destination_batches=read_batches(dst.bootstrap, "plain", 1)))
    assert set(keyed_failed) == {"records", "placement"}
    assert "b'v0'" in keyed_failed["records"] and "key=b'key-3'" in keyed_failed["placement"]
    assert set(plain_failed) == {"records", "batches"}
    assert "b'b1 rX'" in plain_failed["records"] and "destination partition 0 batch #1 at offset 4" in plain_failed["batches"]


def test_a_group_that_resumes_exactly_passes_and_a_duplicate_or_gap_is_reported():
    from mirror.demo.verify import Rec, verify_group_resume

    source = TopicData(2, tuple(Rec(p, o, None, b"%d-%d" % (p, o)) for p in range(2) for o in range(5)))
    consumed = {0: 2, 1: 0}
    exact = {0: [b"0-2", b"0-3", b"0-4"], 1: [b"1-%d" % o for o in range(5)]}
    assert verify_group_resume("t", "g", source, consumed, exact).passed
    again = verify_group_resume("t", "g", source, consumed, {**exact, 0: [b"0-1", *exact[0]]})
    assert again.problems == ("partition 0: read 4 records, expected 3: 1 already consumed at the source or extra, "
                              "0 missing",)
    gap = verify_group_resume("t", "g", source, consumed, {**exact, 1: exact[1][1:]})
    assert "1 missing" in gap.problems[0]
