"""Golden vectors: bytes written by kafka-python (``tests/golden/records/make_golden.py``),
decoded by kcodecs into exactly the content the generator fed in (``NAME.json`` beside each
``NAME.bin``)."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest

import kcodecs
from kcodecs import Compression, TimestampType

GOLDEN = Path(__file__).parents[1] / "golden" / "records"
VECTORS = sorted(p.stem for p in GOLDEN.glob("*.bin"))


def _bytes(text: str | None) -> bytes | None:
    return None if text is None else base64.b64decode(text)


def test_the_vectors_are_there():
    assert {"v2_none_headers", "v2_gzip_idempotent", "v2_snappy_transactional", "v2_lz4", "v2_zstd",
            "v1_gzip_wrapper", "v1_none", "v0_lz4_kafka3160", "v0_snappy_wrapper"} <= set(VECTORS)
    assert all((GOLDEN / f"{name}.json").is_file() for name in VECTORS)
    assert sum((GOLDEN / f"{name}.bin").stat().st_size for name in VECTORS) < 8 * 1024


@pytest.mark.parametrize("name", VECTORS)
def test_kcodecs_decodes_the_golden_vector(name):
    data = (GOLDEN / f"{name}.bin").read_bytes()
    expected = json.loads((GOLDEN / f"{name}.json").read_text())["batches"]
    batches = list(kcodecs.iter_batches(data))
    assert len(batches) == len(expected)
    assert batches[-1].position + batches[-1].size == len(data)
    for batch, want in zip(batches, expected):
        batch.validate(deep=True)
        assert batch.magic == want["magic"]
        assert batch.compression is Compression.parse(want["compression"])
        assert (batch.base_offset, batch.last_offset) == (want["base_offset"], want["last_offset"])
        assert batch.max_timestamp == want["max_timestamp"]
        assert batch.timestamp_type is TimestampType(want["timestamp_type"])
        assert batch.record_count == want["record_count"]
        for field in ("partition_leader_epoch", "producer_id", "producer_epoch", "base_sequence", "is_transactional",
                      "is_control"):
            if field in want:
                assert getattr(batch, field) == want[field], field
        got = [
            {"offset": r.offset, "timestamp": r.timestamp, "key": r.key, "value": r.value,
             "headers": [[k, v] for k, v in r.headers]}
            for r in batch.records()
        ]
        assert got == [
            {"offset": r["offset"], "timestamp": r["timestamp"], "key": _bytes(r["key"]), "value": _bytes(r["value"]),
             "headers": [[k, _bytes(v)] for k, v in r["headers"]]}
            for r in want["records"]
        ]
        assert batch.has_contiguous_offsets()
