"""The bench's source data: deterministic, exactly sized, compressible like text, batched like the
Java producer, and the three layouts differing only where they should. Decoded with
kafka-python as the independent reader."""

from __future__ import annotations

import random

import pytest
from kafka.record.memory_records import MemoryRecords

import kcodecs
from kcodecs import Compression
from mirror.bench.datagen import Corpus, DataSpec, Layout, build_dataset, event_value
from mirror.routing import RouteClass, RoutingPolicy, route_batch

SMALL = dict(record_bytes=300, total_bytes=60_000, batch_bytes=6_000)


def _kafka_python_records(data: bytes) -> list:
    records = MemoryRecords(data)
    out = []
    while records.has_next():
        out.extend(records.next_batch())
    return out


def test_same_seed_same_bytes_other_seed_other_bytes():
    spec = DataSpec(Compression.ZSTD, **SMALL)
    assert build_dataset(spec, Layout.KEYED) == build_dataset(spec, Layout.KEYED)
    other = DataSpec(Compression.ZSTD, **SMALL, seed=7)
    assert build_dataset(other, Layout.KEYED).batches != build_dataset(spec, Layout.KEYED).batches


@pytest.mark.parametrize("size", [1, 40, 100, 1024, 10_240])
def test_values_have_exactly_the_asked_size(size):
    rng, corpus = random.Random(1), Corpus(1, size=64 * 1024)
    for index in range(20):
        _user, value = event_value(rng, corpus, index, size)
        assert len(value) == size


def test_values_look_like_json_events_keyed_by_their_user():
    data = build_dataset(DataSpec(Compression.NONE, **SMALL), Layout.KEYED)
    record = kcodecs.read_batch(data.batches[0][1]).records().__next__()
    assert record.value.startswith(b'{"id":0,"ts":') and record.value.endswith(b'"}')
    assert b'"user":"%s"' % record.key in record.value


def test_records_are_stamped_from_the_specs_base_timestamp_in_header_and_value():
    base = 1_795_000_000_000  # 2026-11-18
    data = build_dataset(DataSpec(Compression.NONE, **SMALL, base_timestamp_ms=base), Layout.FLAGGED)
    records = [record for _, batch in data.batches for record in kcodecs.read_batch(batch).records()]
    assert [record.timestamp for record in records] == [base + index for index in range(len(records))]
    assert records[7].value.startswith(b'{"id":7,"ts":%d,' % (base + 7))


@pytest.mark.interop
@pytest.mark.parametrize("codec", list(Compression))
def test_layouts_hold_the_same_values_and_differ_only_in_keys_and_the_flag(codec):
    spec = DataSpec(codec, **SMALL, partitions=2)
    flagged, unflagged, keyed = (build_dataset(spec, layout) for layout in Layout)
    decoded = {}
    for data in (flagged, unflagged, keyed):
        assert data.records == spec.records == 200
        per_partition = [sum(kcodecs.read_batch(b).record_count for p, b in data.batches if p == partition)
                         for partition in (0, 1)]
        assert data.end_offsets(2) == tuple(per_partition) and min(per_partition) > 0  # round-robin
        decoded[data.layout] = [r for _, batch in data.batches for r in _kafka_python_records(batch)]
    values = [r.value for r in decoded[Layout.FLAGGED]]
    assert [r.value for r in decoded[Layout.UNFLAGGED]] == values == [r.value for r in decoded[Layout.KEYED]]
    assert all(r.key is None for r in decoded[Layout.FLAGGED] + decoded[Layout.UNFLAGGED])
    assert all(r.key is not None for r in decoded[Layout.KEYED])  # keyed_ratio defaults to 1
    assert all(kcodecs.read_batch(b).has_no_keys_flag for _, b in flagged.batches)
    assert not any(kcodecs.read_batch(b).has_no_keys_flag for _, b in unflagged.batches + keyed.batches)
    assert flagged.payload_bytes == unflagged.payload_bytes == 200 * 300
    assert keyed.payload_bytes == 200 * 300 + sum(len(r.key) for r in decoded[Layout.KEYED])


@pytest.mark.parametrize("codec", list(Compression))
@pytest.mark.parametrize("batch_kib", [16, 128])
def test_batches_are_about_batch_bytes_as_stored_like_the_java_producer_writes_them(codec, batch_kib):
    limit = batch_kib * 1024
    data = build_dataset(DataSpec(codec, record_bytes=1024, total_bytes=40 * limit, batch_bytes=limit), Layout.FLAGGED)
    sizes = [len(batch) for _, batch in data.batches]
    assert max(sizes) <= limit and data.mean_batch_bytes == sum(sizes) / len(sizes)
    assert 0.85 * limit < data.mean_batch_bytes  # the first batch guesses the ratio, the last may be short
    # Stored size is what counts: a compressing codec packs its ratio more records in.
    records_per_batch = data.records / len(sizes)
    assert records_per_batch * 1024 > limit * 0.8 * data.payload_bytes / data.wire_bytes


def test_a_record_bigger_than_the_batch_gets_a_batch_of_its_own():
    data = build_dataset(DataSpec(Compression.NONE, record_bytes=2000, total_bytes=20_000, batch_bytes=1000),
                         Layout.FLAGGED)
    assert [kcodecs.read_batch(b).record_count for _, b in data.batches] == [1] * 10


@pytest.mark.parametrize("keyed_ratio", [1.0, 0.5])
def test_split_records_are_those_the_router_rebuilds(keyed_ratio):
    # Two records a batch into 3 partitions: about a third of the batches stay whole.
    spec = DataSpec(Compression.LZ4, record_bytes=1000, total_bytes=200_000, batch_bytes=2300, partitions=2,
                    keyed_ratio=keyed_ratio)
    policy = RoutingPolicy(partitioning="by-key", destination_partitions=spec.repartitioned)
    keyed = build_dataset(spec, Layout.KEYED)
    rebuilt = sum(routed.records for routed in (route_batch(kcodecs.read_batch(b), p, policy) for p, b in keyed.batches)
                  if routed.route is RouteClass.REBUILT)
    assert keyed.split_records == rebuilt and 0 < rebuilt < keyed.records
    assert build_dataset(spec, Layout.UNFLAGGED).split_records == 0  # no keys: every batch stays whole


def test_keyed_ratio_is_the_share_of_keyed_records():
    data = build_dataset(DataSpec(Compression.NONE, record_bytes=100, total_bytes=200_000, keyed_ratio=0.3), Layout.KEYED)
    keys = [r.key for _, b in data.batches for r in kcodecs.read_batch(b).records()]
    assert 0.25 < sum(k is not None for k in keys) / len(keys) < 0.35


@pytest.mark.parametrize("codec, low, high", [(Compression.GZIP, 2.0, 6.0), (Compression.ZSTD, 2.0, 6.0),
                                              (Compression.LZ4, 1.3, 4.0), (Compression.NONE, 0.9, 1.0)])
def test_compression_ratios_are_those_of_text_not_of_zeros_or_noise(codec, low, high):
    data = build_dataset(DataSpec(codec, record_bytes=1024, total_bytes=1_000_000), Layout.FLAGGED)
    assert low < data.payload_bytes / data.wire_bytes < high


@pytest.mark.parametrize("bad", [dict(keyed_ratio=0), dict(keyed_ratio=1.5), dict(partitions=0), dict(record_bytes=0),
                                 dict(total_bytes=10)])
def test_bad_specs_are_refused(bad):
    with pytest.raises(ValueError):
        DataSpec(Compression.NONE, **{**SMALL, **bad})
