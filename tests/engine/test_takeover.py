"""Taking over from MirrorMaker 2, the parts that need no MM2: its records decoded (encoded here
by kafka-python's implementation of Kafka's ``Struct`` types, and as the issue quotes MM2's
Connect offsets), its offset syncs turned into kmirror's and checked against a simulated
destination log, and a running MM2 refused on the embedded broker. The real MM2 is in
tests/realkafka/test_real_mm2_takeover.py."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.protocol.old.types import Int32, Int64, Schema, String

import kcodecs
from kcodecs import Record
from mirror.broker import EmbeddedBroker
from mirror.engine.offset_syncs import OffsetSyncStore, SyncLog
from mirror.engine.takeover import (MirrorMakerRunningError, TakeoverError, _connect_offset, _offset_sync,
                                    check_stopped, connect_offsets, mm2_offset_syncs, seeded_syncs)
from mirror.kafka import KafkaClient, NewTopic, TopicPartition

SRC, DST = TopicPartition("live", 1), TopicPartition("A.live", 1)
WHERE = TopicPartition("mm2-offsets.A.internal", 0)
OFFSET_SYNC_KEY = Schema(("topic", String("utf-8")), ("partition", Int32))
OFFSET_SYNC_VALUE = Schema(("upstreamOffset", Int64), ("offset", Int64))


def _connect_record(key: object, value: object | None, offset: int = 0) -> Record:
    return Record(key=json.dumps(key, separators=(",", ":")).encode(),
                  value=None if value is None else json.dumps(value).encode(), offset=offset)


def test_mm2s_connect_offset_is_its_last_copied_offset_of_a_partition():
    record = _connect_record(["MirrorSourceConnector", {"cluster": "A", "partition": 1, "topic": "live"}],
                             {"offset": 29161})
    assert _connect_offset(record, "A", WHERE) == (SRC, 29161)
    tombstone = _connect_record(["MirrorSourceConnector", {"cluster": "A", "partition": 1, "topic": "live"}], None)
    assert _connect_offset(tombstone, "A", WHERE) == (SRC, None)


def test_other_connectors_and_other_source_clusters_are_not_this_flows():
    other_cluster = _connect_record(["MirrorSourceConnector", {"cluster": "C", "partition": 1, "topic": "live"}],
                                    {"offset": 5})
    checkpoints = _connect_record(["MirrorCheckpointConnector", {"group": "g", "partition": 1, "topic": "live"}],
                                  {"offset": 5})
    assert _connect_offset(other_cluster, "A", WHERE) == (None, None)
    assert _connect_offset(checkpoints, "A", WHERE) == (None, None)


@pytest.mark.parametrize("key, value", [(b"not json", b"{}"), (b'["MirrorSourceConnector"]', b"{}"),
                                        (b'["MirrorSourceConnector", {"cluster": "A", "topic": "live"}]',
                                         b'{"offset": 1}'),
                                        (b'["MirrorSourceConnector", {"cluster": "A", "topic": "t", "partition": 0}]',
                                         b'{"position": 1}')])
def test_a_record_mm2_did_not_write_is_a_named_error(key, value):
    with pytest.raises(TakeoverError, match="not a Connect source offset of MirrorMaker 2"):
        _connect_offset(Record(key=key, value=value, offset=7), "A", WHERE)


def test_an_offset_sync_reads_as_kafkas_struct_encoding_writes_it():
    record = Record(key=OFFSET_SYNC_KEY.encode(("live", 3)), value=OFFSET_SYNC_VALUE.encode((5000, 5012)), offset=0)
    assert _offset_sync(record, WHERE) == (TopicPartition("live", 3), 5000, 5012)
    for key, value in [(b"\x00\x09li", b""), (OFFSET_SYNC_KEY.encode(("live", 3)), b"\x00" * 15),
                       (OFFSET_SYNC_KEY.encode(("live", 3)) + b"x", OFFSET_SYNC_VALUE.encode((1, 2)))]:
        with pytest.raises(TakeoverError, match="not a MirrorMaker 2 offset sync"):
            _offset_sync(Record(key=key, value=value, offset=9), WHERE)


def _mm2_copy(records: int, markers_every: int) -> dict[int, int]:
    """Where MM2 put each source offset it copied: a destination that also holds a commit
    marker after every ``markers_every`` records (exactly-once MM2), offsets counted one by one."""
    at, position = {}, 0
    for offset in range(records):
        at[offset] = position
        position += 1
        if markers_every and (offset + 1) % markers_every == 0:
            position += 1
    return at


@settings(max_examples=200, deadline=None)
@given(start=st.integers(1, 300), markers_every=st.sampled_from([0, 1, 7, 50]),
       synced=st.sets(st.integers(0, 299), max_size=12), group=st.integers(0, 299))
def test_a_group_translated_over_mm2s_copy_never_skips_and_stays_at_mm2s_synced_record(start, markers_every,
                                                                                     synced, group):
    """A group at source offset ``group`` below the takeover: its destination offset holds no
    record it had not consumed (at or below where record ``group`` lies), and is no lower than
    the last record MM2 synced at or below it."""
    group = min(group, start - 1)
    at = _mm2_copy(start, markers_every)
    end = at[start - 1] + 1
    syncs = [(u, at[u]) for u in sorted(synced) if u < start]
    log = SyncLog()
    seeded_syncs(SRC, DST, start, syncs, 0, end, log)
    store = OffsetSyncStore(None, "unused")
    store.add(entry for entries in log.entries.values() for entry in entries)
    translated = store.translate({SRC: group}, {SRC: start})[DST].offset
    assert translated <= at[group]
    below = [at[u] for u, _ in syncs if u <= group]
    assert translated >= (max(below) if below else 0)
    if group in synced:
        assert translated == at[group]


def test_offsets_synced_past_the_takeover_or_outside_the_destination_are_left_out():
    log = SyncLog()
    seeded_syncs(SRC, DST, 10, [(3, 103), (12, 112), (5, 50)], 100, 111, log)
    assert [(e.first, e.last, e.base, e.end, e.exact) for e in log.entries[(SRC, DST)]] == [
        (0, 2, 100, 103, False), (3, 3, 103, 104, True), (4, 9, 104, 111, False)]


def _connect_worker(bootstrap: str):
    """librdkafka's consumer as a member of MM2's Connect group ``A-mm2``, once it has joined."""
    from confluent_kafka import Consumer

    member = Consumer({"bootstrap.servers": bootstrap, "group.id": "A-mm2"})
    member.subscribe(["mm2-offsets.A.internal"])
    for _ in range(50):
        member.poll(0.2)
        if member.assignment():
            break
    return member


def test_a_running_mirrormaker2_is_refused_by_its_group_or_its_moving_offsets(tmp_path):
    with EmbeddedBroker(tmp_path / "dst") as broker, KafkaClient(broker.bootstrap) as client:
        client.create_topics([NewTopic("mm2-offsets.A.internal", 2)])
        check_stopped(client, "A-mm2", "mm2-offsets.A.internal", probe_s=0, sleep=lambda s: None)

        def written_meanwhile(_seconds: float) -> None:
            batch = kcodecs.build_batch([Record(key=b"k", value=b"v", timestamp=1)])
            client.produce([(TopicPartition("mm2-offsets.A.internal", 1), batch)])

        with pytest.raises(MirrorMakerRunningError, match="grew by 1 records"):
            check_stopped(client, "A-mm2", "mm2-offsets.A.internal", probe_s=0, sleep=written_meanwhile)
        member = _connect_worker(broker.bootstrap)
        try:
            with pytest.raises(MirrorMakerRunningError,
                               match="Connect group A-mm2 on the destination still has 1 members .* after 0 s"):
                check_stopped(client, "A-mm2", "mm2-offsets.A.internal", leave_s=0, probe_s=0, sleep=lambda s: None)
        finally:
            member.close()


def test_a_mirrormaker2_worker_leaving_within_the_wait_is_not_refused(tmp_path):
    """Started right after MM2 was stopped, kmirror waits for its last member to leave (a killed
    worker leaves at its session timeout; here the member leaves during the first wait)."""
    with EmbeddedBroker(tmp_path / "dst") as broker, KafkaClient(broker.bootstrap) as client:
        client.create_topics([NewTopic("mm2-offsets.A.internal", 1)])
        member = _connect_worker(broker.bootstrap)
        waits = []

        def member_leaves(seconds: float) -> None:
            waits.append(seconds)
            if len(waits) == 1:
                member.close()

        check_stopped(client, "A-mm2", "mm2-offsets.A.internal", probe_s=0, sleep=member_leaves)
        assert waits[0] == 1.0 and len(waits) == 2  # one wait for the member, then the offsets probe


def test_mm2s_state_is_read_from_every_partition_to_the_end(tmp_path):
    """The last value of each key wins, wherever Connect's partitioner put it; a tombstone forgets."""
    key = lambda p: ["MirrorSourceConnector", {"cluster": "A", "partition": p, "topic": "live"}]  # noqa: E731
    with EmbeddedBroker(tmp_path / "dst") as broker, KafkaClient(broker.bootstrap) as client:
        client.create_topics([NewTopic("mm2-offsets.A.internal", 3), NewTopic("syncs", 1)])
        writes = [(0, key(0), {"offset": 10}), (2, key(1), {"offset": 4}), (0, key(0), {"offset": 41}),
                  (1, key(2), {"offset": 7}), (1, key(2), None)]
        for partition, k, v in writes:
            record = _connect_record(k, v)
            batch = kcodecs.build_batch([Record(key=record.key, value=record.value, timestamp=1)])
            client.produce([(TopicPartition("mm2-offsets.A.internal", partition), batch)])
        assert connect_offsets(client, "mm2-offsets.A.internal", "A") == {
            TopicPartition("live", 0): 42, TopicPartition("live", 1): 5}
        syncs = [Record(key=OFFSET_SYNC_KEY.encode(("live", 0)), value=OFFSET_SYNC_VALUE.encode((u, u + 2)),
                        timestamp=1) for u in (0, 17, 40)]
        client.produce([(TopicPartition("syncs", 0), kcodecs.build_batch(syncs))])
        assert mm2_offset_syncs(client, "syncs") == {TopicPartition("live", 0): [(0, 2), (17, 19), (40, 42)]}
        assert connect_offsets(client, "absent", "A") == {}
