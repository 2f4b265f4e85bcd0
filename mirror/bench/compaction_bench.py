"""``kmirror bench broker --compaction``: how fast the embedded broker's log cleaner compacts.

The data is a changelog as users have them: the bench's keyed events (1 KiB JSON-like
values, keyed by one of 50,000 users, so later updates supersede about half the records),
in lz4 batches filled as Java's producer fills ``batch.size`` (``--batch-kib``, 16 KiB),
appended through the broker's real append path to one compacted partition with 16 MiB
segments. Then the cleaner runs, in this process, until nothing is dirty; the report gives
MB/s of log cleaned (bytes before the clean over its time), records/s, keys, the size after,
and the offset map's memory.

Beside it, as a reference measured in the same run: decoding every record of the same log
once with kcodecs. The cleaner reads each dirty batch twice (its keys alone, values
skipped, for the offset map; then in full, to filter it), looks every key up in the map,
and writes and recompresses what it keeps, so it cannot reach the decode rate. ``--profile`` prints where the clean's time goes.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import tempfile
import time
from pathlib import Path

from kcodecs import Compression

from ..broker.cleaner import CleanerConfig, CleanStats, LogCleaner
from ..broker.topics import TopicStore
from .datagen import DataSpec, Layout, build_dataset

__all__ = ["run"]

MiB = 1024 * 1024
_RECORD_BYTES = 1024
_SEGMENT_BYTES = 16 * MiB


def run(args: argparse.Namespace) -> int:
    total = (32 if args.quick else args.total_mb) * MiB
    spec = DataSpec(Compression.LZ4, _RECORD_BYTES, total, batch_bytes=args.batch_kib * 1024, keyed_ratio=1.0)
    dataset = build_dataset(spec, Layout.KEYED)
    print(f"compaction bench: {len(dataset.batches)} lz4 batches of {dataset.mean_batch_bytes / 1024:.1f} KiB on average"
          f" (--batch-kib {args.batch_kib}, {_RECORD_BYTES} B records keyed by user), one partition, "
          f"{_SEGMENT_BYTES // MiB} MiB segments", flush=True)
    with tempfile.TemporaryDirectory(prefix="kmirror-bench-") as tmp:
        store = TopicStore(Path(tmp))
        partition = store.create("changelog", 1, {"cleanup.policy": "compact", "segment.bytes": str(_SEGMENT_BYTES),
                                                  "min.cleanable.dirty.ratio": "0.01"}).partitions[0]
        now = int(time.time() * 1000)
        for _, data in dataset.batches:
            partition.append(data, now)
        log_bytes = partition.log.size_bytes
        decode_s, records = _decode_all(partition.log)
        print(f"  log      {log_bytes / MiB:7.1f} MiB, {records:,} records in {len(partition.log.segment_base_offsets)}"
              f" segments", flush=True)
        cleaner = LogCleaner(store, CleanerConfig(enable=False), lambda: int(time.time() * 1000))
        profiler = cProfile.Profile()
        rounds: list[CleanStats] = []
        started = time.perf_counter()
        if args.profile:
            profiler.enable()
        while (stats := cleaner.clean_once()) is not None:
            rounds.append(stats)
        if args.profile:
            profiler.disable()
        seconds = time.perf_counter() - started
        store.close()
    cleaned = sum(r.bytes_before for r in rounds)
    after = rounds[-1].bytes_after if rounds else log_bytes
    print(f"  decode   {log_bytes / MiB / decode_s:7.1f} MB/s  {records / decode_s:11,.0f} records/s"
          f"  (every record of the log decoded once by kcodecs: the reference)")
    print(f"  clean    {cleaned / MiB / seconds:7.1f} MB/s  {sum(r.records_read for r in rounds) / seconds:11,.0f} records/s"
          f"  ({len(rounds)} round(s), {cleaned / MiB:.1f} MiB cleaned -> {after / MiB:.1f} MiB,"
          f" {max((r.keys for r in rounds), default=0):,} keys, offset map {max((r.map_bytes for r in rounds), default=0) / MiB:.1f} MiB)")
    print(f"  ratio    clean / decode = {(cleaned / seconds) / (log_bytes / decode_s):.2f}"
          f"  (the cleaner reads each dirty batch twice: keys, then records)")
    if args.profile:
        out = io.StringIO()
        pstats.Stats(profiler, stream=out).sort_stats("tottime").print_stats(20)
        print(f"\ncleaner profile (tottime):\n{out.getvalue()}")
    return 0


def _decode_all(log_) -> tuple[float, int]:
    """Seconds to decode every record of ``log_`` once, and how many there are."""
    started = time.perf_counter()
    records = 0
    for batch in log_.batch_headers():
        records += sum(1 for _ in batch.records())
    return time.perf_counter() - started, records
