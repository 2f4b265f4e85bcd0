"""The processes of a replication-latency run: a steady producer shaped like Java's, a
read_committed consumer that times every record's arrival, and the consumer -> producer loop
that MirrorMaker 2's data path is. Each runs in a process of its own (``multiprocessing``,
spawned), so none shares a GIL or a CPU count with the mirror under test.

The producer is librdkafka configured as Java's producer ships (Kafka 4.x): ``batch.size``
16 KiB, ``linger.ms`` 5 (KIP-1081), ``acks=all``, idempotence on, sticky partitioning of
unkeyed records, and the run's codec. Records are created at a steady rate in 10 ms ticks;
their CreateTime is when ``produce()`` was called, which is what the consumer subtracts from
the time it reads them.
"""

from __future__ import annotations

import contextlib
import os
import random
import time
from dataclasses import dataclass
from pathlib import Path

__all__ = ["LoadSpec", "produce_steadily", "measure_latency", "loop_mirror", "record_values"]

TICK_S = 0.01


@dataclass(frozen=True)
class LoadSpec:
    bootstrap: str
    topic: str
    rate: int
    """Records per second."""
    record_bytes: int
    codec: str
    seconds: float
    window_ms: tuple[int, int] = (0, 0)
    """Records created in ``[from, until)`` ms have their own produce latency written down."""
    acks_path: str | None = None
    """Where the producer writes, one a line, the ms from each such record's CreateTime to the
    source's acknowledgement: the floor no mirror can go under (None: not written)."""
    commit_interval_s: float | None = None
    """Transactional: a transaction committed this often (a bare transactional producer, Kafka's
    own floor for exactly-once); None: idempotent, no transactions."""


def record_values(record_bytes: int, count: int = 256, seed: int = 7) -> list[bytes]:
    """Values that compress about as log lines do (words from a small vocabulary), not random bytes."""
    rng = random.Random(seed)
    words = [bytes(rng.choice(b"abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(3, 9))) for _ in range(400)]
    values = []
    for _ in range(count):
        value = bytearray()
        while len(value) < record_bytes:
            value += rng.choice(words) + b" "
        values.append(bytes(value[:record_bytes]))
    return values


def produce_steadily(spec: LoadSpec, stop_at: float | None = None) -> int:
    """Produce ``spec.rate`` records a second for ``spec.seconds``; return how many were delivered."""
    from confluent_kafka import Producer

    config = {"bootstrap.servers": spec.bootstrap, "compression.type": spec.codec, "linger.ms": 5,
              "batch.size": 16384, "acks": "all", "enable.idempotence": True}
    transactional = spec.commit_interval_s is not None
    if transactional:
        config["transactional.id"] = f"latency-floor-{os.getpid()}"
    producer = Producer(config)
    if transactional:
        producer.init_transactions(60)
        producer.begin_transaction()
        committed_at = time.monotonic()
    values = record_values(spec.record_bytes)
    delivered = [0]
    acked: list[float] = []
    since, until = spec.window_ms

    def on_delivery(error, message) -> None:
        if error is None:
            delivered[0] += 1
            created = message.timestamp()[1]
            if since <= created < until:
                acked.append(time.time() * 1000 - created)

    began = time.monotonic()
    sent = 0
    end = began + spec.seconds
    while True:
        now = time.monotonic()
        if now >= end:
            break
        due = int((now - began) * spec.rate)
        while sent < due:
            try:
                producer.produce(spec.topic, values[sent % len(values)], on_delivery=on_delivery)
                sent += 1
            except BufferError:
                producer.poll(0.005)
        producer.poll(0)
        if transactional and time.monotonic() - committed_at >= spec.commit_interval_s:
            producer.commit_transaction(60)  # flushes; records wait for it as a mirror's do
            producer.begin_transaction()
            committed_at = time.monotonic()
        time.sleep(max(0.0, TICK_S - (time.monotonic() - now)))
    if transactional:
        producer.commit_transaction(60)
    producer.flush(60)
    if spec.acks_path is not None:
        with open(spec.acks_path, "w") as out:
            out.writelines(f"{latency:.2f}\n" for latency in acked)
    return delivered[0]


def measure_latency(bootstrap: str, topic: str, partitions: int, from_ms: int, until_ms: int, expected: int,
                    timeout_s: float, out_path: str, expected_path: str | None = None) -> None:
    """Read ``topic`` as a read_committed consumer from the start, and write one latency in ms per
    line to ``out_path`` for every record created in ``[from_ms, until_ms)``: arrival - CreateTime;
    then ``# seen N``, the records read in all. Stops once ``expected`` records in all were read,
    or after ``timeout_s``. Once the file ``expected_path`` exists, the number it holds replaces
    ``expected`` (the load's producer knows how many it wrote only when it is done)."""
    from confluent_kafka import Consumer
    from confluent_kafka import TopicPartition as CTP

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"latency-{os.getpid()}",
                         "isolation.level": "read_committed", "enable.auto.commit": False,
                         "fetch.wait.max.ms": 10, "fetch.min.bytes": 1})
    consumer.assign([CTP(topic, p, 0) for p in range(partitions)])
    seen = 0
    deadline = time.monotonic() + timeout_s
    looked = time.monotonic()
    with open(out_path, "w") as out:
        while seen < expected and time.monotonic() < deadline:
            if expected_path is not None and time.monotonic() - looked > 0.5:
                looked = time.monotonic()
                with contextlib.suppress(OSError, ValueError):
                    expected = int(Path(expected_path).read_text())
            # poll(), not consume(n): consume waits for n messages or its timeout, and a record
            # it holds back would be timed late.
            message = consumer.poll(0.1)
            if message is None or message.error():
                continue
            now_ms = time.time() * 1000
            seen += 1
            created = message.timestamp()[1]
            if from_ms <= created < until_ms:
                out.write(f"{now_ms - created:.2f}\n")
        out.write(f"# seen {seen}\n")
    consumer.close()


def loop_mirror(source: str, destination: str, topic: str, destination_topic: str, codec: str,
                seconds: float, ready_path: str) -> None:
    """MirrorMaker 2's data path in librdkafka: consume (read_committed, as MM2's source
    consumer with exactly-once support), produce each record to the same partition with its
    timestamp, producer as Java's defaults. Runs for ``seconds``; touches ``ready_path`` once
    assigned."""
    from confluent_kafka import Consumer, Producer

    consumer = Consumer({"bootstrap.servers": source, "group.id": "latency-loop", "auto.offset.reset": "earliest",
                         "enable.auto.commit": False, "isolation.level": "read_committed",
                         "fetch.wait.max.ms": 10, "fetch.min.bytes": 1})
    producer = Producer({"bootstrap.servers": destination, "compression.type": codec, "linger.ms": 5,
                         "batch.size": 16384, "acks": "all", "enable.idempotence": True})
    consumer.subscribe([topic])
    end = time.monotonic() + seconds
    ready = False
    while time.monotonic() < end:
        message = consumer.poll(0.1)  # one at a time: consume(n) would hold records back for n
        if message is not None and not message.error():
            while True:
                try:
                    producer.produce(destination_topic, message.value(), message.key(), partition=message.partition(),
                                     timestamp=message.timestamp()[1], headers=message.headers())
                    break
                except BufferError:
                    producer.poll(0.005)
        producer.poll(0)
        if not ready and consumer.assignment():
            open(ready_path, "w").close()
            ready = True
    producer.flush(30)
    consumer.close()

