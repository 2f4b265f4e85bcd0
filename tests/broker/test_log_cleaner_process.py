"""SIGKILL a broker process while its cleaner compacts and a producer writes, several times:
after each restart every key's latest acknowledged record (or a later one) is still there.
The in-process test_log_cleaner_crash.py kills a clean at every file change in turn; this one
kills a real process at moments nobody chose."""

from __future__ import annotations

import random
import threading
import time

import pytest
from confluent_kafka import Producer
from librdkafka_reader import read_values

from mirror.broker import BrokerProcess

from broker_helpers import TIMEOUT_S, create_topic

pytestmark = [pytest.mark.slow, pytest.mark.interop]

TOPIC = "state"
KEYS = 40


class Writer(threading.Thread):
    """Updates random keys until stopped; remembers the offset of every acknowledged one."""

    def __init__(self, bootstrap: str, seed: int):
        super().__init__(daemon=True)
        self.producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 1, "batch.num.messages": 6,
                                  "compression.type": "lz4", "message.timeout.ms": 5000})
        self.rng = random.Random(seed)
        self.acked: dict[bytes, int] = {}
        self.stop = threading.Event()

    def _delivered(self, err, message) -> None:
        if err is None:
            key = message.key()
            self.acked[key] = max(self.acked.get(key, -1), message.offset())

    def run(self) -> None:
        n = 0
        while not self.stop.is_set():
            key = b"key-%d" % self.rng.randrange(KEYS)
            value = None if self.rng.random() < 0.05 else b"v%d-" % n + bytes(60)
            try:
                self.producer.produce(TOPIC, key=key, value=value, on_delivery=self._delivered)
            except BufferError:
                pass
            self.producer.poll(0.001)
            n += 1

    def finish(self) -> None:
        self.stop.set()
        self.join(TIMEOUT_S)
        self.producer.flush(10)


def latest_offsets(bootstrap: str) -> dict[bytes, int]:
    """Each key's last offset in the log, as librdkafka reads it."""
    return {key: offset for offset, key in read_values(bootstrap, TOPIC, 1, isolation="read_uncommitted",
                                                       take=lambda m: (m.offset(), m.key()))[0]}


def test_sigkill_during_compaction_keeps_every_key_latest_record(tmp_path):
    args = ("--cleaner-backoff-ms", "5")
    broker = BrokerProcess(tmp_path, extra_args=args).start()
    create_topic(broker.bootstrap, TOPIC, 1, **{"cleanup.policy": "compact", "segment.bytes": "3000",
                                                "min.cleanable.dirty.ratio": "0.01"})
    acked: dict[bytes, int] = {}
    cleans = 0
    rng = random.Random(5)
    try:
        for round_ in range(4):
            writer = Writer(broker.bootstrap, seed=round_)
            writer.start()
            time.sleep(rng.uniform(0.8, 2.0))
            broker.kill()
            cleans += sum("cleaned state-0" in line for line in broker.log_lines)
            writer.finish()
            for key, offset in writer.acked.items():
                acked[key] = max(acked.get(key, -1), offset)
            broker = BrokerProcess(tmp_path, port=broker.port, extra_args=args).start()
        survivors = latest_offsets(broker.bootstrap)
    finally:
        broker.kill()
    assert acked, "nothing was acknowledged"
    assert cleans >= 4, "the cleaner hardly ran: the kills tested nothing"
    for key, offset in acked.items():
        # Its last acknowledged record, or a later one of the same key (written, its answer lost to the kill).
        assert survivors.get(key, -1) >= offset, f"{key!r}: acknowledged at {offset}, latest in the log {survivors.get(key)}"
