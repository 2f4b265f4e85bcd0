"""``kmirror bench broker``: produce and fetch throughput of the embedded broker, and its cost per batch.

One client writes batches the way a Java producer with default settings fills them (lz4,
1 KiB records, ``--batch-kib`` stored, 16 KiB by default as Java's ``batch.size``) to
``--partitions`` partitions through kmirror's own idempotent producer: one batch per
partition per Produce request, five requests in flight on one connection. Then it fetches
everything back with kmirror's fetcher, one Fetch for all partitions at a time. What is
measured is mostly the broker (validation, offset and CRC patches, producer state, the log
write per batch; the index look-up and file slice per fetched partition): the client is the
mirror's data plane, which hands buffers to the socket without copying them.

At small batches the broker's work per batch, not per byte, sets the pace, so the report
gives batches/s and microseconds per batch beside MB/s. ``--profile`` runs the broker in
this process under cProfile and prints where its time goes in each phase.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from kcodecs import Compression, iter_batches, read_batch

from ..broker import BrokerProcess, EmbeddedBroker
from ..kafka import FetchedData, Fetcher, IdempotentProducer, KafkaClient, NewTopic, TopicPartition, wait_readable
from . import compaction_bench
from .datagen import DataSpec, Layout, build_dataset

TOPIC = "bench"
MiB = 1024 * 1024
FETCH_MAX_BYTES = 8 * MiB
_RECORD_BYTES = 1024
_HIGH_WATER_BYTES = 16 * MiB
"""Produce: enqueue until this much is unacknowledged, then let answers drain it."""


@dataclass(frozen=True)
class Phase:
    """One timed phase: produce or fetch."""

    name: str
    seconds: float
    wire_bytes: int
    batches: int
    records: int

    def line(self) -> str:
        return (f"  {self.name:<8} {self.wire_bytes / MiB / self.seconds:7.1f} MB/s on the wire  "
                f"{self.batches / self.seconds:9,.0f} batches/s  {self.seconds / self.batches * 1e6:6.1f} us/batch  "
                f"{self.records / self.seconds:11,.0f} records/s")


def produce_all(client: KafkaClient, batches: tuple[tuple[int, bytes], ...], record_counts: list[int]) -> float:
    """Every batch through one idempotent producer; seconds until the last is acknowledged."""
    producer = IdempotentProducer(client)
    try:
        start = time.perf_counter()
        for (partition, data), records in zip(batches, record_counts):
            # The producer stamps its sequence into the buffer: a copy per batch (a memcpy).
            producer.enqueue(TopicPartition(TOPIC, partition), bytearray(data), records)
            while producer.buffered_bytes > _HIGH_WATER_BYTES:
                producer.poll(0.1)
        producer.flush()
        return time.perf_counter() - start
    finally:
        producer.close()


def fetch_all(client: KafkaClient, end_offsets: list[int]) -> tuple[float, int]:
    """Everything back from offset 0, all partitions in each fetch; (seconds, bytes fetched)."""
    offsets = {TopicPartition(TOPIC, p): 0 for p in range(len(end_offsets))}
    fetcher = Fetcher(client, max_bytes=FETCH_MAX_BYTES, max_wait_ms=0)
    fetched = 0
    start = time.perf_counter()
    try:
        while any(offsets[tp] < end_offsets[tp.partition] for tp in offsets):
            fetcher.send({tp: o for tp, o in offsets.items() if o < end_offsets[tp.partition]})
            for conn in wait_readable(fetcher.connections(), 1.0):
                for tp, outcome in fetcher.on_readable(conn).items():
                    if not isinstance(outcome, FetchedData):
                        raise RuntimeError(f"fetch of {tp} failed: {outcome}")
                    fetched += len(outcome.records)
                    offsets[tp] = _next_offset(outcome, offsets[tp])
    finally:
        fetcher.close()
    return time.perf_counter() - start, fetched


def _next_offset(fetched: FetchedData, offset: int) -> int:
    """After the last complete batch (header-only: nothing is decompressed)."""
    for batch in iter_batches(fetched.records):
        offset = batch.next_offset
    return offset


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--total-mb", type=int, default=128, help="megabytes of record data (default 128)")
    parser.add_argument("--quick", action="store_true", help="32 MB")
    parser.add_argument("--batch-kib", type=int, default=16,
                        help="stored (lz4) batch size in KiB, filled as Java's producer fills batch.size (default 16)")
    parser.add_argument("--partitions", type=int, default=4, help="partitions written and read together (default 4)")
    parser.add_argument("--profile", action="store_true",
                        help="run the broker in-process and print a cProfile of each phase")
    parser.add_argument("--compaction", action="store_true",
                        help="measure the log cleaner instead: MB/s of a keyed changelog compacted, beside "
                             "kcodecs decoding the same log (see docs/broker.md, Log compaction)")


def run(args: argparse.Namespace) -> int:
    if args.batch_kib < 1 or args.partitions < 1:
        raise SystemExit("--batch-kib and --partitions must be at least 1")
    if args.compaction:
        return compaction_bench.run(args)
    total = (32 if args.quick else args.total_mb) * MiB
    spec = DataSpec(Compression.LZ4, _RECORD_BYTES, total, batch_bytes=args.batch_kib * 1024, partitions=args.partitions)
    dataset = build_dataset(spec, Layout.UNFLAGGED)
    counts = [read_batch(data).record_count for _, data in dataset.batches]
    print(f"broker bench: {len(dataset.batches)} lz4 batches of {dataset.mean_batch_bytes / 1024:.1f} KiB on average "
          f"(--batch-kib {args.batch_kib}, {_RECORD_BYTES} B records, {sum(counts) / len(counts):.0f} per batch) over "
          f"{args.partitions} partitions; one client, idempotent, 5 requests in flight", flush=True)
    phases: list[Phase] = []
    profiles: list[tuple[str, str]] = []
    with tempfile.TemporaryDirectory(prefix="kmirror-bench-") as tmp:
        broker = EmbeddedBroker(Path(tmp)) if args.profile else BrokerProcess(Path(tmp))
        broker.start()
        try:
            with KafkaClient(broker.bootstrap) as client:
                client.create_topics([NewTopic(TOPIC, args.partitions)])
                with _profiled(broker, args.profile, "produce", profiles):
                    seconds = produce_all(client, dataset.batches, counts)
                phases.append(Phase("produce", seconds, dataset.wire_bytes, len(counts), sum(counts)))
                ends = list(dataset.end_offsets(args.partitions))
                with _profiled(broker, args.profile, "fetch", profiles):
                    seconds, fetched = fetch_all(client, ends)
                phases.append(Phase("fetch", seconds, fetched, len(counts), sum(counts)))
        finally:
            broker.stop() if args.profile else broker.terminate()
    for phase in phases:
        print(phase.line(), flush=True)
    for name, text in profiles:
        print(f"\nbroker profile, {name} phase (cumulative):\n{text}")
    return 0


class _profiled:
    """cProfile of the in-process broker's event loop thread for one phase."""

    def __init__(self, broker, enabled: bool, name: str, into: list[tuple[str, str]]):
        self.broker, self.enabled, self.name, self.into = broker, enabled, name, into
        self.profiler = cProfile.Profile()

    def __enter__(self) -> None:
        if self.enabled:
            self.broker.call_in_loop(self.profiler.enable)

    def __exit__(self, *exc_info) -> None:
        if self.enabled:
            self.broker.call_in_loop(self.profiler.disable)
            out = io.StringIO()
            pstats.Stats(self.profiler, stream=out).sort_stats("tottime").print_stats(20)
            self.into.append((self.name, out.getvalue()))
