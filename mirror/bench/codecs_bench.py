"""``kmirror bench codecs``: what skipping decompression buys, at the level of bytes.

Two comparisons, each measured interleaved in one run:

* header-only iteration over a buffer of 16 KiB lz4 batches vs decoding every record of
  the same buffer (target: >= 50x);
* LogAppendTime stamping of a 1 MiB zstd batch (patch + CRC-32C) vs the decompress +
  recompress a broker without KIP-31/32 would do (target: >= 20x).
"""

from __future__ import annotations

import argparse
import random
from dataclasses import dataclass

import kcodecs
from kcodecs import Compression, Record

from .timing import Timing, interleaved, ratio

MiB = 1024 * 1024
_WORDS = [bytes(random.Random(i).choices(b"abcdefghijklmnopqrstuvwxyz", k=random.Random(i).randint(3, 9))) for i in range(512)]


def sample_value(rng: random.Random, size: int) -> bytes:
    """Text-like bytes that compress about as well as typical JSON payloads (2-4x)."""
    out = bytearray()
    while len(out) < size:
        out += rng.choice(_WORDS) + b" " + str(rng.randint(0, 10**6)).encode() + b","
    return bytes(out[:size])


def batch_of_compressed_size(codec: Compression, target: int, record_bytes: int, seed: int = 1) -> bytes:
    """One v2 batch whose compressed size is at least ``target`` bytes."""
    rng = random.Random(seed)
    records: list[Record] = []
    step = 64
    while True:
        records.extend(
            Record(value=sample_value(rng, record_bytes), timestamp=1_700_000_000_000 + len(records) + i) for i in range(step)
        )
        data = kcodecs.build_batch(records, compression=codec)
        if len(data) >= target:
            return data
        step = max(16, int(len(records) * (target / len(data) - 1)) + 1)


def tile(batch: bytes, total: int) -> bytearray:
    """Repeat ``batch`` up to ``total`` bytes, giving each copy the next offsets (a log-like buffer)."""
    copies = max(1, total // len(batch))
    count = kcodecs.read_batch(batch).record_count or 1
    out = bytearray(batch * copies)
    view = memoryview(out)
    for i in range(copies):
        kcodecs.set_base_offset(view[i * len(batch) : (i + 1) * len(batch)], i * count)
    return out


def header_scan(buffer: bytearray) -> int:
    seen = 0
    for batch in kcodecs.iter_batches(buffer):
        seen += batch.last_offset - batch.base_offset + 1
        _ = (batch.compression, batch.max_timestamp, batch.has_no_keys_flag, batch.is_control)
    return seen


def full_decode(buffer: bytearray) -> int:
    seen = 0
    for batch in kcodecs.iter_batches(buffer):
        for _ in batch.records():
            seen += 1
    return seen


@dataclass(frozen=True)
class Comparison:
    title: str
    fast: Timing
    slow: Timing
    amount: int
    target: float

    @property
    def speedup(self) -> float:
        return ratio(self.fast, self.slow)

    def lines(self) -> list[str]:
        verdict = "meets" if self.speedup >= self.target else "MISSES"
        return [
            self.title,
            f"  {self.fast.name:<28} {self.fast.rate(self.amount) / MiB:>10.1f} MB/s   (median of {self.fast.repeats})",
            f"  {self.slow.name:<28} {self.slow.rate(self.amount) / MiB:>10.1f} MB/s",
            f"  speed-up {self.speedup:,.1f}x  ({verdict} the {self.target:.0f}x target)",
        ]


def compare_iteration(total: int, repeats: int) -> Comparison:
    buffer = tile(batch_of_compressed_size(Compression.LZ4, 16 * 1024, record_bytes=100), total)
    if header_scan(buffer) != full_decode(buffer):
        raise RuntimeError("header-only and full decoding disagree on the record count")
    timings = interleaved({"header-only iteration": lambda: header_scan(buffer), "full record decoding": lambda: full_decode(buffer)}, repeats)
    return Comparison(
        f"Iterating {len(buffer) / MiB:.0f} MiB of 16 KiB lz4 batches",
        timings["header-only iteration"], timings["full record decoding"], len(buffer), target=50,
    )


def compare_stamping(repeats: int) -> Comparison:
    original = batch_of_compressed_size(Compression.ZSTD, MiB, record_bytes=1000)
    stamped = bytearray(original)
    clock = iter(range(1_800_000_000_000, 1 << 62))

    def stamp() -> None:
        for _ in range(10):
            kcodecs.set_log_append_time(stamped, next(clock))

    def recompress() -> None:
        for _ in range(10):
            payload = kcodecs.decompress(Compression.ZSTD, memoryview(original)[61:])
            rebuilt = bytearray(original[:61]) + kcodecs.compress(Compression.ZSTD, payload)
            kcodecs.set_log_append_time(rebuilt, next(clock))

    timings = interleaved({"in-place LogAppendTime": stamp, "decompress + recompress": recompress}, repeats)
    return Comparison(
        f"LogAppendTime on a {len(original) / MiB:.1f} MiB zstd batch (x10 per round)",
        timings["in-place LogAppendTime"], timings["decompress + recompress"], 10 * len(original), target=20,
    )


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--quick", action="store_true", help="8 MiB instead of 64 MiB and 3 repeats instead of 5")
    parser.add_argument("--repeats", type=int, default=None, help="rounds per comparison (median reported)")


def run(args: argparse.Namespace) -> int:
    repeats = args.repeats or (3 if args.quick else 5)
    total = (8 if args.quick else 64) * MiB
    print(f"kcodecs microbenchmark: {repeats} interleaved rounds per comparison", flush=True)
    for comparison in (compare_iteration(total, repeats), compare_stamping(repeats)):
        print("\n".join(comparison.lines()), flush=True)
    return 0
