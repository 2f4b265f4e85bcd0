"""The log cleaner on a broker's topics, in process: what it keeps is checked against a
model computed from what was written (the last record of each key below the cleaned end),
not against the cleaner's own output.

Clients (librdkafka, kafka-python) reading cleaned logs from a serving broker are in
test_log_cleaner_clients.py; crashes in the middle of a clean in test_log_cleaner_crash.py.
"""

from __future__ import annotations

import logging
import random
from pathlib import Path

import pytest

import kcodecs
from kcodecs import Record
from mirror.broker.cleaner import CleanerConfig, LogCleaner, OffsetMap
from mirror.broker.cleaner.checkpoint import CHECKPOINT_FILE
from mirror.broker.errors import ApiError
from mirror.broker.producer_state import ProducerStateTable
from mirror.broker.topics import TopicStore

from broker_helpers import T0, ManualClock

DAY_MS = 24 * 3600 * 1000


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


def open_store(path: Path) -> TopicStore:
    store = TopicStore(path)
    store.load()
    return store


def compacted(store: TopicStore, name: str = "t", **configs: str):
    settings = {"cleanup.policy": "compact", "segment.bytes": "2048", "min.cleanable.dirty.ratio": "0.01", **configs}
    return store.create(name, 1, settings).partitions[0]


def produce(partition, clock, records: list[tuple[bytes | None, bytes | None]], *, per_batch: int = 4,
            codec: str = "lz4", producer_id: int = -1, first_sequence: int = 0) -> list[tuple[int, bytes, bytes | None]]:
    """Append ``(key, value)`` pairs in batches; return ``(offset, key, value)`` of each as stored."""
    written = []
    for start in range(0, len(records), per_batch):
        chunk = records[start:start + per_batch]
        clock.now += 1
        data = kcodecs.build_batch([Record(key=k, value=v, timestamp=clock.now) for k, v in chunk], compression=codec,
                                   producer_id=producer_id, producer_epoch=0 if producer_id >= 0 else -1,
                                   base_sequence=first_sequence + start if producer_id >= 0 else -1)
        outcome = partition.append(data, clock.now)
        written += [(outcome.base_offset + i, k, v) for i, (k, v) in enumerate(chunk)]
    return written


def stored(partition) -> list[tuple[int, bytes, bytes | None]]:
    out, offset = [], partition.log.log_start_offset
    while offset < partition.log.log_end_offset:
        data = partition.log.read(offset, 1 << 20)
        for batch in kcodecs.iter_batches(data):
            batch.validate()
            out += [(r.offset, r.key, r.value) for r in batch.records()]
            offset = batch.last_offset + 1
    return out


def expected_after_clean(written, end: int, *, tombstones: bool = True):
    """The model: below ``end`` only each key's last record (tombstones too, unless past
    their horizon); from ``end`` on, everything."""
    last = {}
    for offset, key, _ in written:
        if offset < end:
            last[key] = offset
    return [(o, k, v) for o, k, v in written
            if o >= end or (last[k] == o and (tombstones or v is not None))]


def cleaner_for(store: TopicStore, clock, **config) -> LogCleaner:
    return LogCleaner(store, CleanerConfig(enable=False, **config), clock)


def updates(count: int, keys: int, seed: int = 7, tombstone_every: int = 0):
    rng = random.Random(seed)
    out = []
    for i in range(count):
        key = b"key-%d" % rng.randrange(keys)
        value = None if tombstone_every and i % tombstone_every == tombstone_every - 1 else b"value-%d-" % i + bytes(40)
        out.append((key, value))
    return out


def test_cleaning_keeps_the_last_value_of_each_key_at_its_offset(tmp_path, clock):
    store = open_store(tmp_path)
    partition = compacted(store)
    written = produce(partition, clock, updates(400, keys=25))
    cleaner = cleaner_for(store, clock)
    before = partition.log.size_bytes
    stats = cleaner.clean_once()
    assert stats is not None and stats.swapped
    end = partition.log.active_base_offset
    assert stats.end_offset == end
    assert stored(partition) == expected_after_clean(written, end)
    assert partition.log.size_bytes < before
    assert stats.keys == len({k for o, k, _ in written if o < end})
    # Nothing dirty is left: a second round has nothing to do until new data arrives.
    assert cleaner.clean_once() is None
    more = produce(partition, clock, updates(200, keys=25, seed=8))
    assert cleaner.clean_once() is not None
    assert stored(partition) == expected_after_clean(written + more, partition.log.active_base_offset)


def test_the_cleaned_log_survives_a_restart_with_its_indexes(tmp_path, clock):
    store = open_store(tmp_path)
    partition = compacted(store, **{"segment.bytes": "1500"})
    written = produce(partition, clock, updates(300, keys=20, tombstone_every=7))
    cleaner_for(store, clock).clean_once()
    after = stored(partition)
    lookups = {offset: partition.log.offset_for_timestamp(T0 + offset // 4 + 1) for offset in range(0, 300, 37)}
    store.close()
    reopened = open_store(tmp_path)
    partition = reopened.partition("t", 0)
    assert stored(partition) == after
    assert {o: partition.log.offset_for_timestamp(T0 + o // 4 + 1) for o in lookups} == lookups
    # A fetch from any offset, kept or removed, starts with the first kept record at or after it.
    kept = [o for o, _, _ in after]
    for offset in range(0, written[-1][0], 11):
        fetched = [r.offset for b in kcodecs.iter_batches(partition.log.read(offset, 1 << 16)) for r in b.records()]
        assert min(o for o in fetched if o >= offset) == min(o for o in kept if o >= offset)
    reopened.close()


def test_tombstones_stay_for_delete_retention_then_go(tmp_path, clock):
    store = open_store(tmp_path)
    partition = compacted(store, **{"delete.retention.ms": "60000"})
    written = produce(partition, clock, updates(200, keys=15))
    written += produce(partition, clock, [(b"key-%d" % i, None) for i in range(5)])
    filler = iter(range(10**6))

    def more_dirt():
        return produce(partition, clock, [(b"filler-%d" % next(filler), bytes(60)) for _ in range(60)])

    written += more_dirt()
    cleaner = cleaner_for(store, clock)
    cleaner.clean_once()
    assert stored(partition) == expected_after_clean(written, partition.log.active_base_offset, tombstones=True)
    assert sum(v is None for _, _, v in stored(partition)) == 5
    written += more_dirt()
    clock.now += 59_000
    cleaner.clean_once()
    assert sum(v is None for _, _, v in stored(partition)) == 5
    written += more_dirt()
    clock.now += 2_000  # past the horizon the first clean gave them
    stats = cleaner.clean_once()
    assert stats.tombstones_removed == 5
    assert stored(partition) == expected_after_clean(written, partition.log.active_base_offset, tombstones=False)


def test_an_idempotent_producer_keeps_its_last_sequence_through_a_clean(tmp_path, clock):
    store = open_store(tmp_path)
    partition = compacted(store)
    produce(partition, clock, [(b"same", b"v%d" % i) for i in range(120)], producer_id=5)
    produce(partition, clock, [(b"other", b"w%d" % i) for i in range(120)], producer_id=6)
    # Producer 5's batches are all superseded, but its last one must stay (as a header) for its sequence.
    produce(partition, clock, [(b"same", b"z")] * 4, producer_id=6, first_sequence=120)
    live = partition.producers.last_records()
    cleaner_for(store, clock).clean_once()
    replayed = ProducerStateTable()
    for batch in partition.log.batch_headers():
        replayed.replay(batch)
    assert replayed.last_records() == live
    # The producer continues at its next sequence; a retry of its last batch is still a duplicate.
    partition.producers = replayed
    produce(partition, clock, [(b"same", b"again")], producer_id=5, first_sequence=120)
    with pytest.raises(ApiError, match="sequence"):
        produce(partition, clock, [(b"same", b"gap")], producer_id=5, first_sequence=125)


def test_aborted_transactions_are_removed_and_markers_go_once_spent(tmp_path, clock):
    store = open_store(tmp_path)
    partition = compacted(store, **{"delete.retention.ms": "1000"})

    def txn(producer_id: int, values: list[bytes], commit: bool, sequence: int) -> None:
        clock.now += 1
        data = kcodecs.build_batch([Record(key=b"k%d" % i, value=v, timestamp=clock.now) for i, v in enumerate(values)],
                                   producer_id=producer_id, producer_epoch=0, base_sequence=sequence, transactional=True)
        partition.append(data, clock.now)
        partition.write_marker(producer_id, 0, commit=commit, coordinator_epoch=0, now_ms=clock.now)

    for round_ in range(30):
        txn(1, [b"committed-%d" % round_] * 3, commit=True, sequence=3 * round_)
        txn(2, [b"aborted-%d" % round_] * 3, commit=False, sequence=3 * round_)
    produce(partition, clock, [(b"filler", bytes(100))] * 40, codec="none")
    cleaner = cleaner_for(store, clock)
    stats = cleaner.clean_once()
    assert stats.aborted_records_removed > 0
    values = [v for _, _, v in stored(partition)]
    assert not any(v.startswith(b"aborted") for v in values if v)
    assert [v for v in values if v and v.startswith(b"committed")] == [b"committed-29"] * 3
    # Every marker is still there: each guarded a batch the first clean saw. The second clean
    # finds them spent and sets their horizons; after that they go, but for each producer's
    # last marker: its last batch stays (as an empty header for producer 2) and still counts
    # as a batch of that transaction, as in Kafka until the producer expires.
    def markers() -> int:
        return sum(1 for batch in partition.log.batch_headers() if batch.is_control and batch.record_count)
    assert markers() == 60
    produce(partition, clock, [(b"filler", bytes(100))] * 40, codec="none")
    cleaner.clean_once()  # the batches of the transactions are gone now: their markers get a horizon
    clock.now += 2_000
    produce(partition, clock, [(b"filler", bytes(100))] * 40, codec="none")
    cleaner.clean_once()
    assert markers() == 2
    assert [v for _, _, v in stored(partition) if v and v.startswith(b"committed")] == [b"committed-29"] * 3


def test_a_small_offset_map_cleans_in_several_rounds_within_its_memory(tmp_path, clock):
    store = open_store(tmp_path)
    partition = compacted(store)
    written = produce(partition, clock, [(b"k%d" % (i % 300), b"v%d" % i) for i in range(1200)], per_batch=10)
    budget = 24 * 200  # room for 180 keys at the 0.9 load factor: less than one pass over 300
    cleaner = cleaner_for(store, clock, dedupe_buffer_bytes=budget)
    rounds = []
    while (stats := cleaner.clean_once()) is not None:
        assert stats.map_bytes <= budget and stats.keys <= 180
        rounds.append(stats.end_offset)
    assert len(rounds) > 1 and rounds == sorted(rounds)
    assert rounds[-1] == partition.log.active_base_offset
    # Each round keys the latest offsets of its own section only; the last one leaves the model's result.
    assert stored(partition) == expected_after_clean(written, rounds[-1])


def test_a_corrupt_segment_stops_that_partition_and_deletes_nothing(tmp_path, clock, caplog):
    store = open_store(tmp_path)
    bad, good = compacted(store, "bad"), compacted(store, "good")
    produce(bad, clock, updates(200, keys=10))
    written = produce(good, clock, updates(200, keys=10, seed=3))
    first = bad.log.cleanable_segments()[1]
    with open(first.log.path, "r+b") as f:
        f.seek(first.size // 2)
        byte = f.read(1)
        f.seek(first.size // 2)
        f.write(bytes([byte[0] ^ 0xFF]))
    files = {p.name: p.read_bytes() for p in (tmp_path / "bad-0").iterdir()}
    cleaner = cleaner_for(store, clock)
    with caplog.at_level(logging.ERROR, logger="mirror.broker.cleaner"):
        while cleaner.clean_once() is not None:
            pass
    assert "stopped cleaning bad-0" in caplog.text and "CRC" in caplog.text
    assert {p.name: p.read_bytes() for p in (tmp_path / "bad-0").iterdir()} == files
    assert stored(good) == expected_after_clean(written, good.log.active_base_offset)  # the others are still cleaned


def test_the_checkpoint_is_kafka_format_and_resumes_the_dirty_section(tmp_path, clock):
    store = open_store(tmp_path)
    partition = compacted(store)
    produce(partition, clock, updates(200, keys=10))
    cleaner_for(store, clock).clean_once()
    lines = (tmp_path / CHECKPOINT_FILE).read_text().splitlines()
    assert lines == ["0", "1", f"t 0 {partition.log.active_base_offset}"]
    # A new cleaner (a restarted broker) reads it: nothing is dirty.
    assert cleaner_for(store, clock).clean_once() is None


def test_a_deleted_topics_checkpoint_goes_with_it_and_its_successor_is_cleaned_from_its_start(tmp_path, clock):
    """As Kafka drops a deleted partition's checkpoint entry: a topic created again under the
    name is dirty from offset 0, even once it has grown past where the old one was clean."""
    store = open_store(tmp_path)
    cleaner = cleaner_for(store, clock)
    old = compacted(store)
    produce(old, clock, updates(200, keys=10))
    cleaner.clean_once()
    old_clean = old.log.active_base_offset
    store.delete("t")
    assert (tmp_path / CHECKPOINT_FILE).read_text().splitlines() == ["0", "0"]
    again = compacted(store)
    written = produce(again, clock, updates(400, keys=10, seed=3))
    assert again.log.active_base_offset > old_clean  # the old entry would have called this much clean
    stats = cleaner.clean_once()
    assert stats is not None
    assert stored(again) == expected_after_clean(written, again.log.active_base_offset)


def test_min_compaction_lag_holds_young_segments_and_max_lag_forces_old_ones(tmp_path, clock):
    store = open_store(tmp_path)
    young = compacted(store, "young", **{"min.compaction.lag.ms": "600000"})
    produce(young, clock, updates(200, keys=10))
    cleaner = cleaner_for(store, clock)
    assert cleaner.clean_once() is None  # every segment is younger than 10 minutes
    clock.now += 600_001
    assert cleaner.clean_once() is not None
    # A partition below min.cleanable.dirty.ratio waits, unless its dirt is older than max.compaction.lag.ms.
    lazy = compacted(store, "lazy", **{"min.cleanable.dirty.ratio": "0.99", "max.compaction.lag.ms": "3600000"})
    produce(lazy, clock, updates(200, keys=10))
    cleaner.clean_once()
    produce(lazy, clock, updates(40, keys=10, seed=2))  # a little dirt on a cleaned log: ratio < 0.99
    assert cleaner.clean_once() is None
    clock.now += 3_600_001
    stats = cleaner.clean_once()
    assert stats is not None and stats.name == "lazy-0"


def test_compact_delete_applies_both_policies(tmp_path, clock):
    store = open_store(tmp_path)
    partition = compacted(store, **{"cleanup.policy": "compact,delete", "retention.ms": "100000"})
    produce(partition, clock, updates(200, keys=10))
    clock.now += 200_000
    later = produce(partition, clock, updates(200, keys=10, seed=4))  # retention runs on the append path too
    assert partition.log.log_start_offset >= 150
    cleaner_for(store, clock).clean_once()
    start = partition.log.log_start_offset
    assert stored(partition) == expected_after_clean([r for r in later if r[0] >= start], partition.log.active_base_offset)


def test_retention_runs_on_idle_partitions_too(tmp_path, clock):
    store = open_store(tmp_path)
    partition = store.create("plain", 1, {"segment.bytes": "2048", "retention.ms": "1000"}).partitions[0]
    produce(partition, clock, updates(300, keys=300), codec="none")
    segments = len(partition.log.segment_base_offsets)
    assert segments > 2
    clock.now += 5_000
    assert store.enforce_retention(clock.now) == segments - 1
    assert partition.log.segment_base_offsets == (partition.log.active_base_offset,)


def test_a_compacted_topic_refuses_records_without_keys(tmp_path, clock):
    store = open_store(tmp_path)
    partition = compacted(store)
    with pytest.raises(ApiError, match="without a key"):
        produce(partition, clock, [(None, b"v")])
    assert partition.log.log_end_offset == 0


def test_the_offset_map_keeps_the_latest_offset_in_fixed_memory():
    with OffsetMap(24 * 1000) as offsets:
        assert offsets.memory_bytes == 24_000 and offsets.max_entries == 900
        model = {}
        rng = random.Random(1)
        for offset in range(5000):
            key = b"%d" % rng.randrange(900)
            offsets.put(key, offset)
            model[key] = offset
        assert offsets.size == len(model)
        assert all(offsets.get(key) == offset for key, offset in model.items())
        assert offsets.get(b"never") == -1
        with pytest.raises(OverflowError):
            for i in range(1000):
                offsets.put(b"new-%d" % i, 10_000 + i)


def test_a_serving_broker_applies_retention_to_idle_partitions_on_its_timer(tmp_path):
    from mirror.broker.embedded import EmbeddedBroker
    from broker_helpers import wait_for

    clock = ManualClock()
    with EmbeddedBroker(tmp_path, clock=clock, retention_check_interval_ms=20) as broker:
        partition = broker.call_in_loop(lambda: broker.state.topics.create(
            "idle", 1, {"segment.bytes": "2048", "retention.ms": "60000"}).partitions[0])
        broker.call_in_loop(lambda: produce(partition, clock, updates(300, keys=300), codec="none"))
        assert len(partition.log.segment_base_offsets) > 2 and partition.log.log_start_offset == 0
        clock.now += 3_600_000  # an hour later, and not one more append
        wait_for(lambda: partition.log.log_start_offset == partition.log.active_base_offset,
                 "the retention timer to delete the idle partition's expired segments")


def test_retention_waits_while_the_cleaner_reads_the_segments(tmp_path, clock):
    store = open_store(tmp_path)
    partition = compacted(store, **{"cleanup.policy": "compact,delete", "retention.ms": "1000"})
    produce(partition, clock, updates(200, keys=10))
    clock.now += 10_000
    with partition.log.cleaning():
        assert store.enforce_retention(clock.now) == 0
    assert store.enforce_retention(clock.now) > 0
