"""``kcodecs.record_bytes``: what a merge reads of a batch's records, and what it refuses.

The batches are kafka-python's (uncompressed, so the record bytes can be cut and bent where
the format puts each field). A merge reads each record's framing and key and carries value
and headers unread: a bent framing or key must be refused with a typed error naming the
batch, and a record whose value or headers are bent goes on as bytes, as a forwarded batch's
would (a real Kafka destination refuses it: tests/realkafka/test_real_small_batches.py).
"""

from __future__ import annotations

import pytest
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

import kcodecs
from kcodecs import CorruptBatchError

RECORDS = 61  # where a v2 batch's records begin
BASE_OFFSET = 40


def _batch(*records: tuple[bytes | None, bytes | None], base_timestamp: int = 1_700_000_000_000) -> bytearray:
    builder = DefaultRecordBatchBuilder(2, 0, False, -1, -1, -1, batch_size=1 << 20)
    for index, (key, value) in enumerate(records):
        builder.append(index, base_timestamp + 7 * index, key, value, [("h", b"v")])
    data = bytearray(builder.build())
    data[0:8] = BASE_OFFSET.to_bytes(8, "big")
    return data


def _bent(data: bytearray, at: int, replacement: bytes) -> kcodecs.V2Batch:
    """``data`` with the bytes at ``at`` (from the records' start) replaced (the CRC is not
    checked here)."""
    bent = data[:RECORDS + at] + replacement + data[RECORDS + at + len(replacement):]
    bent[8:12] = (len(bent) - 12).to_bytes(4, "big")
    return kcodecs.read_batch(bent)


def test_keys_timestamps_and_bodies_are_kafka_pythons():
    data = _batch((b"k1", b"v" * 300), (None, b"null key"), (b"", None))
    theirs = list(DefaultRecordBatch(bytes(data)))
    ours = kcodecs.record_bytes(kcodecs.read_batch(data))
    assert [(r.key, r.timestamp) for r in ours] == [(r.key, r.timestamp) for r in theirs]
    # The body is the key, value and headers as stored: key length and key first, one header
    # "h" = "v" last (zig-zag varints: 1 is 0x02, 300 is 0xd8 0x04, -1 is 0x01).
    assert [bytes(r.body) for r in ours] == [
        b"\x04k1" + b"\xd8\x04" + b"v" * 300 + b"\x02\x02h\x02v",
        b"\x01" + b"\x10null key" + b"\x02\x02h\x02v",
        b"\x00" + b"\x01" + b"\x02\x02h\x02v",
    ]


@pytest.mark.parametrize("what, at, replacement", [
    ("a record longer than the batch", 0, bytes([0xFE, 0x7F])),
    ("a negative record length", 0, bytes([0x03])),
    ("a key longer than its record", 4, bytes([0x7E])),
    ("a key length below -1", 4, bytes([0x03])),
])
def test_a_bent_framing_or_key_is_refused_naming_the_batch(what, at, replacement):
    batch = _bent(_batch((b"key", b"value")), at, replacement)
    with pytest.raises(CorruptBatchError) as caught:
        kcodecs.record_bytes(batch)
    assert caught.value.offset == BASE_OFFSET, what


def test_a_varint_cut_off_by_the_end_is_refused():
    data = _batch((b"key", b"value"))
    cut = data[:RECORDS] + b"\xff"  # a record length that says more bytes follow, and none do
    cut[8:12] = (len(cut) - 12).to_bytes(4, "big")
    with pytest.raises(CorruptBatchError) as caught:
        kcodecs.record_bytes(kcodecs.read_batch(cut))
    assert caught.value.offset == BASE_OFFSET


def test_bytes_after_the_last_record_are_refused():
    data = _batch((b"a", b"1"), (b"b", b"2"))
    data[57:61] = (1).to_bytes(4, "big")  # the record count: one, where two are stored
    with pytest.raises(CorruptBatchError, match="left over"):
        kcodecs.record_bytes(kcodecs.read_batch(data))


def test_a_bent_value_length_is_carried_unread():
    """The value's length is not the merge's to check (see the module's docstring)."""
    data = _batch((b"key", b"value"))
    value_length_at = 1 + 1 + 1 + 1 + 1 + 3  # record length, attributes, two deltas, key length, key
    batch = _bent(data, value_length_at, bytes([0x7E]))  # 63 bytes, in a record of a dozen
    (record,) = kcodecs.record_bytes(batch)
    assert record.key == b"key"
    assert bytes(record.body)[4] == 0x7E
