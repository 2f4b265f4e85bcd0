"""A fetcher following many partitions, as a resident copier's loop turns it, and what each of
its fetches named and each answer carried, counted on the client's side of the wire: the
tests of fetch sessions (KIP-227) against the embedded broker and against real Kafka."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable

import kcodecs
from kcodecs import Record
from mirror.kafka import Fetcher, KafkaClient, TopicPartition, wait_readable
from mirror.kafka import fetcher as fetcher_module


@dataclass
class Sent:
    """One fetch request: its session id and epoch, the partitions it named and forgot."""

    session_id: int
    epoch: int
    named: int
    forgotten: int


@dataclass
class Answered:
    """One fetch answer: its error, its session id, the partitions it carried."""

    error_code: int
    session_id: int
    partitions: int


@dataclass
class Fetches:
    sent: list[Sent]
    answered: list[Answered]

    def mark(self) -> tuple[int, int]:
        """Where the lists are now, to look at what comes after."""
        return len(self.sent), len(self.answered)


def count_fetches(monkeypatch) -> Fetches:
    """Every fetch the fetcher encodes from now on, and every answer it decodes."""
    fetches = Fetches([], [])
    encode, decode = fetcher_module.encode_fetch_request, fetcher_module.decode_fetch_response

    def encoded(positions, **fields):
        fetches.sent.append(Sent(fields.get("session_id", 0), fields.get("session_epoch", -1), len(positions),
                                 len(fields.get("forgotten", ()))))
        return encode(positions, **fields)

    def decoded(body, version, topic_names=None):
        response = decode(body, version, topic_names)
        fetches.answered.append(Answered(response.error_code, response.session_id, len(response.partitions)))
        return response

    monkeypatch.setattr(fetcher_module, "encode_fetch_request", encoded)
    monkeypatch.setattr(fetcher_module, "decode_fetch_response", decoded)
    return fetches


class Follower:
    """Follows every partition of ``topic`` from offset 0: partitions being fetched wait, the
    others are asked for at their next offset; the values read, per partition."""

    def __init__(self, client: KafkaClient, topic: str, partitions: int):
        self.fetcher = Fetcher(client, max_bytes=256 * 1024, max_wait_ms=200)
        self.offsets = {TopicPartition(topic, p): 0 for p in range(partitions)}
        self.values: dict[int, list[bytes]] = {p: [] for p in range(partitions)}

    def turn(self) -> None:
        wanted = {tp: offset for tp, offset in self.offsets.items() if not self.fetcher.fetching(tp)}
        self.fetcher.send(wanted)
        for conn in wait_readable(self.fetcher.connections(), 0.5):
            for tp, fetched in self.fetcher.on_readable(conn).items():
                for batch in kcodecs.iter_batches(fetched.records):
                    for record in batch.records():
                        if record.offset >= self.offsets[tp]:
                            self.values[tp.partition].append(bytes(record.value))
                    self.offsets[tp] = batch.last_offset + 1

    def until(self, done: Callable[[], bool], timeout_s: float = 30) -> None:
        deadline = time.monotonic() + timeout_s
        while not done():
            assert time.monotonic() < deadline, "the fetcher did not get there"
            self.turn()

    def close(self) -> None:
        self.fetcher.close()


def write(client: KafkaClient, partitions, tag: str, count: int = 5) -> None:
    """``count`` records into each of ``partitions``, one batch each."""
    now = int(time.time() * 1000)
    client.produce([(tp, kcodecs.build_batch([Record(value=f"{tag}-{tp.partition}-{i}".encode(), timestamp=now)
                                              for i in range(count)])) for tp in partitions])
