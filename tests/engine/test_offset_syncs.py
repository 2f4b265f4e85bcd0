"""Offset syncs and group offset translation, pure: checked against a simulated destination log
built record by record, not against the entries' own arithmetic."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import kcodecs
from kcodecs import Record
from mirror.engine.offset_syncs import (
    OffsetSyncError,
    OffsetSyncStore,
    Precision,
    SyncEntry,
    SyncLog,
    decode_syncs,
    encode_syncs,
)
from mirror.kafka import TopicPartition

S0, S1 = TopicPartition("src", 0), TopicPartition("src", 1)
D0, D1 = TopicPartition("dst", 0), TopicPartition("dst", 1)


def test_consecutive_forwarded_batches_merge_into_one_exact_entry():
    log = SyncLog()
    log.add(S0, 0, 9, D0, 100, 110, True)
    log.add(S0, 10, 19, D0, 110, 120, True)
    log.add(S0, 22, 29, D0, 121, 129, True)  # a source marker and a destination marker between
    assert log.entries[(S0, D0)] == [SyncEntry(S0, 0, 19, D0, 100, 120, True), SyncEntry(S0, 22, 29, D0, 121, 129, True)]


def test_bounds_merge_only_when_the_next_lands_after_the_last():
    """Bounds of one pair merge into the earlier base and the later end; a report read back
    (a copier's, from its socket) that says a later span landed before an earlier one keeps
    them apart, rather than merge them into an end before its base (found by
    test_copier_messages' property test)."""
    log = SyncLog()
    log.add(S0, 0, 9, D0, 100, 104, False)
    log.add(S0, 10, 19, D0, 104, 106, False)
    assert log.entries[(S0, D0)] == [SyncEntry(S0, 0, 19, D0, 100, 106, False)]
    log = SyncLog.of([SyncEntry(S0, 0, 0, D0, 5, 6, False), SyncEntry(S0, 1, 1, D0, 0, 1, False)])
    assert log.entries[(S0, D0)] == [SyncEntry(S0, 0, 0, D0, 5, 6, False), SyncEntry(S0, 1, 1, D0, 0, 1, False)]


def test_an_exact_sync_must_map_as_many_offsets_on_both_sides():
    with pytest.raises(OffsetSyncError):
        SyncEntry(S0, 0, 9, D0, 0, 5, True)
    log = SyncLog()
    log.add(S0, 0, 9, D0, 0, 10, True)
    with pytest.raises(OffsetSyncError):  # checked as it comes, though it would continue the open entry
        log.add(S0, 10, 19, D0, 10, 15, True)
    assert log.entries == {(S0, D0): [SyncEntry(S0, 0, 9, D0, 0, 10, True)]}


def test_records_round_trip_through_kafka_pythons_reader():
    from kafka.record import MemoryRecords

    log = SyncLog()
    log.add(S0, 0, 9, D0, 100, 110, True)
    log.add(S1, 5, 7, D1, 3, 9, False)
    data = encode_syncs(log, now_ms=1)
    records = [Record(key=r.key, value=r.value, offset=r.offset) for batch in MemoryRecords(bytes(data)) for r in batch]
    assert [entry for record in records for entry in decode_syncs(record)] == [
        SyncEntry(S0, 0, 9, D0, 100, 110, True), SyncEntry(S1, 5, 7, D1, 3, 9, False)]
    assert encode_syncs(SyncLog(), 1) is None


def test_a_topic_made_again_is_translated_with_its_own_syncs_never_the_old_topics():
    """Issue 70: the old topic's records 0-1999 are at destination 0-1999, the new topic's
    0-2999 (offsets that start again) after them. A group at offset 500 of the new topic
    resumes at 2500, not at the old topic's 500; the ids ride in the records, read back by
    kafka-python's record reader."""
    from kafka.record import MemoryRecords

    old, new = SyncLog(), SyncLog()
    old.add(S0, 0, 1999, D0, 0, 2000, True)
    new.add(S0, 0, 2999, D0, 2000, 5000, True)
    records = [Record(key=r.key, value=r.value, offset=r.offset)
               for data in (encode_syncs(old, 1, {"src": "old-id"}), encode_syncs(new, 2, {"src": "new-id"}))
               for batch in MemoryRecords(bytes(data)) for r in batch]
    store = OffsetSyncStore(None, "unused")
    store.add(entry for record in records for entry in decode_syncs(record))
    assert store.translate({S0: 500}, {S0: 3000}, {"src": "new-id"})[D0].offset == 2500
    assert store.translate({S0: 500}, {S0: 3000}, {"src": "old-id"})[D0].offset == 500
    legacy = OffsetSyncStore(None, "unused")  # syncs from before ids were kept: taken for any topic
    legacy.add(decode_syncs(Record(key=b'{"topic": "src", "partition": 0, "first": 0}',
                                   value=b'{"syncs": [[0, 9, "dst", 0, 100, 110, true]]}')))
    assert legacy.translate({S0: 5}, {S0: 10}, {"src": "new-id"})[D0].offset == 105


def test_a_destination_topic_made_again_is_placed_with_its_own_syncs_never_the_lost_ones():
    """Issue 70: the lost destination topic held source 0-1999 at 0-1999; the topic made again
    holds the source copied again from its log start, 0-2999 at 0-2999 (its own offsets). A
    group at source offset 500 resumes at 500 of the new topic, whatever the lost one's syncs
    said; the ids ride in the records, read back by kafka-python's record reader."""
    from kafka.record import MemoryRecords

    lost, again = SyncLog(), SyncLog()
    lost.add(S0, 0, 1999, D0, 100, 2100, True)  # the lost topic: records at 100.. (a found topic's history)
    again.add(S0, 0, 2999, D0, 0, 3000, True)
    records = [Record(key=r.key, value=r.value, offset=r.offset)
               for data in (encode_syncs(lost, 1, {"src": "s-id"}, {"src": "lost-id"}),
                            encode_syncs(again, 2, {"src": "s-id"}, {"src": "new-id"}))
               for batch in MemoryRecords(bytes(data)) for r in batch]
    (first,) = decode_syncs(records[0])
    assert (first.topic_id, first.destination_id) == ("s-id", "lost-id")
    store = OffsetSyncStore(None, "unused")
    store.add(entry for record in records for entry in decode_syncs(record))
    assert store.translate({S0: 500}, {S0: 3000}, {"src": "s-id"}, {"dst": "new-id"})[D0].offset == 500
    assert store.translate({S0: 500}, {S0: 3000}, {"src": "s-id"}, {"dst": "lost-id"})[D0].offset == 600


def test_a_malformed_sync_record_is_a_named_error():
    with pytest.raises(OffsetSyncError, match="not kmirror's"):
        decode_syncs(Record(key=b'{"topic": "t", "partition": 0}', value=b'{"syncs": [[1, 2]]}', offset=8))
    with pytest.raises(OffsetSyncError, match="impossible"):
        decode_syncs(Record(key=b'{"topic": "t", "partition": 0}', value=b'{"syncs": [[5, 2, "d", 0, 0, 4, false]]}'))


def test_preserve_translation_is_exact_inside_at_the_edges_and_past_the_copy():
    store = OffsetSyncStore(None, "unused")
    store.add([SyncEntry(S0, 0, 19, D0, 100, 120, True), SyncEntry(S0, 22, 29, D0, 121, 129, True)])
    at = lambda offset, copied=30: store.translate({S0: offset}, {S0: copied})[D0]  # noqa: E731
    assert (at(0).offset, at(0).precision) == (100, Precision.EXACT)
    assert at(7).offset == 107
    assert at(20).offset == 121 and at(20).precision is Precision.EXACT  # 20, 21: source markers, not copied
    assert at(29).offset == 128
    assert at(30).offset == 129  # everything consumed: the next record copied lands there
    clamped = at(45)
    assert (clamped.offset, clamped.clamped) == (129, True)


def test_entries_read_out_of_source_order_are_placed_and_replays_are_dropped():
    """A failback's seeded syncs cover a reconciled tail that lies between the failback's own
    copies: read first, they must not hide the entries read after them."""
    store = OffsetSyncStore(None, "unused")
    store.add([SyncEntry(S0, 10, 19, D0, 500, 510, True),  # seeded: read first
               SyncEntry(S0, 0, 9, D0, 200, 210, True),  # the copy's own, before it
               SyncEntry(S0, 20, 29, D0, 600, 610, True),
               SyncEntry(S0, 5, 14, D0, 900, 910, True)])  # overlaps both kept ones: a replay, dropped
    at = lambda offset: store.translate({S0: offset}, {S0: 30})[D0]  # noqa: E731
    assert [(at(o).offset, at(o).precision) for o in (0, 9, 10, 19, 20, 30)] == [
        (200, Precision.EXACT), (209, Precision.EXACT), (500, Precision.EXACT), (509, Precision.EXACT),
        (600, Precision.EXACT), (610, Precision.EXACT)]


# ---- against a simulated destination ----------------------------------------------------------


@st.composite
def copies(draw):
    """Two source partitions of batches, each forwarded (to its own number) or rebuilt (its
    records spread over both destination partitions); destination logs built record by
    record, with a marker between transactions; the entries the copy would record."""
    logs = {D0: [], D1: []}  # destination offset -> (source partition, source offset) or None (marker)
    log = SyncLog()
    next_offset = {S0: 0, S1: 0}
    for _ in range(draw(st.integers(1, 12))):  # transactions
        for _ in range(draw(st.integers(1, 4))):
            source = draw(st.sampled_from([S0, S1]))
            count = draw(st.integers(1, 5))
            first = next_offset[source] + draw(st.integers(0, 2))  # source markers or holes before it
            offsets = list(range(first, first + count))
            next_offset[source] = offsets[-1] + 1
            if draw(st.booleans()):  # forwarded: one for one, to the same partition number
                destination = D0 if source == S0 else D1
                base = len(logs[destination])
                logs[destination] += [(source, o) for o in offsets]
                log.add(source, first, offsets[-1], destination, base, base + count, True)
            else:  # rebuilt by key
                targets = [draw(st.sampled_from([D0, D1])) for _ in offsets]
                for destination in (D0, D1):
                    mine = [o for o, d in zip(offsets, targets) if d == destination]
                    if mine:
                        base = len(logs[destination])
                        logs[destination] += [(source, o) for o in mine]
                        log.add(source, first, offsets[-1], destination, base, len(logs[destination]), False)
        for destination in (D0, D1):
            logs[destination].append(None)  # the commit marker
    return logs, log, next_offset


@settings(max_examples=300, deadline=None)
@given(copies(), st.integers(0, 40), st.integers(0, 40))
def test_translation_never_skips_a_record_and_is_exact_when_it_says_so(copy, offset0, offset1):
    logs, log, copied_to = copy
    store = OffsetSyncStore(None, "unused")
    store.add(entry for entries in log.by_source().values() for entry in entries)
    group = {S0: offset0, S1: offset1}
    translated = store.translate(group, copied_to)
    for destination, records in logs.items():
        unread = [at for at, record in enumerate(records)
                  if record is not None and record[1] >= min(group[record[0]], copied_to[record[0]])]
        fed = {record[0] for record in records if record is not None}
        if not fed:
            assert destination not in translated
            continue
        result = translated[destination]
        if unread:
            assert result.offset <= unread[0], "a record the group had not consumed would be skipped"
        if result.precision is Precision.EXACT:
            # Nothing the group consumed is read again: the first unread record, or (all of the
            # partition consumed) the first offset after its last record.
            last_record = max(at for at, record in enumerate(records) if record is not None)
            assert result.offset == (unread[0] if unread else last_record + 1)


# ---- recorded by the copy engine --------------------------------------------------------------


def _values_by_offset(bootstrap: str, topic: str, partition: int) -> dict[int, bytes]:
    from kafka import KafkaConsumer
    from kafka import TopicPartition as KTP

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, consumer_timeout_ms=1500,
                             auto_offset_reset="earliest")
    consumer.assign([KTP(topic, partition)])
    values = {record.offset: record.value for record in consumer}
    consumer.close()
    return values


def test_the_copy_records_where_every_forwarded_record_landed(tmp_path):
    from mirror.broker import EmbeddedBroker
    from mirror.config import load_config
    from mirror.engine import CopyRequest, copy_ranges, sync_destination_topics
    from mirror.kafka import IdempotentProducer, KafkaClient, NewTopic

    with EmbeddedBroker(tmp_path / "src") as src, EmbeddedBroker(tmp_path / "dst") as dst, \
            KafkaClient(src.bootstrap) as source, KafkaClient(dst.bootstrap) as destination:
        source.create_topics([NewTopic("src", 2)])
        m0, m1 = TopicPartition("src.m", 0), TopicPartition("src.m", 1)
        destination.create_topics([NewTopic("src.m", 2)])
        destination.produce([(m1, kcodecs.build_batch([Record(key=None, value=b"already there")]))])
        for b in range(5):
            for tp in (S0, S1):
                records = [Record(key=None, value=b"%s-%d-%d" % (str(tp).encode(), b, i)) for i in range(b + 1)]
                source.produce([(tp, kcodecs.build_batch(records, compression="lz4"))])
        config = load_config(None, {"source.bootstrap": src.bootstrap, "destination.bootstrap": dst.bootstrap,
                                    "topics": "src", "rename": "{topic}.m"})
        routes = sync_destination_topics(config, source, destination)
        producer = IdempotentProducer(destination)
        stats = copy_ranges([CopyRequest(S0, 0, 15), CopyRequest(S1, 3, 15)], routes, source, producer,
                            fetch_max_bytes=1 << 20)
        producer.close()
        entries = [e for pair in stats.syncs.entries.values() for e in pair]
        assert sorted((e.source, e.first, e.last, e.destination, e.exact) for e in entries) == [
            (S0, 0, 14, m0, True), (S1, 3, 14, m1, True)]  # each partition's batches merged into one entry
        for entry in entries:
            at_source = _values_by_offset(src.bootstrap, "src", entry.source.partition)
            at_destination = _values_by_offset(dst.bootstrap, "src.m", entry.destination.partition)
            for offset in range(entry.first, entry.last + 1):
                assert at_destination[entry.base + offset - entry.first] == at_source[offset]


def test_syncs_of_a_topic_given_way_to_another_of_its_name_keep_their_own_ids():
    """A resident copier follows a source topic made again: what it synced of the old topic
    before the switch is sealed with the old ids (SyncLog.seal), and written, in the same
    commit as the new topic's first syncs, in records of its own, under keys that differ
    though both start at offset 0 (read back by kafka-python's record reader)."""
    from kafka.record import MemoryRecords

    log = SyncLog()
    log.add(S0, 0, 9, D0, 0, 10, True)
    log.seal(S0, "old-id", "d-id")
    log.add(S0, 0, 4, D0, 10, 15, True)
    log.add(S1, 0, 1, D1, 0, 2, True)
    records = [r for batch in MemoryRecords(bytes(encode_syncs(log, 1, {"src": "new-id"}, {"src": "d-id"})))
               for r in batch]
    entries = [(e.source, e.first, e.base, e.topic_id, e.destination_id)
               for r in records for e in decode_syncs(Record(key=r.key, value=r.value, offset=r.offset))]
    assert entries == [(S0, 0, 0, "old-id", "d-id"), (S0, 0, 10, "new-id", "d-id"), (S1, 0, 0, "new-id", "d-id")]
    assert len(records) == 3
    assert SyncLog.of([e for pair in log.entries.values() for e in pair]).entries == log.entries  # as a report carries it
