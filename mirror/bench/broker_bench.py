"""``kmirror bench broker``: produce and fetch throughput of the embedded broker, one client.

The client sends pre-built 64 KiB lz4 batches over one connection (acks=1) and then
fetches them back from offset 0, so what is measured is the broker: validation, offset
and CRC work per batch, the log write, and the index look-up plus file slice per fetch.
``--profile`` runs the broker in this process under cProfile during the fetch phase and
prints where its time goes, which shows the fetch path calls no per-record code.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import tempfile
import time
from pathlib import Path

from kafka.protocol.admin import CreateTopicsRequest
from kafka.protocol.consumer import FetchRequest
from kafka.protocol.producer import ProduceRequest

import kcodecs
from kcodecs import Compression

from ..broker import BrokerProcess, EmbeddedBroker
from ..kafka import KafkaConnection
from .codecs_bench import MiB, batch_of_compressed_size

TOPIC = "bench"
FETCH_MAX_BYTES = 8 * MiB


def create_topic(conn: KafkaConnection) -> None:
    topic = CreateTopicsRequest.CreatableTopic(name=TOPIC, num_partitions=1, replication_factor=1, assignments=[], configs=[])
    (result,) = conn.call(CreateTopicsRequest(topics=[topic], timeout_ms=10_000, validate_only=False), version=5).topics
    if result.error_code not in (0, 36):
        raise RuntimeError(f"cannot create the bench topic: {result.error_message}")


def produce_all(conn: KafkaConnection, batch: bytes, count: int) -> float:
    data = ProduceRequest.TopicProduceData
    start = time.perf_counter()
    for _ in range(count):
        request = ProduceRequest(transactional_id=None, acks=1, timeout_ms=30_000, topic_data=[
            data(name=TOPIC, partition_data=[data.PartitionProduceData(index=0, records=batch)])])
        (topic,) = conn.call(request, version=9).responses
        if topic.partition_responses[0].error_code:
            raise RuntimeError(f"produce failed: {topic.partition_responses[0].error_message}")
    return time.perf_counter() - start


def fetch_all(conn: KafkaConnection, end_offset: int) -> tuple[float, int]:
    offset, fetched = 0, 0
    start = time.perf_counter()
    while offset < end_offset:
        part = FetchRequest.FetchTopic.FetchPartition(partition=0, fetch_offset=offset, log_start_offset=-1,
                                                      partition_max_bytes=FETCH_MAX_BYTES)
        request = FetchRequest(replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=FETCH_MAX_BYTES, isolation_level=0,
                               session_id=0, session_epoch=-1, topics=[FetchRequest.FetchTopic(topic=TOPIC, partitions=[part])],
                               forgotten_topics_data=[], rack_id="")
        records = conn.call(request, version=11).responses[0].partitions[0].records
        fetched += len(records)
        batches = list(kcodecs.iter_batches(records))  # header-only: find where to continue
        if not batches:
            raise RuntimeError(f"fetch at offset {offset} returned no complete batch")
        offset = batches[-1].next_offset
    return time.perf_counter() - start, fetched


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--total-mb", type=int, default=256, help="megabytes to produce and fetch (default 256)")
    parser.add_argument("--quick", action="store_true", help="32 MB")
    parser.add_argument("--profile", action="store_true",
                        help="run the broker in-process and print a cProfile of its fetch path")


def run(args: argparse.Namespace) -> int:
    total = (32 if args.quick else args.total_mb) * MiB
    batch = batch_of_compressed_size(Compression.LZ4, 64 * 1024, record_bytes=200)
    count = max(1, total // len(batch))
    records = kcodecs.read_batch(batch).record_count or 0
    print(f"broker bench: {count} lz4 batches of {len(batch) / 1024:.0f} KiB ({records} records each), one client", flush=True)
    with tempfile.TemporaryDirectory(prefix="kmirror-bench-") as tmp:
        broker = EmbeddedBroker(Path(tmp)) if args.profile else BrokerProcess(Path(tmp))
        broker.start()
        try:
            with KafkaConnection(broker.bootstrap) as conn:
                create_topic(conn)
                produce_s = produce_all(conn, batch, count)
                profiler = cProfile.Profile()
                if args.profile:
                    broker._loop.call_soon_threadsafe(profiler.enable)
                fetch_s, fetched = fetch_all(conn, count * records)
                if args.profile:
                    broker._loop.call_soon_threadsafe(profiler.disable)
        finally:
            broker.stop() if args.profile else broker.terminate()
    wire = count * len(batch)
    print(f"  produce  {wire / MiB / produce_s:8.1f} MB/s on the wire   {count * records / produce_s:12,.0f} records/s", flush=True)
    print(f"  fetch    {fetched / MiB / fetch_s:8.1f} MB/s on the wire   {count * records / fetch_s:12,.0f} records/s", flush=True)
    if args.profile:
        out = io.StringIO()
        pstats.Stats(profiler, stream=out).sort_stats("cumulative").print_stats(18)
        print(out.getvalue())
    return 0
