"""The demo's source data: four topics, each written so that the mirror must take one routing path.

=====================  =================  ======  ===========  =====================================
topic                  producer           codec   partitions   why / expected routing class
=====================  =================  ======  ===========  =====================================
nokeys.kmirror         kmirror (kcodecs)  zstd,   3 -> 3       no-keys flag set: passed through
                                          lz4                  unopened, bytes identical
unkeyed.librdkafka     librdkafka         snappy  3 -> 2       no flag (librdkafka does not know it):
                                                               inspected, no keys, original bytes to
                                                               source partition mod 2
keyed.orders           librdkafka         lz4     4 -> 6       keys spread by librdkafka's CRC32
                                                               partitioner, destination has 6:
                                                               rebuilt by murmur2(key)
appendtime.events      librdkafka         gzip    2 -> 2       LogAppendTime; librdkafka's Java-
                       (murmur2_random)                        compatible partitioner: keys already
                                                               in place, inspected and forwarded; the
                                                               destination broker stamps new times
=====================  =================  ======  ===========  =====================================

"a -> b" partitions: source -> destination. The demo creates the destination topics whose
count differs from the source's; kmirror creates the others, copying their configs.

After filling, the codecs of the source batches are read back: some must use the codecs above
and none another one. librdkafka quietly writes every batch uncompressed when it thinks the
broker lacks a codec (for lz4 it looks for FindCoordinator in ApiVersions), and a demo that
does not show what it claims should stop. Single uncompressed batches are fine: librdkafka sends a batch
uncompressed when compressing would make it bigger (a one-record batch, say).
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Callable, Literal, Mapping

import kcodecs
from kcodecs import KMirrorError, Record

from ..kafka import KafkaClient, NewTopic, TopicPartition
from ..routing import RouteClass
from ..verify.demo_checks import RouteExpectation, read_batches

__all__ = ["DemoTopic", "DEMO_TOPICS", "DemoError", "fill_source", "create_destination_topics"]

Say = Callable[[str], None]

KMIRROR_BATCH_RECORDS = 250
"""Records per batch of the kmirror producer (fewer when filling only a few)."""
_PASSED = frozenset({RouteClass.PASSED_THROUGH})
_INSPECTED = frozenset({RouteClass.INSPECTED})
_SMALL_MERGED = frozenset({RouteClass.INSPECTED, RouteClass.COALESCED})
"""librdkafka's batches: opened; and any under ``coalesce_below_bytes`` (4 KiB) merged with the
small ones after them. librdkafka cuts a batch at ``linger.ms``, so how many come out small
depends on the machine's load while the demo fills: none on a quiet one, a few on a busy one."""


class DemoError(KMirrorError):
    """The demo could not set itself up (a producer failed, a dependency is missing)."""


@dataclass(frozen=True)
class DemoTopic:
    name: str
    partitions: int
    producer: Literal["kmirror", "librdkafka"]
    codecs: tuple[str, ...]
    routes: RouteExpectation
    why: str
    """What the mirror should do with the topic, and why (printed while filling)."""
    keys: int = 0
    """Distinct keys; 0 writes null keys."""
    destination_partitions: int | None = None
    """Created by the demo with this count; None leaves it to kmirror (source count and configs)."""
    configs: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    partitioner: str = "consistent_random"
    """librdkafka's ``partitioner``; its default hashes keys with CRC32, not Kafka's murmur2."""

    @property
    def passes_through(self) -> bool:
        """Every batch should be forwarded unopened, so the batch bytes are compared too."""
        return self.routes.allowed == _PASSED


DEMO_TOPICS: tuple[DemoTopic, ...] = (
    DemoTopic("nokeys.kmirror", 3, "kmirror", ("zstd", "lz4"), RouteExpectation(_PASSED, _PASSED),
              "kmirror's producer sets the no-keys flag: passed through unopened"),
    DemoTopic("unkeyed.librdkafka", 3, "librdkafka", ("snappy",), RouteExpectation(_SMALL_MERGED, _INSPECTED),
              "librdkafka sets no flag: opened, no keys, original bytes to source partition mod 2",
              destination_partitions=2),
    DemoTopic("keyed.orders", 4, "librdkafka", ("lz4",),
              RouteExpectation(_SMALL_MERGED | {RouteClass.REBUILT}, frozenset({RouteClass.REBUILT})),
              "keyed, 4 -> 6 partitions: rebuilt by murmur2(key)", keys=200, destination_partitions=6),
    DemoTopic("appendtime.events", 2, "librdkafka", ("gzip",), RouteExpectation(_SMALL_MERGED, _INSPECTED),
              "LogAppendTime, keys placed by librdkafka's murmur2: inspected, forwarded, re-stamped",
              keys=50, configs=MappingProxyType({"message.timestamp.type": "LogAppendTime"}), partitioner="murmur2_random"),
)


def create_destination_topics(destination: str, topics: tuple[DemoTopic, ...] = DEMO_TOPICS) -> None:
    """Pre-create the destination topics whose partition count must differ from the source's."""
    with KafkaClient(destination, client_id="kmirror-demo") as client:
        client.create_topics([NewTopic(t.name, t.destination_partitions) for t in topics if t.destination_partitions])


def fill_source(source: str, per_topic: int, *, start: int = 0, topics: tuple[DemoTopic, ...] = DEMO_TOPICS,
                say: Say = print) -> None:
    """Create the source topics (if missing) and append ``per_topic`` records to each, numbered
    from ``start`` so a second call extends the same per-key sequences."""
    with KafkaClient(source, client_id="kmirror-demo") as client:
        client.create_topics([NewTopic(t.name, t.partitions, configs=t.configs) for t in topics])
        for topic in topics:
            began = time.perf_counter()
            if topic.producer == "kmirror":
                _produce_kmirror(client, topic, start, per_topic)
            else:
                _produce_librdkafka(source, topic, start, per_topic)
            seconds = time.perf_counter() - began
            codecs = _codecs_written(source, topic)
            say(f"  {topic.name:<20} {per_topic} records by the {topic.producer} producer in {seconds:.1f} s; "
                f"{topic.partitions} partitions hold " + ", ".join(f"{n} {codec}" for codec, n in sorted(codecs.items()))
                + f" batches\n  {'':<20} expected: {topic.why}")
            if not set(codecs) & set(topic.codecs) or set(codecs) - {*topic.codecs, "none"}:
                raise DemoError(f"{topic.name} holds {'+'.join(sorted(codecs))} batches, not "
                                f"{'+'.join(topic.codecs)}: the producer or the broker chose another codec")


def _key_value(topic: DemoTopic, n: int) -> tuple[bytes | None, bytes]:
    """Record ``n`` of ``topic``: a key cycling over ``topic.keys`` (or null) and a JSON-ish
    value carrying the key's own sequence number, so per-key order is visible by eye."""
    if not topic.keys:
        return None, b'{"n":%d,"source":"%s","note":"unkeyed record %d of the demo"}' % (n, topic.producer.encode(), n)
    key = b"customer-%04d" % (n % topic.keys)
    return key, b'{"key":"%s","seq":%d,"amount":%d.%02d,"status":"placed"}' % (key, n // topic.keys, n * 37 % 1000, n % 100)


def _codecs_written(source: str, topic: DemoTopic) -> Counter[str]:
    """Batches per codec in the whole topic, read from the source log's batch headers."""
    return Counter(kcodecs.read_batch(batch).compression.name.lower()
                   for batches in read_batches(source, topic.name, topic.partitions).values() for batch in batches)


def _produce_kmirror(client: KafkaClient, topic: DemoTopic, start: int, count: int) -> None:
    """v2 batches built by kcodecs with the no-keys flag, codecs alternating, partitions round-robin;
    small fills get small batches, so every partition sees every codec when there are records enough."""
    size = max(1, min(KMIRROR_BATCH_RECORDS, -(-count // (topic.partitions * len(topic.codecs)))))
    pending: list[tuple[TopicPartition, bytes]] = []
    for index, first in enumerate(range(start, start + count, size)):
        now = int(time.time() * 1000)
        records = [Record(key=None, value=_key_value(topic, n)[1], timestamp=now,
                          headers=[("producer", b"kmirror"), ("n", b"%d" % n)])
                   for n in range(first, min(first + size, start + count))]
        batch = kcodecs.build_batch(records, compression=topic.codecs[index % len(topic.codecs)], mark_no_keys=True)
        pending.append((TopicPartition(topic.name, index % topic.partitions), batch))
        if len(pending) >= 4 * topic.partitions:
            client.produce(pending)
            pending = []
    if pending:
        client.produce(pending)


def _produce_librdkafka(source: str, topic: DemoTopic, start: int, count: int) -> None:
    try:
        from confluent_kafka import Producer
    except ImportError as exc:
        raise DemoError("the demo needs confluent-kafka (librdkafka) for three of its topics: "
                        "pip install 'kmirror[demo]' (./dev installs it)") from exc
    failures: list[str] = []

    def delivered(error, _message) -> None:
        if error is not None:
            failures.append(str(error))

    producer = Producer({"bootstrap.servers": source, "compression.type": topic.codecs[0], "linger.ms": 20,
                         "batch.num.messages": 500,  # several batches per partition even in small demos
                         "partitioner": topic.partitioner, "acks": "all", "client.id": "kmirror-demo"})
    for n in range(start, start + count):
        key, value = _key_value(topic, n)
        while True:
            try:
                producer.produce(topic.name, value=value, key=key, headers=[("producer", b"librdkafka")],
                                 on_delivery=delivered)
                break
            except BufferError:  # local queue full: let deliveries drain it
                producer.poll(0.1)
        producer.poll(0)
    left = producer.flush(60)
    if left or failures:
        raise DemoError(f"librdkafka could not write {topic.name}: {left} records undelivered, "
                        f"{len(failures)} failed{': ' + failures[0] if failures else ''}")
