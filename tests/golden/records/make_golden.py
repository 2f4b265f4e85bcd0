"""Write the golden vectors in this directory with kafka-python only (never kcodecs).

Run from anywhere: ``.venv/bin/python tests/golden/records/make_golden.py``. Each vector
is ``NAME.bin`` (a buffer of batches as a broker would store or serve them) and ``NAME.json``,
the content those bytes must decode to, derived from the records this script fed the
builder, never from decoding the output. Timestamps are fixed and gzip's header clock is
pinned, so reruns write identical files with the same library versions.

kafka-python builds what a producer sends: baseOffset 0 (v2) and wrapper offset 0 and
timestamp 0 (v0/v1 compressed). Each vector is then given what the broker assigns, by hand
with ``struct``: v2 baseOffset and partitionLeaderEpoch (both outside the CRC), the v0/v1
wrapper's offset (its last inner offset, outside the CRC) and, for v1, the wrapper
timestamp (the max inner timestamp under CreateTime, KIP-32; CRC-32 recomputed with zlib).
"""

from __future__ import annotations

import base64
import json
import struct
import sys
import time
import zlib
from pathlib import Path
from unittest import mock

import xxhash
from kafka.record.memory_records import MemoryRecordsBuilder

HERE = Path(__file__).resolve().parent
GENERATOR = "kafka-python, tests/golden/records/make_golden.py"
CODECS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}  # Kafka's CompressionType ids
BASE_TS = 1_600_000_000_000


def records(count: int, *, headers: bool, seed: int) -> list[dict]:
    """Deterministic, compressible records; null and empty keys and values among them."""
    out = []
    for i in range(count):
        key = None if i % 4 == 3 else f"user-{(i + seed) % 3}".encode()
        if i % 5 == 4:
            value = None
        elif i % 7 == 6:
            value = b""
        else:
            value = (f"event {seed}/{i} clicked; " * (2 + i % 3)).encode()
        hs = []
        if headers and i % 2 == 0:
            hs = [("trace-id", f"{seed:04d}-{i:04d}".encode()), ("sch\u00e9ma", None), ("empty", b"")]
        # Not monotonic, so max_timestamp is not simply the last record's.
        out.append({"key": key, "value": value, "headers": hs, "timestamp": BASE_TS + seed * 10_000 + (i * 37) % 11 * 100})
    return out


def build(magic: int, codec: str, recs: list[dict], *, offset: int = 0, producer: tuple | None = None) -> bytearray:
    builder = MemoryRecordsBuilder(magic, CODECS[codec], batch_size=1 << 20, offset=offset)
    if producer is not None:
        builder.set_producer_state(*producer)
    for r in recs:
        assert builder.append(r["timestamp"], r["key"], r["value"], list(r["headers"])) is not None
    with mock.patch.object(time, "time", return_value=0.0):  # gzip writes time.time() as its mtime
        builder.close()
    return bytearray(builder.buffer())


def b64(data: bytes | None) -> str | None:
    return None if data is None else base64.b64encode(data).decode()


def expect_records(recs: list[dict], base_offset: int, magic: int, *, log_append_time: int | None = None) -> list[dict]:
    out = []
    for i, r in enumerate(recs):
        if magic == 0:
            timestamp = -1
        elif log_append_time is not None:
            timestamp = log_append_time
        else:
            timestamp = r["timestamp"]
        out.append({
            "offset": base_offset + i,
            "timestamp": timestamp,
            "key": b64(r["key"]),
            "value": b64(r["value"]),
            "headers": [[k, b64(v)] for k, v in r["headers"]],
        })
    return out


def v2_vector(codec: str, recs: list[dict], *, base_offset: int, leader_epoch: int,
              producer: tuple | None = None) -> tuple[bytes, list[dict]]:
    data = build(2, codec, recs, producer=producer)
    # Sanity: kafka-python falls back to no compression when it does not pay; these records compress.
    assert struct.unpack_from(">h", data, 21)[0] & 0x07 == CODECS[codec], codec
    struct.pack_into(">q", data, 0, base_offset)  # broker-assigned, outside the CRC
    struct.pack_into(">i", data, 12, leader_epoch)  # likewise
    pid, epoch, seq, transactional = producer or (-1, -1, -1, False)
    batch = {
        "magic": 2,
        "compression": codec,
        "base_offset": base_offset,
        "last_offset": base_offset + len(recs) - 1,
        "max_timestamp": max(r["timestamp"] for r in recs),
        "timestamp_type": 0,
        "partition_leader_epoch": leader_epoch,
        "producer_id": pid,
        "producer_epoch": epoch,
        "base_sequence": seq,
        "is_transactional": transactional,
        "is_control": False,
        "record_count": len(recs),
        "records": expect_records(recs, base_offset, 2),
    }
    return bytes(data), [batch]


def legacy_wrapper_vector(magic: int, codec: str, recs: list[dict], *, base_offset: int) -> tuple[bytes, list[dict]]:
    # v0 inner offsets are absolute, so the producer-side builder starts at base_offset; v1's are relative (KIP-31).
    data = build(magic, codec, recs, offset=base_offset if magic == 0 else 0)
    assert data[17] & 0x07 == CODECS[codec] and struct.unpack_from(">i", data, 8)[0] + 12 == len(data)
    last = base_offset + len(recs) - 1
    struct.pack_into(">q", data, 0, last)  # the wrapper carries its last inner offset
    max_timestamp = -1
    if magic == 1:
        max_timestamp = max(r["timestamp"] for r in recs)
        struct.pack_into(">q", data, 18, max_timestamp)
        struct.pack_into(">I", data, 12, zlib.crc32(bytes(data[16:])))
    batch = {
        "magic": magic,
        "compression": codec,
        "base_offset": base_offset,
        "last_offset": last,
        "max_timestamp": max_timestamp,
        "timestamp_type": -1 if magic == 0 else 0,
        "record_count": None,
        "records": expect_records(recs, base_offset, magic),
    }
    return bytes(data), [batch]


def legacy_plain_vector(magic: int, recs: list[dict], *, base_offset: int) -> tuple[bytes, list[dict]]:
    """An uncompressed message set: every message is its own batch, with its own offset."""
    data = build(magic, "none", recs, offset=base_offset)
    batches = []
    for i, record in enumerate(expect_records(recs, base_offset, magic)):
        batches.append({
            "magic": magic,
            "compression": "none",
            "base_offset": base_offset + i,
            "last_offset": base_offset + i,
            "max_timestamp": record["timestamp"],
            "timestamp_type": -1 if magic == 0 else 0,
            "record_count": 1,
            "records": [record],
        })
    return bytes(data), batches


def render(description: str, batches: list[dict]) -> str:
    """JSON with one line per batch header and per record: small, and diffs stay readable."""
    lines = ["{", f' "description": {json.dumps(description)},',
             f' "generator": {json.dumps(GENERATOR)},', ' "batches": [']
    for i, batch in enumerate(batches):
        header = json.dumps({k: v for k, v in batch.items() if k != "records"})
        lines.append(f"  {header[:-1]}, \"records\": [")
        records = batch["records"]
        lines += [f"   {json.dumps(r)}{',' if j < len(records) - 1 else ''}" for j, r in enumerate(records)]
        lines.append(f"  ]}}{',' if i < len(batches) - 1 else ''}")
    lines += [" ]", "}"]
    text = "\n".join(lines) + "\n"
    assert json.loads(text) == {"description": description, "generator": GENERATOR, "batches": batches}
    return text


def lz4_header_checksums(frame: bytes) -> tuple[int, int]:
    """(correct HC, KAFKA-3160 HC) of an lz4 frame with no content size or dictionary id."""
    return (xxhash.xxh32(frame[4:6]).intdigest() >> 8) & 0xFF, (xxhash.xxh32(frame[0:6]).intdigest() >> 8) & 0xFF


def main() -> None:
    vectors: dict[str, tuple[str, tuple[bytes, list[dict]]]] = {
        "v2_none_headers": (
            "v2 uncompressed; headers with null and empty values and a non-ASCII key; null keys, null and empty values",
            v2_vector("none", records(9, headers=True, seed=1), base_offset=1000, leader_epoch=5),
        ),
        "v2_gzip_idempotent": (
            "v2 gzip (GZIPOutputStream-style member from Python's gzip, mtime 0) from an idempotent producer",
            v2_vector("gzip", records(8, headers=True, seed=2), base_offset=2000, leader_epoch=6,
                      producer=(4242, 3, 17, False)),
        ),
        "v2_snappy_transactional": (
            "v2 snappy (xerial framing) from a transactional producer",
            v2_vector("snappy", records(8, headers=False, seed=3), base_offset=3000, leader_epoch=7,
                      producer=(77, 1, 0, True)),
        ),
        "v2_lz4": (
            "v2 lz4 frame (correct header checksum)",
            v2_vector("lz4", records(8, headers=True, seed=4), base_offset=4000, leader_epoch=8),
        ),
        "v2_zstd": (
            "v2 zstd frame",
            v2_vector("zstd", records(8, headers=True, seed=5), base_offset=5000, leader_epoch=9),
        ),
        "v1_gzip_wrapper": (
            "v1 gzip wrapper: relative inner offsets, wrapper offset and timestamp as a broker assigns them",
            legacy_wrapper_vector(1, "gzip", records(7, headers=False, seed=6), base_offset=6000),
        ),
        "v1_none": (
            "v1 uncompressed message set, one message per batch",
            legacy_plain_vector(1, records(3, headers=False, seed=7), base_offset=7000),
        ),
        "v0_lz4_kafka3160": (
            "v0 lz4 wrapper whose frame header checksum also covers the magic bytes (KAFKA-3160)",
            legacy_wrapper_vector(0, "lz4", records(7, headers=False, seed=8), base_offset=8000),
        ),
        "v0_snappy_wrapper": (
            "v0 snappy wrapper: absolute inner offsets",
            legacy_wrapper_vector(0, "snappy", records(7, headers=False, seed=9), base_offset=9000),
        ),
    }
    # The v0 lz4 vector must really carry the broken checksum, or it tests nothing.
    v0_lz4 = vectors["v0_lz4_kafka3160"][1][0]
    value = v0_lz4[18 + 4 + 4:]  # v0: key length (-1), value length, value
    correct, broken = lz4_header_checksums(value)
    assert value[:4] == b"\x04\x22\x4d\x18" and value[6] == broken != correct, "not a KAFKA-3160 frame"

    for old in HERE.glob("*.bin"):
        old.unlink()
    for name, (description, (data, batches)) in vectors.items():
        (HERE / f"{name}.bin").write_bytes(data)
        (HERE / f"{name}.json").write_text(render(description, batches))
    total = sum(len(data) for _, (data, _) in vectors.values())
    print(f"wrote {len(vectors)} vectors, {total} bytes of batches, to {HERE}", file=sys.stderr)


if __name__ == "__main__":
    main()
